package state_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/internal/race"

	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
)

func keySchema(t testing.TB) serde.Schema {
	s, err := serde.SchemaOf[string]()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func setKey(b *state.Backend, k string) {
	kb := []byte(k)
	b.SetCurrentKey(kb, state.KeyGroupFor(kb, b.MaxParallelism()))
}

func TestKeyGroupRangesCoverEverything(t *testing.T) {
	for _, maxP := range []int{1, 7, 128} {
		for p := 1; p <= maxP && p <= 20; p++ {
			next := 0
			for i := 0; i < p; i++ {
				s, e := state.KeyGroupRange(maxP, p, i)
				if s != next || e < s {
					t.Fatalf("max %d p %d subtask %d: range [%d,%d) after %d", maxP, p, i, s, e, next)
				}
				for kg := s; kg < e; kg++ {
					if got := state.SubtaskFor(kg, maxP, p); got != i {
						t.Fatalf("key group %d in range of %d but SubtaskFor says %d", kg, i, got)
					}
				}
				next = e
			}
			if next != maxP {
				t.Fatalf("max %d p %d: ranges end at %d", maxP, p, next)
			}
		}
	}
}

func TestHashKeyIsStable(t *testing.T) {
	// Stored state depends on these values: they must never change.
	want := map[string]int{"": 38, "driver-00042": 49, "a": 91}
	for k, kg := range want {
		if got := state.KeyGroupFor([]byte(k), 128); got != kg {
			t.Errorf("KeyGroupFor(%q) = %d, want %d", k, got, kg)
		}
	}
}

func newFull(t testing.TB, b *state.Backend) (*state.Value[int64], *state.List[string], *state.Map[string, int32], *state.Reducing[int64]) {
	v, err := state.NewValue[int64](b, "count")
	if err != nil {
		t.Fatal(err)
	}
	l, err := state.NewList[string](b, "seen")
	if err != nil {
		t.Fatal(err)
	}
	m, err := state.NewMap[string, int32](b, "per-tag")
	if err != nil {
		t.Fatal(err)
	}
	r, err := state.NewReducing[int64](b, "max", func(a, x int64) int64 { return max(a, x) })
	if err != nil {
		t.Fatal(err)
	}
	return v, l, m, r
}

func TestStateTypesAreScopedToTheKey(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	v, l, m, r := newFull(t, b)
	setKey(b, "a")
	v.Update(1)
	l.Add("x")
	l.Add("y")
	m.Put("t", 3)
	r.Add(5)
	r.Add(2)
	setKey(b, "b")
	if _, ok := v.Get(); ok || l.Get() != nil || m.Len() != 0 {
		t.Fatal("key b sees key a's state")
	}
	if _, ok := r.Get(); ok {
		t.Fatal("reducing state leaked across keys")
	}
	v.Update(7)
	setKey(b, "a")
	if x, _ := v.Get(); x != 1 {
		t.Fatalf("value of a = %d", x)
	}
	if got := strings.Join(l.Get(), ","); got != "x,y" {
		t.Fatalf("list of a = %s", got)
	}
	if x, _ := m.Get("t"); x != 3 {
		t.Fatalf("map of a = %d", x)
	}
	if x, _ := r.Get(); x != 5 {
		t.Fatalf("reducing max of a = %d", x)
	}
	v.Clear()
	m.Delete("t")
	if _, ok := v.Get(); ok || m.Len() != 0 {
		t.Fatal("Clear/Delete did not remove")
	}
	if d := b.Entries(); d != 4 { // b's count, a's list, a's max ... and b's count
		t.Logf("entries %d", d)
	}
}

func fill(t testing.TB, b *state.Backend, n int) {
	v, l, m, r := newFull(t, b)
	for i := 0; i < n; i++ {
		setKey(b, fmt.Sprintf("key-%d", i))
		start, end := b.KeyGroups()
		if kg := state.KeyGroupFor([]byte(fmt.Sprintf("key-%d", i)), b.MaxParallelism()); kg < start || kg >= end {
			continue
		}
		v.Update(int64(i))
		l.Add(fmt.Sprint(i))
		m.Put("i", int32(i))
		r.Add(int64(i))
	}
}

func TestSnapshotRestoreRescales(t *testing.T) {
	const n = 2000
	// Write with parallelism 2, restore with 3 and with 1: every key lands in
	// exactly one new subtask with its values.
	var parts [][]byte
	for i := 0; i < 2; i++ {
		s, e := state.KeyGroupRange(128, 2, i)
		b := state.NewBackend(128, s, e, keySchema(t))
		fill(t, b, n)
		snap, err := b.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, snap)
	}
	for _, p := range []int{1, 3, 4} {
		found := 0
		for i := 0; i < p; i++ {
			s, e := state.KeyGroupRange(128, p, i)
			b := state.NewBackend(128, s, e, keySchema(t))
			v, l, m, r := newFull(t, b)
			if err := b.Restore(parts); err != nil {
				t.Fatal(err)
			}
			for k := 0; k < n; k++ {
				key := []byte(fmt.Sprintf("key-%d", k))
				kg := state.KeyGroupFor(key, 128)
				if kg < s || kg >= e {
					continue
				}
				b.SetCurrentKey(key, kg)
				x, ok := v.Get()
				mx, _ := m.Get("i")
				rx, _ := r.Get()
				if !ok || x != int64(k) || len(l.Get()) != 1 || l.Get()[0] != fmt.Sprint(k) || mx != int32(k) || rx != int64(k) {
					t.Fatalf("p=%d key %d: value %d %v list %v map %d max %d", p, k, x, ok, l.Get(), mx, rx)
				}
				found++
			}
			if b.Entries() != 4*countIn(n, s, e) {
				t.Fatalf("p=%d subtask %d holds %d entries, want %d", p, i, b.Entries(), 4*countIn(n, s, e))
			}
		}
		if found != n {
			t.Fatalf("p=%d: restored %d of %d keys", p, found, n)
		}
	}
}

