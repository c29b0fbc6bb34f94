package splitmix

// Golden is SplitMix64's increment, 2^64 divided by the golden ratio.
const Golden = 0x9e3779b97f4a7c15

// Mix is the SplitMix64 finalizer: a bijection of uint64 with good
// avalanche.
func Mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Next advances the generator state *s and returns its next output.
func Next(s *uint64) uint64 {
	*s += Golden
	return Mix(*s)
}
