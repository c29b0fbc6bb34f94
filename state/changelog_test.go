package state_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/eddyflow/eddy/state"
)

type change struct {
	kg, state       uint32
	op              state.ChangeOp
	key, sub, value []byte
}

func (c change) apply(b *state.Backend) error {
	return b.ApplyChange(c.kg, c.state, c.op, c.key, c.sub, c.value)
}

// recordLog attaches a change log to b that appends to *log.
func recordLog(b *state.Backend, log *[]change) {
	b.SetChangeLog(func(kg, st uint32, op state.ChangeOp, key, sub, value []byte) error {
		*log = append(*log, change{kg, st, op, bytes.Clone(key), bytes.Clone(sub), bytes.Clone(value)})
		return nil
	})
}

// restoreAndReplay restores parts into a fresh backend with the states of
// newFull, applies log, and returns its snapshot.
func restoreAndReplay(t *testing.T, parts [][]byte, log []change) []byte {
	t.Helper()
	b := state.NewBackend(128, 0, 128, keySchema(t))
	b.SetDeterministic(true)
	newFull(t, b)
	if err := b.Restore(parts); err != nil {
		t.Fatal(err)
	}
	for _, c := range log {
		if err := c.apply(b); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// writeMix makes writes of every kind through the states of newFull.
func writeMix(b *state.Backend, v *state.Value[int64], l *state.List[string], m *state.Map[string, int32], r *state.Reducing[int64], i int) {
	setKey(b, fmt.Sprintf("k%d", i%200))
	switch i % 8 {
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
	case 7:
		if i%5 == 0 {
			m.Clear()
		} else {
			l.Add("x")
		}
	}
}

// TestChangeLogReplaysToTheSameState writes through every state type with a
// change log attached, replays the log into an empty backend, and demands
// byte-identical snapshots: the log carries every write.
func TestChangeLogReplaysToTheSameState(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	b.SetDeterministic(true)
	var log []change
	recordLog(b, &log)
	v, l, m, r := newFull(t, b)
	for i := 0; i < 3000; i++ {
		writeMix(b, v, l, m, r, i)
	}
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	want, _ := b.Snapshot()

	replay := state.NewBackend(128, 0, 128, keySchema(t))
	replay.SetDeterministic(true)
	newFull(t, replay)
	for _, c := range log {
		if err := c.apply(replay); err != nil {
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
	if got := restoreAndReplay(t, parts, log[len(log)/2:]); !bytes.Equal(got, want) {
		t.Fatal("materialized parts plus a replayed log suffix gave different state")
	}
}

// TestChangeLogReplayOverSteppedMaterialization: the runtime materializes a
// few key groups at a time while writes go on, so each part holds the
// state at a different point of the log, and recovery replays the log
// from the materialization's start over all of them. Every change must
// therefore be safe to apply again on top of state that already holds it.
func TestChangeLogReplayOverSteppedMaterialization(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	b.SetDeterministic(true)
	var log []change
	recordLog(b, &log)
	v, l, m, r := newFull(t, b)
	i := 0
	for ; i < 2000; i++ {
		writeMix(b, v, l, m, r, i)
	}
	start := len(log)
	var parts [][]byte
	for from := 0; from < 128; from += 8 {
		for range 150 {
			writeMix(b, v, l, m, r, i)
			i++
		}
		p, err := b.SnapshotGroups(from, from+8)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	for range 500 {
		writeMix(b, v, l, m, r, i)
		i++
	}
	want, _ := b.Snapshot()
	if got := restoreAndReplay(t, parts, log[start:]); !bytes.Equal(got, want) {
		t.Fatal("stepped materialization plus the log since its start gave different state")
	}
}

// TestChangeLogLogsElements: Map.Put/Delete and List.Add log one element,
// not the whole collection, so a large map or list costs the same per write
// as a small one.
func TestChangeLogLogsElements(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	var log []change
	recordLog(b, &log)
	_, l, m, _ := newFull(t, b)
	setKey(b, "big")
	for i := range 1000 {
		m.Put(fmt.Sprint(i), int32(i))
		l.Add(fmt.Sprint(i))
	}
	log = log[:0]
	m.Put("7", 70)
	m.Delete("8")
	m.Delete("absent")
	l.Add("last")
	if len(log) != 3 {
		t.Fatalf("logged %d changes, want 3: %+v", len(log), log)
	}
	for _, c := range log {
		if n := len(c.key) + len(c.sub) + len(c.value); n > 16 {
			t.Errorf("change %v logs %d bytes for one element", c.op, n)
		}
	}
	if log[0].op != state.ChangePutElem || log[1].op != state.ChangeDeleteElem || log[2].op != state.ChangePutElem {
		t.Errorf("ops %v %v %v", log[0].op, log[1].op, log[2].op)
	}
	// Deleting the last entry removes the key: a whole delete.
	setKey(b, "small")
	m.Put("only", 1)
	log = log[:0]
	m.Delete("only")
	if len(log) != 1 || log[0].op != state.ChangeDelete {
		t.Fatalf("deleting the last entry logged %+v, want one ChangeDelete", log)
	}
}

// TestApplyChangeRejectsDamage: changes whose element key or value does
// not decode, or whose operation does not fit the state, fail with a
// RestoreError naming the state, and never panic.
func TestApplyChangeRejectsDamage(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	newFull(t, b)
	kg := uint32(state.KeyGroupFor([]byte("k"), 128))
	cases := []struct {
		name string
		c    change
	}{
		{"list index not a varint", change{kg, state.StateID("seen"), state.ChangePutElem, []byte("k"), []byte{0x80}, []byte{}}},
		{"list index huge", change{kg, state.StateID("seen"), state.ChangePutElem, []byte("k"), []byte{0xff, 0xff, 0xff, 0xff, 0x7f}, []byte{}}},
		{"list element delete", change{kg, state.StateID("seen"), state.ChangeDeleteElem, []byte("k"), []byte{0}, nil}},
		{"map value bad", change{kg, state.StateID("per-tag"), state.ChangePutElem, []byte("k"), []byte("a"), []byte{0xff}}},
		{"element op on a value", change{kg, state.StateID("count"), state.ChangePutElem, []byte("k"), []byte{0}, []byte{1}}},
		{"unknown op", change{kg, state.StateID("count"), state.ChangeOp(9), []byte("k"), nil, nil}},
	}
	for _, tc := range cases {
		err := tc.c.apply(b)
		var re *state.RestoreError
		if !errors.As(err, &re) {
			t.Errorf("%s: err = %v, want a RestoreError", tc.name, err)
		}
	}
}

func TestChangeLogFailureIsReported(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	v, _ := state.NewValue[int64](b, "count")
	b.SetChangeLog(func(uint32, uint32, state.ChangeOp, []byte, []byte, []byte) error { return fmt.Errorf("log full") })
	setKey(b, "a")
	v.Update(1)
	if b.Err() == nil {
		t.Fatal("a failed log write was not reported")
	}
}

// TestReplayMapOfSlices: replayed map values that hold slices (a window's
// records) do not share memory: each keeps its own elements.
func TestReplayMapOfSlices(t *testing.T) {
	type recs struct {
		Items []string `proto:"1"`
	}
	b := state.NewBackend(128, 0, 128, keySchema(t))
	b.SetDeterministic(true)
	var log []change
	recordLog(b, &log)
	m, err := state.NewMap[int64, recs](b, "windows")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		setKey(b, fmt.Sprintf("k%d", i%3))
		m.Put(int64(i%4), recs{Items: []string{fmt.Sprint("a", i), fmt.Sprint("b", i)}})
	}
	want, _ := b.Snapshot()
	replay := state.NewBackend(128, 0, 128, keySchema(t))
	replay.SetDeterministic(true)
	if _, err := state.NewMap[int64, recs](replay, "windows"); err != nil {
		t.Fatal(err)
	}
	for _, c := range log {
		if err := c.apply(replay); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := replay.Snapshot(); !bytes.Equal(got, want) {
		t.Fatal("replayed map values with slices differ from the state that logged them")
	}
}