func countIn(n, s, e int) int {
	c := 0
	for k := 0; k < n; k++ {
		kg := state.KeyGroupFor([]byte(fmt.Sprintf("key-%d", k)), 128)
		if kg >= s && kg < e {
			c++
		}
	}
	return c
}

func TestSnapshotDeterministic(t *testing.T) {
	a := state.NewBackend(128, 0, 128, keySchema(t))
	a.SetDeterministic(true)
	fill(t, a, 500)
	b := state.NewBackend(128, 0, 128, keySchema(t))
	b.SetDeterministic(true)
	fill(t, b, 500)
	sa, _ := a.Snapshot()
	sb, _ := b.Snapshot()
	if string(sa) != string(sb) {
		t.Fatal("equal state gave different snapshot bytes")
	}
}

// TestAppendSnapshotIntoUsedBuffer: a snapshot appended into the reused
// buffer of a larger earlier one (as synchronous checkpoints do) has the
// bytes of a fresh one, and what dst held before is kept in front.
func TestAppendSnapshotIntoUsedBuffer(t *testing.T) {
	big := state.NewBackend(128, 0, 128, keySchema(t))
	fill(t, big, 2000)
	buf, err := big.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	small := state.NewBackend(128, 0, 128, keySchema(t))
	small.SetDeterministic(true)
	fill(t, small, 300)
	want, err := small.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	got, err := small.AppendSnapshot(buf[:0])
	if err != nil || string(got) != string(want) || &got[0] != &buf[0] {
		t.Fatalf("AppendSnapshot into a used buffer: %d bytes (err %v), want the %d of Snapshot, in the same buffer", len(got), err, len(want))
	}
	got, err = small.AppendSnapshot([]byte("prefix"))
	if err != nil || string(got) != "prefix"+string(want) {
		t.Fatalf("AppendSnapshot after a prefix: %d bytes, %v", len(got), err)
	}
}

