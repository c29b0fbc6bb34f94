package state_test

import (
	"fmt"
	"testing"

	"github.com/eddyflow/eddy/state"
)

// windowBackend returns a backend of all 128 key groups holding a sliding
// window job's state: 5,000 driver keys, each a map of 7 open windows
// (start -> benchWin).
func windowBackend(b *testing.B) *state.Backend {
	be := state.NewBackend(128, 0, 128, keySchema(b))
	m, err := state.NewMap[int64, benchWin](be, "windows")
	if err != nil {
		b.Fatal(err)
	}
	for i := range 5000 {
		k := []byte(fmt.Sprintf("driver-%05d", i))
		be.SetCurrentKey(k, state.KeyGroupFor(k, 128))
		t := int64(1_700_000_000 + i%60)
		for s := t - 6; s <= t; s++ {
			m.Put(s*10, benchWin{End: s*10 + 60, Acc: int64(i * int(s-t+7))})
		}
	}
	return be
}

// BenchmarkSnapshotWindows snapshots the window state of windowBackend, 8
// key groups per call as a changelog materialization step does.
//
//	go test ./state -run '^$' -bench SnapshotWindows -benchmem
func BenchmarkSnapshotWindows(b *testing.B) {
	be := windowBackend(b)
	size := 0
	for from := 0; from < 128; from += 8 {
		p, err := be.SnapshotGroups(from, from+8)
		if err != nil {
			b.Fatal(err)
		}
		size += len(p)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for from := 0; from < 128; from += 8 {
			if _, err := be.SnapshotGroups(from, from+8); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkRestoreWindows restores the window state of windowBackend into
// a fresh backend from one part.
//
//	go test ./state -run '^$' -bench RestoreWindows -benchmem
func BenchmarkRestoreWindows(b *testing.B) {
	snap, err := windowBackend(b).Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(snap)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r := state.NewBackend(128, 0, 128, keySchema(b))
		if _, err := state.NewMap[int64, benchWin](r, "windows"); err != nil {
			b.Fatal(err)
		}
		if err := r.RestorePart(snap, 0, 128); err != nil {
			b.Fatal(err)
		}
	}
}
