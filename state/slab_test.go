package state_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/state"
)

// churnModel is what the state of a churn test should hold, in plain maps.
type churnModel struct {
	values map[string]int64
	lists  map[string][]string
	maps   map[string]map[string]int32
}

// TestChurnKeepsValues runs random writes and deletes over a sliding key
// space through every state type, with 4 key groups so that each holds
// thousands of keys and deleted entries and key bytes are reused and
// compacted many times, then checks every key ever used against a model and
// that snapshot, restore and snapshot again give the same bytes.
func TestChurnKeepsValues(t *testing.T) {
	const maxPar, ops, window = 4, 200_000, 3000
	b := state.NewBackend(maxPar, 0, maxPar, keySchema(t))
	b.SetDeterministic(true)
	v, l, m, _ := newFull(t, b)
	want := churnModel{map[string]int64{}, map[string][]string{}, map[string]map[string]int32{}}
	rng := rand.New(rand.NewPCG(1, 2))
	used := map[string]bool{}
	key := func(i int) string {
		switch i % 1000 {
		case 0:
			return "" // the empty key has no bytes to put in an arena
		case 1:
			return strings.Repeat("long", 300) + fmt.Sprint(i) // too long for an arena
		}
		switch i % 3 {
		case 0:
			// Packed inline (at most 7 bytes), with zero bytes inside
			// and at the end: uvarint(i) is prefix-free, so the
			// padded keys are distinct.
			return string(binary.AppendUvarint(nil, uint64(i))) + strings.Repeat("\x00", i%5)
		case 1:
			return fmt.Sprintf("%08d", i) // 8 bytes: one past the inline keys
		}
		return fmt.Sprintf("churn-key-%08d", i)
	}
	for op := 0; op < ops; op++ {
		k := key(op/20 + rng.IntN(window)) // the window slides by one key every 20 ops
		used[k] = true
		setKey(b, k)
		// Reads first, sometimes, and several writes to one key, so that
		// writes also start from cached (present or absent) entries.
		if rng.IntN(2) == 0 {
			v.Get()
			l.Get()
			m.Len()
		}
		for range 1 + rng.IntN(3) {
			churnOp(rng, op, k, v, l, m, &want)
		}
	}
	checkChurn(t, "after the churn", b, v, l, m, used, want)

	snap, err := b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r := state.NewBackend(maxPar, 0, maxPar, keySchema(t))
	r.SetDeterministic(true)
	rv, rl, rm, _ := newFull(t, r)
	if err := r.Restore([][]byte{snap}); err != nil {
		t.Fatal(err)
	}
	checkChurn(t, "after restore", r, rv, rl, rm, used, want)
	again, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap, again) {
		t.Fatalf("snapshot of the restored state differs: %d bytes, was %d", len(again), len(snap))
	}
}

// churnOp does one random write or delete of the current key k to the states
// and to the model.
func churnOp(rng *rand.Rand, op int, k string, v *state.Value[int64], l *state.List[string], m *state.Map[string, int32], want *churnModel) {
	switch rng.IntN(8) {
	case 0, 1:
		x := rng.Int64()
		v.Update(x)
		want.values[k] = x
	case 2:
		v.Clear()
		delete(want.values, k)
	case 3:
		s := fmt.Sprint(op)
		l.Add(s)
		want.lists[k] = append(want.lists[k], s)
	case 4:
		l.Clear()
		delete(want.lists, k)
	case 5:
		mk, x := fmt.Sprint(op%3), int32(op)
		m.Put(mk, x)
		if want.maps[k] == nil {
			want.maps[k] = map[string]int32{}
		}
		want.maps[k][mk] = x
	case 6:
		m.Clear()
		delete(want.maps, k)
	case 7:
		mk := fmt.Sprint(op % 3)
		m.Delete(mk) // clears the key with its last map entry
		delete(want.maps[k], mk)
		if len(want.maps[k]) == 0 {
			delete(want.maps, k)
		}
	}
}

