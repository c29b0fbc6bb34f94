package state

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/eddyflow/eddy/serde"
)

// testChunk is the GroupSnapshot chunk of the tests: groups of a few
// hundred KB take many.
const testChunk = 8 << 10

type loggedChange struct {
	kg, st          uint32
	op              ChangeOp
	key, sub, value []byte
}

// snapWorkload is a backend of key groups [0, 4) whose value state holds
// large values and whose keys are deleted and re-added often, so key
// arenas get compacted (the group's map replaced) while a GroupSnapshot
// walks it; and a map state with element changes.
type snapWorkload struct {
	b    *Backend
	v    *Value[string]
	m    *Map[string, int32]
	keys [][]byte
	rng  *rand.Rand
	log  []loggedChange
	on   bool // log changes
}

func newSnapWorkload(t *testing.T, seed uint64, deterministic bool) *snapWorkload {
	t.Helper()
	ks, err := serde.SchemaOf[string]()
	if err != nil {
		t.Fatal(err)
	}
	w := &snapWorkload{b: NewBackend(128, 0, 4, ks), rng: rand.New(rand.NewPCG(seed, 7))}
	w.b.SetDeterministic(deterministic)
	if w.v, err = NewValue[string](w.b, "v"); err != nil {
		t.Fatal(err)
	}
	if w.m, err = NewMap[string, int32](w.b, "m"); err != nil {
		t.Fatal(err)
	}
	w.b.SetChangeLog(func(kg, st uint32, op ChangeOp, key, sub, value []byte) error {
		if w.on {
			w.log = append(w.log, loggedChange{kg, st, op, bytes.Clone(key), bytes.Clone(sub), bytes.Clone(value)})
		}
		return nil
	})
	for i := 0; len(w.keys) < 1000; i++ {
		k := []byte(fmt.Sprintf("a-rather-long-key-so-that-deletes-pile-up-dead-bytes-%08d", i))
		if KeyGroupFor(k, 128) < 4 {
			w.keys = append(w.keys, k)
		}
	}
	for i := range w.keys {
		w.set(i)
	}
	return w
}

func (w *snapWorkload) set(i int) {
	k := w.keys[i]
	w.b.SetCurrentKey(k, KeyGroupFor(k, 128))
	w.v.Update(fmt.Sprintf("%d-%s", w.rng.Int(), bytes.Repeat([]byte{'x'}, 600+w.rng.IntN(400))))
}

// mutate makes n random writes: value updates, deletes, re-adds, and map
// element puts and deletes.
func (w *snapWorkload) mutate(n int) {
	for range n {
		i := w.rng.IntN(len(w.keys))
		k := w.keys[i]
		w.b.SetCurrentKey(k, KeyGroupFor(k, 128))
		switch r := w.rng.IntN(10); {
		case r < 4:
			w.v.Clear()
		case r < 7:
			w.set(i)
		case r < 9:
			w.m.Put(fmt.Sprint(w.rng.IntN(4)), int32(w.rng.IntN(100)))
		default:
			w.m.Delete(fmt.Sprint(w.rng.IntN(4)))
		}
	}
}