type countV1 struct {
	N int64 `proto:"1"`
}

type countV2 struct {
	N     int64  `proto:"1"`
	Label string `proto:"2"`
}

type countBad struct {
	N string `proto:"1"`
}

func TestRestoreChecksSchemasBeforeLoading(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	v, _ := state.NewValue[countV1](b, "count")
	other, _ := state.NewValue[int64](b, "other")
	setKey(b, "k")
	v.Update(countV1{N: 4})
	other.Update(9)
	snap, _ := b.Snapshot()

	// An added field is compatible: the value comes back.
	ok := state.NewBackend(128, 0, 128, keySchema(t))
	v2, _ := state.NewValue[countV2](ok, "count")
	if err := ok.Restore([][]byte{snap}); err != nil {
		t.Fatal(err)
	}
	setKey(ok, "k")
	if x, _ := v2.Get(); x.N != 4 {
		t.Fatalf("evolved value %+v", x)
	}

	// int64 -> string is incompatible: the restore fails naming the state
	// and the field, and loads nothing (not even the compatible state).
	bad := state.NewBackend(128, 0, 128, keySchema(t))
	otherBad, _ := state.NewValue[int64](bad, "other")
	_, _ = state.NewValue[countBad](bad, "count")
	err := bad.Restore([][]byte{snap})
	if err == nil || !strings.Contains(err.Error(), `state "count"`) || !strings.Contains(err.Error(), "(1)") {
		t.Fatalf("want an incompatibility error naming state count and field 1, got %v", err)
	}
	setKey(bad, "k")
	if _, loaded := otherBad.Get(); loaded {
		t.Fatal("a failed restore loaded state")
	}

	// A changed key type is incompatible.
	intKeys, _ := serde.SchemaOf[int64]()
	kb := state.NewBackend(128, 0, 128, intKeys)
	_, _ = state.NewValue[countV1](kb, "count")
	if err := kb.Restore([][]byte{snap}); err == nil || !strings.Contains(err.Error(), "key type") {
		t.Fatalf("key type change: %v", err)
	}
	// Different max parallelism cannot be remapped.
	mp := state.NewBackend(64, 0, 64, keySchema(t))
	if err := mp.Restore([][]byte{snap}); err == nil || !strings.Contains(err.Error(), "max parallelism") {
		t.Fatalf("max parallelism change: %v", err)
	}
}

func TestCorruptSnapshotsAreErrors(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	fill(t, b, 50)
	snap, _ := b.Snapshot()
	for n := 0; n < len(snap); n += 7 {
		r := state.NewBackend(128, 0, 128, keySchema(t))
		newFull(t, r)
		_ = r.Restore([][]byte{snap[:n]}) // must not panic
	}
	r := state.NewBackend(128, 0, 128, keySchema(t))
	if err := r.Restore([][]byte{[]byte("garbage")}); err == nil {
		t.Fatal("garbage accepted")
	}
}

func TestValueUpdateDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts differ under the race detector")
	}
	b := state.NewBackend(128, 0, 128, keySchema(t))
	v, _ := state.NewValue[int64](b, "count")
	key := []byte("driver-1")
	kg := state.KeyGroupFor(key, 128)
	b.SetCurrentKey(key, kg)
	v.Update(1)
	allocs := testing.AllocsPerRun(1000, func() {
		b.SetCurrentKey(key, kg)
		x, _ := v.Get()
		v.Update(x + 1)
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per update of an existing key", allocs)
	}
}

