package state_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/eddyflow/eddy/state"
)

type change struct {
	kg, state  uint32
	key, value []byte
	del        bool
}

// TestChangeLogReplaysToTheSameState writes through every state type with a
// change log attached, replays the log into an empty backend, and demands
// byte-identical snapshots: the log carries every write.
func TestChangeLogReplaysToTheSameState(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	b.SetDeterministic(true)
	var log []change
	b.SetChangeLog(func(kg, st uint32, key, value []byte, del bool) error {
		log = append(log, change{kg, st, bytes.Clone(key), bytes.Clone(value), del})
		return nil
	})
	v, l, m, r := newFull(t, b)
	for i := 0; i < 3000; i++ {
		setKey(b, fmt.Sprintf("k%d", i%200))
		switch i % 7 {
		case 0:
			v.Update(int64(i))
		case 1:
			l.Add(fmt.Sprint(i))
		case 2:
			m.Put(fmt.Sprint(i%5), int32(i))
		case 3:
			r.Add(int64(i))
		case 4:
			m.Delete(fmt.Sprint(i % 5))
		case 5:
			if i%3 == 0 {
				v.Clear()
			}
		case 6:
			l.Update([]string{"reset"})
		}
	}
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	want, _ := b.Snapshot()

	replay := state.NewBackend(128, 0, 128, keySchema(t))
	replay.SetDeterministic(true)
	newFull(t, replay)
	for _, c := range log {
		if err := replay.ApplyChange(c.kg, c.state, c.key, c.value, c.del); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := replay.Snapshot()
	if !bytes.Equal(got, want) {
		t.Fatal("replaying the change log gave different state")
	}

	// Materialized in slices of key groups, then the changes after the
	// first slice replayed on top: the same state again.
	var parts [][]byte
	for from := 0; from < 128; from += 16 {
		p, err := b.SnapshotGroups(from, from+16)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	again := state.NewBackend(128, 0, 128, keySchema(t))
	again.SetDeterministic(true)
	newFull(t, again)
	if err := again.Restore(parts); err != nil {
		t.Fatal(err)
	}
	for _, c := range log[len(log)/2:] {
		if err := again.ApplyChange(c.kg, c.state, c.key, c.value, c.del); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := again.Snapshot(); !bytes.Equal(got, want) {
		t.Fatal("materialized parts plus a replayed log suffix gave different state")
	}
}

func TestChangeLogFailureIsReported(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	v, _ := state.NewValue[int64](b, "count")
	b.SetChangeLog(func(uint32, uint32, []byte, []byte, bool) error { return fmt.Errorf("log full") })
	setKey(b, "a")
	v.Update(1)
	if b.Err() == nil {
		t.Fatal("a failed log write was not reported")
	}
}
