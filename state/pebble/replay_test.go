package pebble_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/state"
	"github.com/eddyflow/eddy/state/pebble"
)

// commitCounter is a DB that counts its commits.
type commitCounter struct {
	*pebble.DB
	commits int
}

func (c *commitCounter) Commit() error {
	c.commits++
	return c.DB.Commit()
}

// TestReplayCommitsAsItGoes: a restore's replay of a long log into a
// store-backed backend commits every few MiB instead of holding the whole
// log in one pending batch, and the replayed state reads back.
func TestReplayCommitsAsItGoes(t *testing.T) {
	p := newPool(t)
	// The log: 4,000 values of 4 KiB (16 MiB) written through a backend
	// that records its changes.
	src := state.NewStoreBackend(maxPar, 0, maxPar, keySchema(t), openDB(t, p, t.TempDir(), 0, maxPar))
	var log []change
	src.SetChangeLog(func(kg, st uint32, op state.ChangeOp, key, sub, value []byte) error {
		log = append(log, change{kg, st, op, slices.Clone(key), slices.Clone(sub), slices.Clone(value)})
		return nil
	})
	v, err := state.NewValue[string](src, "v")
	if err != nil {
		t.Fatal(err)
	}
	keys, groups := keysOf(4000, 0, maxPar)
	for i, k := range keys {
		src.SetCurrentKey(k, groups[i])
		v.Update(fmt.Sprintf("%d:%s", i, strings.Repeat("x", 4096)))
	}
	if len(log) != len(keys) {
		t.Fatalf("%d changes logged, want %d", len(log), len(keys))
	}

	db := &commitCounter{DB: openDB(t, p, t.TempDir(), 0, maxPar)}
	b := state.NewStoreBackend(maxPar, 0, maxPar, keySchema(t), db)
	rv, err := state.NewValue[string](b, "v")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range log {
		if err := b.ApplyChange(c.kg, c.st, c.op, c.key, c.sub, c.value); err != nil {
			t.Fatal(err)
		}
	}
	// 16 MiB in commits of at most 4 MiB (and more of values crossing it).
	if db.commits < 3 {
		t.Errorf("replaying 16 MiB committed %d times, want at least 3 (one pending batch holds the log in memory)", db.commits)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		b.SetCurrentKey(k, groups[i])
		if got, _ := rv.Get(); !strings.HasPrefix(got, fmt.Sprintf("%d:", i)) || len(got) != len(fmt.Sprint(i))+1+4096 {
			t.Fatalf("key %d: %.20q (%d bytes) after the replay", i, got, len(got))
		}
	}
}