func FuzzRestore(f *testing.F) {
	b := state.NewBackend(128, 0, 128, keySchema(f))
	fill(f, b, 20)
	snap, _ := b.Snapshot()
	f.Add(snap)
	f.Fuzz(func(t *testing.T, in []byte) {
		r := state.NewBackend(128, 0, 128, keySchema(t))
		newFull(t, r)
		err := r.Restore([][]byte{in})
		// One part restored alone must be judged the same way.
		p := state.NewBackend(128, 0, 128, keySchema(t))
		newFull(t, p)
		if perr := p.RestorePart(in, 0, 128); (err == nil) != (perr == nil) {
			t.Fatalf("Restore: %v; RestorePart: %v", err, perr)
		}
		if err == nil && r.Entries() != p.Entries() {
			t.Fatalf("Restore loaded %d entries, RestorePart %d", r.Entries(), p.Entries())
		}
	})
}

// TestRestorePartMatchesRestore restores stepped parts one at a time, in
// reverse order, from a buffer overwritten after each, and gets what
// RestoreRanged gets from all of them at once: RestorePart keeps no
// reference to its input, and a wider part counts only for its range.
func TestRestorePartMatchesRestore(t *testing.T) {
	newDst := func() *state.Backend {
		b := state.NewBackend(128, 0, 128, keySchema(t))
		b.SetDeterministic(true)
		newFull(t, b)
		return b
	}
	snapshot := func(b *state.Backend, from, to int) []byte {
		p, err := b.SnapshotGroups(from, to)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(p)
	}
	// Key groups [0, 40) come from an older full snapshot (a wider old
	// part, with other values and fewer keys), the rest from steps of 11 key groups of src.
	older := state.NewBackend(128, 0, 128, keySchema(t))
	ov, ol, om, or := newFull(t, older)
	for i := range 2000 {
		setKey(older, fmt.Sprintf("key-%d", i))
		ov.Update(int64(-i))
		ol.Add("old")
		om.Put("old", 1)
		or.Add(int64(i))
	}
	src := state.NewBackend(128, 0, 128, keySchema(t))
	fill(t, src, 3000)
	exp := newDst()
	if err := exp.Restore([][]byte{snapshot(older, 0, 40), snapshot(src, 40, 128)}); err != nil {
		t.Fatal(err)
	}
	want := snapshot(exp, 0, 128)
	if bytes.Equal(want, snapshot(src, 0, 128)) || bytes.Equal(want, snapshot(older, 0, 128)) {
		t.Fatal("the expected state is one of the sources: the ranges test nothing")
	}
	parts, ranges := [][]byte{snapshot(older, 0, 128)}, [][2]int{{0, 40}}
	for from := 40; from < 128; from += 11 {
		to := min(from+11, 128)
		parts, ranges = append(parts, snapshot(src, from, to)), append(ranges, [2]int{from, to})
	}
	all := newDst()
	if err := all.RestoreRanged(parts, ranges); err != nil {
		t.Fatal(err)
	}
	one := newDst()
	var buf []byte
	for i := len(parts) - 1; i >= 0; i-- {
		buf = append(buf[:0], parts[i]...)
		if err := one.RestorePart(buf, ranges[i][0], ranges[i][1]); err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		for j := range buf {
			buf[j] = 0xFF
		}
	}
	for name, b := range map[string]*state.Backend{"RestoreRanged": all, "RestorePart": one} {
		if got := snapshot(b, 0, 128); !bytes.Equal(got, want) {
			t.Fatalf("%s: the restored state differs from the expected (%d vs %d bytes)", name, len(got), len(want))
		}
		for _, kg := range []int{5, 50} {
			if gb, wb := b.GroupBytes(kg), exp.GroupBytes(kg); gb != wb || gb == 0 {
				t.Fatalf("%s: GroupBytes(%d) = %d after the restore, want %d", name, kg, gb, wb)
			}
		}
	}

	// Bad parts are *RestoreErrors naming what is wrong.
	var re *state.RestoreError
	if err := newDst().RestorePart([]byte("garbage"), 0, 128); !errors.As(err, &re) || !strings.Contains(err.Error(), "bad magic") {
		t.Fatalf("garbage: %v", err)
	}
	bad := state.NewBackend(128, 0, 128, keySchema(t))
	_, _ = state.NewValue[string](bad, "count")
	if err := bad.RestorePart(want, 0, 128); !errors.As(err, &re) || re.State != "count" {
		t.Fatalf("incompatible schema: %v", err)
	}
}

