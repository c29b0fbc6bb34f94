package state

import (
	"math/rand/v2"
	"testing"
)

// TestKeyGroupForIsHashModulo: key groups are the key's hash modulo the max
// parallelism, for powers of two (computed with a mask) and other values.
func TestKeyGroupForIsHashModulo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	key := make([]byte, 0, 16)
	for range 10000 {
		key = key[:r.IntN(16)]
		for i := range key {
			key[i] = byte(r.Uint32())
		}
		for _, m := range []int{1, 2, 3, 7, 100, 128, 1000, 4096, 32768} {
			if got, want := KeyGroupFor(key, m), int(HashKey(key)%uint64(m)); got != want {
				t.Fatalf("KeyGroupFor(%x, %d) = %d, want %d", key, m, got, want)
			}
		}
	}
}