func checkChurn(t *testing.T, when string, b *state.Backend, v *state.Value[int64], l *state.List[string], m *state.Map[string, int32],
	used map[string]bool, want churnModel) {
	t.Helper()
	for k := range used {
		setKey(b, k)
		got, ok := v.Get()
		if w, wok := want.values[k]; ok != wok || got != w {
			t.Fatalf("%s: key %.20q: value %d, %v; want %d, %v", when, k, got, ok, w, wok)
		}
		if got, w := l.Get(), want.lists[k]; !slices.Equal(got, w) {
			t.Fatalf("%s: key %.20q: list %q, want %q", when, k, got, w)
		}
		w := want.maps[k]
		if m.Len() != len(w) {
			t.Fatalf("%s: key %.20q: map of %d, want %v", when, k, m.Len(), w)
		}
		for mk, x := range w {
			if got, ok := m.Get(mk); !ok || got != x {
				t.Fatalf("%s: key %.20q: map[%s] = %d, %v; want %d", when, k, mk, got, ok, x)
			}
		}
	}
	if n, w := b.Entries(), len(want.values)+len(want.lists)+len(want.maps); n != w {
		t.Fatalf("%s: %d entries, want %d", when, n, w)
	}
}

// TestKeyChurnMemoryIsBounded inserts and deletes a million distinct keys of
// one key group, keeping every 512th: without compaction every block of key
// bytes stays alive for its few kept keys (32 MB of keys), with it the heap
// holds about the kept keys.
func TestKeyChurnMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("a million keys")
	}
	const keys, keep = 1_000_000, 512
	b := state.NewBackend(1, 0, 1, keySchema(t))
	v, err := state.NewValue[int64](b, "count")
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	key := make([]byte, 0, 32)
	for i := 0; i < keys; i++ {
		key = fmt.Appendf(key[:0], "%032d", i)
		b.SetCurrentKey(key, 0)
		v.Update(int64(i))
		if i%keep != 0 {
			v.Clear()
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	held := int64(ms.HeapAlloc) - int64(before)
	const bound = 4 << 20 // the kept keys are 62 KB; 32 MB if blocks leak
	t.Logf("%d bytes of heap held", held)
	if held > bound {
		t.Fatalf("%d kept keys of %d bytes hold %d bytes of heap, want under %d", keys/keep+1, len(key), held, bound)
	}
	if n := b.Entries(); n != (keys+keep-1)/keep {
		t.Fatalf("%d entries, want %d", n, (keys+keep-1)/keep)
	}
	for i := 0; i < keys; i += keep {
		key = fmt.Appendf(key[:0], "%032d", i)
		b.SetCurrentKey(key, 0)
		if x, ok := v.Get(); !ok || x != int64(i) {
			t.Fatalf("kept key %s: %d, %v", key, x, ok)
		}
	}
	runtime.KeepAlive(b)
}

// TestFailedLoadKeepsTheOldValue replays a change whose value does not decode
// over an existing key: the replay fails and the key keeps its value.
func TestFailedLoadKeepsTheOldValue(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	l, err := state.NewList[string](b, "seen")
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("driver-7")
	kg := state.KeyGroupFor(key, 128)
	b.SetCurrentKey(key, kg)
	l.Add("a")
	l.Add("b")
	if err := b.ApplyChange(uint32(kg), state.StateID("seen"), state.ChangePut, key, nil, []byte{0x0a, 0x05, 'x'}); err == nil {
		t.Fatal("a truncated list was replayed without an error")
	}
	b.SetCurrentKey(key, kg)
	if got := l.Get(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("list after a failed replay: %q", got)
	}
}

// TestSnapshotOutlivesTheNext checks that a snapshot's bytes stay as they
// were when the backend takes the next one (it reuses its gathering buffer).
func TestSnapshotOutlivesTheNext(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	b.SetDeterministic(true)
	v, l, _, _ := newFull(t, b)
	write := func(n int, x int64) {
		for i := 0; i < n; i++ {
			setKey(b, fmt.Sprintf("key-%d", i))
			v.Update(x)
			l.Add(fmt.Sprint(x))
		}
	}
	write(500, 1)
	first, err := b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	kept := bytes.Clone(first)
	write(1000, 2) // other values for the first 500 keys, and 500 more
	if _, err := b.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, kept) {
		t.Fatal("the second snapshot changed the bytes of the first")
	}
}