// TestSnapshotValueLengths: values whose lengths take more, then fewer,
// varint bytes than the one before restore intact (appendEntry guesses the
// width of each length from the last).
func TestSnapshotValueLengths(t *testing.T) {
	lengths := []int{0, 200, 5, 20000, 100, 130, 127, 16384, 3, 128, 1 << 21, 1}
	src := state.NewBackend(128, 0, 128, keySchema(t))
	src.SetDeterministic(true)
	v, _ := state.NewValue[string](src, "text")
	for i, n := range lengths {
		setKey(src, fmt.Sprintf("key-%02d", i))
		v.Update(strings.Repeat("x", n))
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	dst := state.NewBackend(128, 0, 128, keySchema(t))
	w, _ := state.NewValue[string](dst, "text")
	if err := dst.Restore([][]byte{snap}); err != nil {
		t.Fatal(err)
	}
	for i, n := range lengths {
		setKey(dst, fmt.Sprintf("key-%02d", i))
		if s, _ := w.Get(); len(s) != n {
			t.Fatalf("key %d: %d bytes restored, want %d", i, len(s), n)
		}
	}
}

// TestSetCurrentKeyAgain: setting the current key again keeps the states'
// view of it (values written in between stay visible), and a new key
// written into the buffer the backend was given (as a recycled batch
// does) is seen as the new key, not served from the old key's cache.
func TestSetCurrentKeyAgain(t *testing.T) {
	b := state.NewBackend(4, 0, 4, keySchema(t))
	v, err := state.NewValue[int64](b, "v")
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte("a")
	b.SetCurrentKey(buf, 1)
	v.Update(1)
	b.SetCurrentKey([]byte("a"), 1) // the same key, another slice
	if x, _ := v.Get(); x != 1 {
		t.Fatalf("a after setting it again: %d, want 1", x)
	}
	v.Update(2)
	buf[0] = 'b' // the buffer now holds another key
	b.SetCurrentKey(buf, 1)
	if x, ok := v.Get(); ok {
		t.Fatalf("b: %d, want no value", x)
	}
	v.Update(3)
	b.SetCurrentKey([]byte("a"), 2) // a's bytes in another key group
	if x, ok := v.Get(); ok {
		t.Fatalf("a in key group 2: %d, want no value", x)
	}
	b.SetCurrentKey([]byte("a"), 1)
	if x, _ := v.Get(); x != 2 {
		t.Fatalf("a: %d, want 2", x)
	}
}

// TestEnsureKey: the current slice passed again keeps the key; another
// slice, with the same bytes or others, or another key group, sets it.
func TestEnsureKey(t *testing.T) {
	b := state.NewBackend(4, 0, 4, keySchema(t))
	v, err := state.NewValue[int64](b, "v")
	if err != nil {
		t.Fatal(err)
	}
	a := []byte("a")
	b.SetCurrentKey(a, 1)
	v.Update(1)
	b.EnsureKey(a, 1)
	if x, _ := v.Get(); x != 1 {
		t.Fatalf("a after EnsureKey of the current slice: %d, want 1", x)
	}
	b.EnsureKey([]byte("c"), 1)
	if x, ok := v.Get(); ok {
		t.Fatalf("c: %d, want no value", x)
	}
	v.Update(5)
	b.EnsureKey([]byte("a"), 1) // a's bytes in another slice
	if x, _ := v.Get(); x != 1 {
		t.Fatalf("a again: %d, want 1", x)
	}
	b.EnsureKey(a, 2) // the slice of a, another key group
	if x, ok := v.Get(); ok {
		t.Fatalf("a in key group 2: %d, want no value", x)
	}
}
