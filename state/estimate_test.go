package state

import (
	"fmt"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/serde"
)

// TestSnapshotEstimateFollowsGrowth: after the state doubles, a snapshot's
// size estimate is about the new size (the last snapshot's is half), so
// that AppendSnapshot allocates its buffer once.
func TestSnapshotEstimateFollowsGrowth(t *testing.T) {
	ks, _ := serde.SchemaOf[string]()
	b := NewBackend(128, 0, 4, ks)
	v, err := NewValue[string](b, "v")
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewList[int64](b, "l")
	if err != nil {
		t.Fatal(err)
	}
	put := func(from, to int) {
		for i := from; i < to; i++ {
			b.SetCurrentKey(fmt.Appendf(nil, "key-%d", i), i%4)
			v.Update(strings.Repeat("x", 50))
			if i%2 == 0 {
				l.Add(int64(i))
			}
		}
	}
	put(0, 1000)
	if _, err := b.Snapshot(); err != nil {
		t.Fatal(err)
	}
	put(1000, 2000)
	est := b.snapshotEstimate(0, 4)
	snap, err := b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if est < len(snap) || est > len(snap)*5/4 {
		t.Fatalf("estimate %d bytes for a snapshot of %d", est, len(snap))
	}
}
