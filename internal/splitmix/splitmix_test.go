package splitmix

import "testing"

// TestReferenceOutputs: from state 0, the first outputs of the reference
// SplitMix64 (Steele, Lea and Flood; Vigna's splitmix64.c).
func TestReferenceOutputs(t *testing.T) {
	var s uint64
	for i, want := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f} {
		if got := Next(&s); got != want {
			t.Fatalf("output %d = %#x, want %#x", i, got, want)
		}
	}
}
