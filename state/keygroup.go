package state

// DefaultMaxParallelism is the number of key groups when a job does not set
// one. It bounds how far a keyed operator can be scaled out.
const DefaultMaxParallelism = 128

// HashKey is the stable 64-bit hash of a serialized key (FNV-1a with a final
// avalanche). It must never change: key groups of stored state depend on it.
func HashKey(key []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range key {
		h ^= uint64(c)
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// KeyGroupFor returns the key group of a serialized key.
func KeyGroupFor(key []byte, maxParallelism int) int {
	h, m := HashKey(key), uint64(maxParallelism)
	if m&(m-1) == 0 {
		// A power of two (the default 128): the same remainder without
		// a 64-bit division, whose latency every shuffled record waited
		// for.
		return int(h & (m - 1))
	}
	return int(h % m)
}

// KeyGroupRange returns the key groups [start, end) that subtask i of
// parallelism p owns.
func KeyGroupRange(maxParallelism, parallelism, subtask int) (start, end int) {
	start = (subtask*maxParallelism + parallelism - 1) / parallelism
	end = ((subtask+1)*maxParallelism + parallelism - 1) / parallelism
	return start, end
}

// SubtaskFor returns the subtask of parallelism p that owns key group kg.
func SubtaskFor(kg, maxParallelism, parallelism int) int {
	return kg * parallelism / maxParallelism
}
