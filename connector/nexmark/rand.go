package nexmark

import "math/bits"

// mix is the SplitMix64 finalizer: a bijection of uint64 with good
// avalanche.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

const golden = 0x9e3779b97f4a7c15

// rng is a SplitMix64 generator that lives on the stack. Every event has
// its own, seeded from (seed, event index) by eventRNG, which is what makes
// an event's content independent of the events before it.
type rng struct{ s uint64 }

func eventRNG(seed uint64, i int64) rng {
	return rng{s: mix(mix(seed^0x6e65786d61726b) + uint64(i)*golden)}
}

func (r *rng) uint64() uint64 {
	r.s += golden
	return mix(r.s)
}

// intn returns a number in [0, n) for n > 0 (Lemire's multiply-shift: the
// bias, at most n/2^64, is far below anything a test could see).
func (r *rng) intn(n int64) int64 {
	hi, _ := bits.Mul64(r.uint64(), uint64(n))
	return int64(hi)
}

// float returns a number in [0, 1) with 53 random bits.
func (r *rng) float() float64 { return float64(r.uint64()>>11) * 0x1p-53 }