// snapshot returns w's state in key order.
func (w *snapWorkload) snapshot(t *testing.T) []byte {
	t.Helper()
	det := w.b.deterministic
	w.b.SetDeterministic(true)
	defer w.b.SetDeterministic(det)
	s, err := w.b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// restored restores parts into a fresh backend of w's states, applies log,
// and returns its state in key order.
func restored(t *testing.T, parts [][]byte, log []loggedChange) []byte {
	t.Helper()
	w := newEmpty(t)
	if err := w.b.Restore(parts); err != nil {
		t.Fatal(err)
	}
	for _, c := range log {
		if err := w.b.ApplyChange(c.kg, c.st, c.op, c.key, c.sub, c.value); err != nil {
			t.Fatal(err)
		}
	}
	return w.snapshot(t)
}

func newEmpty(t *testing.T) *snapWorkload {
	ks, _ := serde.SchemaOf[string]()
	w := &snapWorkload{b: NewBackend(128, 0, 4, ks)}
	var err error
	if w.v, err = NewValue[string](w.b, "v"); err != nil {
		t.Fatal(err)
	}
	if w.m, err = NewMap[string, int32](w.b, "m"); err != nil {
		t.Fatal(err)
	}
	return w
}

// groupMaps returns the identity of each key group's map of the value state.
func (w *snapWorkload) groupMaps() []uintptr {
	var ids []uintptr
	for _, m := range w.v.groups {
		ids = append(ids, reflect.ValueOf(m.long).Pointer()) // the workload's keys are long
	}
	return ids
}

// TestGroupSnapshotPartsMatchSnapshotGroups: stepped without writes in
// between, a GroupSnapshot's parts restore to exactly the state
// SnapshotGroups gives, in parts of whole key groups covering the range
// in order, each step bounded.
func TestGroupSnapshotPartsMatchSnapshotGroups(t *testing.T) {
	for _, det := range []bool{false, true} {
		w := newSnapWorkload(t, 1, det)
		want := w.snapshot(t)
		whole, err := w.b.SnapshotGroups(0, 4)
		if err != nil {
			t.Fatal(err)
		}
		var sizes []int // each group's bytes as SnapshotGroups counts them
		for kg := range 4 {
			sizes = append(sizes, w.b.GroupBytes(kg))
		}
		s := w.b.NewGroupSnapshot(0, 4, 64<<10)
		s.chunk = testChunk
		var parts [][]byte
		steps, next := 0, 0
		for !s.Done() {
			p, err := s.Step(testChunk)
			if err != nil {
				t.Fatal(err)
			}
			steps++
			if p == nil {
				continue
			}
			if p.From != next || p.To <= p.From {
				t.Fatalf("part [%d, %d) after groups up to %d", p.From, p.To, next)
			}
			next = p.To
			b := p.Bytes()
			if len(b) != p.Size() {
				t.Fatalf("part of %d bytes says it has %d", len(b), p.Size())
			}
			parts = append(parts, b)
		}
		if next != 4 {
			t.Fatalf("parts end at group %d, want 4", next)
		}
		for kg, want := range sizes {
			if got := w.b.GroupBytes(kg); got != want || got == 0 {
				t.Fatalf("GroupBytes(%d) = %d after the GroupSnapshot, %d after SnapshotGroups", kg, got, want)
			}
		}
		if got := restored(t, parts, nil); !bytes.Equal(got, want) {
			t.Fatalf("deterministic=%v: the parts restore to a different state", det)
		}
		if got := restored(t, [][]byte{whole}, nil); !bytes.Equal(got, want) {
			t.Fatal("SnapshotGroups restores to a different state")
		}
		// About 1 MB in 4 groups: a step of one chunk writes at most
		// two (unless the groups are written whole, for
		// SetDeterministic).
		if min := len(whole) / (2*testChunk + 2<<10); !det && steps < min {
			t.Fatalf("%d steps for %d bytes, want at least %d: a step is not bounded", steps, len(whole), min)
		}
	}
}

// TestGroupSnapshotFuzzyPlusLogIsExact: with writes between steps (value
// updates, deletes that compact key arenas, map elements), the parts plus
// the log since the snapshot's start restore the state at the log's end.
func TestGroupSnapshotFuzzyPlusLogIsExact(t *testing.T) {
	for seed := range uint64(4) {
		w := newSnapWorkload(t, seed, false)
		before := w.groupMaps()
		w.on = true
		s := w.b.NewGroupSnapshot(0, 4, 100<<10)
		s.chunk = testChunk
		var parts [][]byte
		for !s.Done() {
			w.mutate(60)
			p, err := s.Step(testChunk)
			if err != nil {
				t.Fatal(err)
			}
			if p != nil {
				parts = append(parts, p.Bytes())
			}
		}
		w.mutate(500)
		compacted := 0
		for i, id := range w.groupMaps() {
			if id != before[i] {
				compacted++
			}
		}
		if compacted == 0 {
			t.Fatalf("seed %d: no key group's map was rebuilt: the test does not cover compaction", seed)
		}
		if got, want := restored(t, parts, w.log), w.snapshot(t); !bytes.Equal(got, want) {
			t.Fatalf("seed %d: fuzzy parts plus the log restore a different state", seed)
		}
	}
}

// TestGroupSnapshotClose: a snapshot closed halfway releases its walk, and
// the backend stays usable.
func TestGroupSnapshotClose(t *testing.T) {
	w := newSnapWorkload(t, 9, false)
	s := w.b.NewGroupSnapshot(0, 4, 1<<20)
	s.chunk = testChunk
	if _, err := s.Step(testChunk); err != nil {
		t.Fatal(err)
	}
	if s.Done() || s.pull == nil {
		t.Fatal("one chunk of about 1 MB finished the snapshot")
	}
	s.Close()
	s.Close()
	if s.pull != nil {
		t.Fatal("Close left the walk running")
	}
	w.mutate(100)
	whole, err := w.b.SnapshotGroups(0, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := restored(t, [][]byte{whole}, nil); !bytes.Equal(got, w.snapshot(t)) {
		t.Fatal("snapshot after Close restores a different state")
	}
}

// TestGroupSnapshotRecycledChunks: with groups larger than a chunk, parts
// joined with AppendTo hand their chunk buffers to later steps; two
// snapshots stepped in turn, each joining its parts into one reused
// buffer, still restore to exactly SnapshotGroups' state, so no buffer is
// recycled while a pending part still holds it.
func TestGroupSnapshotRecycledChunks(t *testing.T) {
	w := newSnapWorkload(t, 3, false)
	for i, k := range w.keys { // about 1.5 MB: each group over a chunk
		w.b.SetCurrentKey(k, KeyGroupFor(k, 128))
		w.v.Update(fmt.Sprintf("%d-%s", i, bytes.Repeat([]byte{'y'}, 1200+w.rng.IntN(800))))
	}
	want := w.snapshot(t)
	if _, err := w.b.SnapshotGroups(0, 4); err != nil { // records the groups' sizes
		t.Fatal(err)
	}
	for kg := range 4 {
		if got := w.b.GroupBytes(kg); got < SnapshotChunk {
			t.Fatalf("group %d holds %d bytes, less than a chunk: the test would not use full chunks", kg, got)
		}
	}
	type run struct {
		s     *GroupSnapshot
		buf   []byte
		parts [][]byte
	}
	runs := []*run{{s: w.b.NewGroupSnapshot(0, 4, 600<<10)}, {s: w.b.NewGroupSnapshot(0, 4, 1)}}
	for !runs[0].s.Done() || !runs[1].s.Done() {
		for _, r := range runs {
			if r.s.Done() {
				continue
			}
			p, err := r.s.Step(SnapshotChunk)
			if err != nil {
				t.Fatal(err)
			}
			if p != nil {
				r.buf = p.AppendTo(r.buf[:0])
				r.parts = append(r.parts, bytes.Clone(r.buf))
			}
		}
	}
	for i, r := range runs {
		if got := restored(t, r.parts, nil); !bytes.Equal(got, want) {
			t.Fatalf("snapshot %d (%d parts) restores to a different state", i, len(r.parts))
		}
	}
}
