package state_test

import (
	"fmt"
	"testing"

	"github.com/eddyflow/eddy/state"
)

// BenchmarkRestoreParts restores 64 MiB of 1 KiB values (64 key groups) from
// one part and from 64 parts (what a changelog materialization leaves).
//
//	go test ./state -run '^$' -bench RestoreParts -benchmem
func BenchmarkRestoreParts(b *testing.B) {
	be := payloadBackend(b)
	for _, step := range []int{64, 1} {
		var parts [][]byte
		var ranges [][2]int
		for from := 0; from < 64; from += step {
			p, _ := be.SnapshotGroups(from, from+step)
			parts = append(parts, p)
			ranges = append(ranges, [2]int{from, from + step})
		}
		b.Run(fmt.Sprintf("parts=%d", len(parts)), func(b *testing.B) {
			for range b.N {
				r := state.NewBackend(128, 0, 64, keySchema(b))
				state.NewValue[benchPayload](r, "values")
				if err := r.RestoreRanged(parts, ranges); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
