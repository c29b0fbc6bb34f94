package dstl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/faulty"
	"github.com/eddyflow/eddy/serde"
)

// workload drives a log with concurrent writers and checks that every
// Persist handle replays exactly the changes it describes.
type workload struct {
	writers   int
	changes   int // per writer
	keys      int // distinct keys per writer and state
	persistEv int // Persist every this many changes
	materEv   int // move "after" (materialize) every this many Persists
	ctxLimit  time.Duration
}

type writerRun struct {
	name    string
	changes []change // changes[i] has sequence number i+1
	handles []Handle // of each Persist
}

// run appends and persists concurrently, returning each writer's record.
// Writer i uses key groups [16i, 16i+16).
func (wl workload) run(t *testing.T, l *Log, seed uint64) []*writerRun {
	t.Helper()
	runs := make([]*writerRun, wl.writers)
	var wg sync.WaitGroup
	errs := make(chan error, wl.writers)
	for i := range wl.writers {
		r := &writerRun{name: fmt.Sprintf("op-%d", i)}
		runs[i] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			w := l.Writer(r.name)
			var after uint64
			persists := 0
			for n := 1; n <= wl.changes; n++ {
				c := change{
					kg:    uint32(16*i + rng.IntN(16)),
					state: uint32(1 + rng.IntN(2)),
					key:   fmt.Sprintf("k%d", rng.IntN(wl.keys)),
					value: fmt.Sprintf("v%d-%d", i, n),
				}
				// Mostly puts, and every other operation.
				c.randomOp(rng, 20, 2, 9, 11, 4)
				if err := c.append(w); err != nil {
					errs <- fmt.Errorf("%s: append %d: %w", r.name, n, err)
					return
				}
				r.changes = append(r.changes, c)
				if n%wl.persistEv == 0 || n == wl.changes {
					ctx, cancel := context.WithTimeout(context.Background(), wl.ctxLimit)
					h, err := w.Persist(ctx, after)
					cancel()
					if err != nil {
						errs <- fmt.Errorf("%s: persist at %d: %w", r.name, n, err)
						return
					}
					if h.Writer != r.name || h.After != after || h.Upto != uint64(n) {
						errs <- fmt.Errorf("%s: handle %+v, want after %d upto %d", r.name, h, after, n)
						return
					}
					r.handles = append(r.handles, h)
					if persists++; wl.materEv > 0 && persists%wl.materEv == 0 {
						after = uint64(n - rng.IntN(wl.persistEv)) // a materialization point inside a batch
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return runs
}

// verify replays every handle of every run on top of the model state at
// its After and compares with the model at its Upto; then it replays the
// last handles of all writers at once, per key-group range.
func verify(t *testing.T, store blob.Store, ropts ReadOptions, runs []*writerRun) {
	t.Helper()
	for _, rd := range readers {
		verifyWith(t, store, ropts, runs, rd.name, rd.read)
	}
}

// readFunc is Read or ReadSequential.
type readFunc func(ctx context.Context, store blob.Store, opts ReadOptions, handles []Handle, kgStart, kgEnd uint32, apply func(c *Change) error) error

// readers are the two ways to replay a log, which must agree.
var readers = []struct {
	name string
	read readFunc
}{{"Read", Read}, {"ReadSequential", ReadSequential}}

func verifyWith(t *testing.T, store blob.Store, ropts ReadOptions, runs []*writerRun, name string, read readFunc) {
	t.Helper()
	ctx := context.Background()
	for _, r := range runs {
		for hi, h := range r.handles {
			if hi%3 != 0 && hi != len(r.handles)-1 {
				continue // a sample keeps the test fast
			}
			got := newSyncModel()
			got.m = replay(model{}, r.changes, 0, h.After)
			if err := read(ctx, store, ropts, []Handle{h}, 0, 1<<32-1, got.apply); err != nil {
				t.Fatalf("%s: %s: read handle %d %+v: %v", name, r.name, hi, h, err)
			}
			want := replay(model{}, r.changes, 0, h.Upto)
			if d := diff(got.m, want); d != "" {
				t.Fatalf("%s: %s: handle %d (%d,%d]: replay differs from the changes:\n%s", name, r.name, hi, h.After, h.Upto, d)
			}
		}
	}
	// All writers' last handles, as a restore would read them, split into
	// key-group ranges.
	var last []Handle
	want := model{}
	base := model{}
	for _, r := range runs {
		h := r.handles[len(r.handles)-1]
		last = append(last, h)
		replay(want, r.changes, 0, h.Upto)
		replay(base, r.changes, 0, h.After)
	}
	got := newSyncModel()
	got.m = base
	for _, rg := range [][2]uint32{{0, 5}, {5, 40}, {40, 41}, {41, 1 << 20}} {
		inRange := func(kg uint32) error {
			if kg < rg[0] || kg >= rg[1] {
				return fmt.Errorf("kg %d outside [%d,%d)", kg, rg[0], rg[1])
			}
			return nil
		}
		err := read(ctx, store, ropts, last, rg[0], rg[1], func(c *Change) error {
			if err := inRange(c.KeyGroup); err != nil {
				return err
			}
			return got.apply(c)
		})
		if err != nil {
			t.Fatalf("%s: read range %v: %v", name, rg, err)
		}
	}
	if d := diff(got.m, want); d != "" {
		t.Fatalf("%s: restore of all writers by key-group ranges differs:\n%s", name, d)
	}
}

// TestConcurrentWriters: many writers append and persist concurrently
// against a file store; every handle replays exactly its changes.
func TestConcurrentWriters(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("zstd=%v", compress), func(t *testing.T) {
			store := fileStore(t)
			l := openLog(t, store, Options{FlushInterval: 2 * time.Millisecond, WriterFlushBytes: 4 << 10, FlushBytes: 16 << 10, Compression: compress})
			wl := workload{writers: 8, changes: 3000, keys: 50, persistEv: 400, materEv: 2, ctxLimit: 20 * time.Second}
			runs := wl.run(t, l, 1)
			verify(t, store, ReadOptions{}, runs)
			m := l.Metrics()
			if m.Changes != int64(wl.writers*wl.changes) {
				t.Errorf("Metrics.Changes = %d, want %d", m.Changes, wl.writers*wl.changes)
			}
			if m.DroppedChanges == 0 {
				t.Errorf("no changes dropped within batches: %+v", m)
			}
			if m.Uploads != m.Batches || m.Uploads == 0 || m.FailedAttempts != 0 {
				t.Errorf("metrics %+v", m)
			}
			if compress && m.BytesUploaded >= m.BytesRaw {
				t.Errorf("zstd: %d bytes uploaded for %d raw", m.BytesUploaded, m.BytesRaw)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if m := l.Metrics(); m.BytesInFlight != 0 {
				t.Errorf("BytesInFlight = %d after Close", m.BytesInFlight)
			}
		})
	}
}

// TestInjectedErrors: 1% of Puts fail (half of them after writing), a few
// stall; nothing is lost.
func TestInjectedErrors(t *testing.T) {
	inner := fileStore(t)
	store := faulty.New(inner, faulty.Options{ErrorRate: 0.01, StallRate: 0.002, Seed: 7, PutOnly: true,
		Latency: faulty.LongTail(100*time.Microsecond, 2*time.Millisecond, 20*time.Millisecond)})
	l := openLog(t, store, Options{FlushInterval: time.Millisecond, WriterFlushBytes: 2 << 10,
		UploadTimeout: 100 * time.Millisecond, AttemptTimeout: time.Second, MaxAttempts: 4})
	wl := workload{writers: 6, changes: 3000, keys: 200, persistEv: 20, materEv: 3, ctxLimit: 20 * time.Second}
	runs := wl.run(t, l, 2)
	verify(t, inner, ReadOptions{}, runs)
	m := l.Metrics()
	st := store.Stats()
	t.Logf("puts %d, injected errors %d, stalls %d; metrics %+v", st.Put.Calls, st.Put.Errors, st.Put.Stalls, m)
	if m.FailedBatches != 0 || m.FailedAttempts < st.Put.Errors {
		t.Errorf("FailedBatches %d, FailedAttempts %d for %d injected errors", m.FailedBatches, m.FailedAttempts, st.Put.Errors)
	}
	// Failed attempts (also those that wrote their object) and losing
	// hedges leave nothing behind: the store holds exactly the handles'
	// objects.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, r := range runs {
		for _, h := range r.handles {
			for _, o := range h.Objects {
				want[o] = true
			}
		}
	}
	names, err := inner.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !want[n] {
			t.Errorf("stray object %s", n)
		}
		delete(want, n)
	}
	if len(want) != 0 {
		t.Errorf("%d handle objects missing from the store", len(want))
	}
}

// TestDedupWithinBatch: only the last change per (writer, state, key) of a
// batch is uploaded, and replay gives the batch's final state.
func TestDedupWithinBatch(t *testing.T) {
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: time.Hour})
	w := l.Writer("w")
	steps := []change{
		{kg: 1, state: 1, key: "a", value: "1"},
		{kg: 1, state: 1, key: "a", value: "2"},
		{kg: 1, state: 2, key: "a", value: "x"}, // other state: kept
		{kg: 2, state: 1, key: "b", value: "3"},
		{kg: 1, state: 1, key: "a", op: OpDelete},
		{kg: 2, state: 1, key: "b", value: "4"},
	}
	for _, c := range steps {
		if err := c.append(w); err != nil {
			t.Fatal(err)
		}
	}
	h, err := w.Persist(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Objects) != 1 || h.Upto != 6 {
		t.Fatalf("handle %+v", h)
	}
	data, _ := store.Get(context.Background(), h.Objects[0])
	o, err := DecodeObject(data)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, c := range o.Sections[0].Changes {
		seqs = append(seqs, c.Seq)
	}
	if !reflect.DeepEqual(seqs, []uint64{3, 5, 6}) {
		t.Errorf("uploaded changes %v, want [3 5 6]", seqs)
	}
	if m := l.Metrics(); m.DroppedChanges != 3 || m.Changes != 6 {
		t.Errorf("Changes %d, DroppedChanges %d; want 6, 3", m.Changes, m.DroppedChanges)
	}
	got := newSyncModel()
	if err := Read(context.Background(), store, ReadOptions{}, []Handle{h}, 0, 10, got.apply); err != nil {
		t.Fatal(err)
	}
	if d := diff(got.m, replay(model{}, steps, 0, 6)); d != "" {
		t.Error(d)
	}
	// A materialization point inside the batch: snapshot at 4 + replay.
	h4 := h
	h4.After = 4
	got = newSyncModel()
	got.m = replay(model{}, steps, 0, 4)
	if err := Read(context.Background(), store, ReadOptions{}, []Handle{h4}, 0, 10, got.apply); err != nil {
		t.Fatal(err)
	}
	if d := diff(got.m, replay(model{}, steps, 0, 6)); d != "" {
		t.Error(d)
	}
}

// TestDedupElements: element changes replace earlier changes of the same
// element only, and whole-value changes do not
// replace element changes (or the other way round); replaying the kept
// changes, also from a materialization point inside the batch, gives the
// batch's final state.
func TestDedupElements(t *testing.T) {
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: time.Hour})
	w := l.Writer("w")
	steps := []change{
		{kg: 1, state: 1, key: "a", op: OpPutElem, sub: "x", value: "1"}, // replaced by 4
		{kg: 1, state: 1, key: "a", op: OpPutElem, sub: "y", value: "2"}, // replaced by 7
		{kg: 1, state: 1, key: "a", op: OpPut, value: "whole"},           // replaced by 8
		{kg: 1, state: 1, key: "a", op: OpPutElem, sub: "x", value: "3"},
		{kg: 1, state: 1, key: "a", op: OpPutElem, sub: "p", value: "5"},
		{kg: 1, state: 2, key: "a", op: OpPutElem, sub: "x", value: "6"}, // other state
		{kg: 1, state: 1, key: "a", op: OpDeleteElem, sub: "y"},
		{kg: 1, state: 1, key: "a", op: OpPut, value: "again"},
		{kg: 1, state: 1, key: "a", op: OpPutElem, sub: "z", value: "4"},
		{kg: 1, state: 1, key: "a", op: OpPutElem, sub: "p", value: "7"}, // replaces 5 across the put
		{kg: 1, state: 1, key: "ax", op: OpPutElem, sub: "", value: "5"}, // key/sub split differs from "a"+"x"
		{kg: 1, state: 1, key: "b", op: OpPutElem, sub: "r", value: "8"},
		{kg: 1, state: 1, key: "b", op: OpDelete},
	}
	for _, c := range steps {
		if err := c.append(w); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AppendOp(1, 1, Op(9), []byte("k"), nil, nil); err == nil {
		t.Error("AppendOp with an unknown operation: no error")
	}
	h, err := w.Persist(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := store.Get(context.Background(), h.Objects[0])
	o, err := DecodeObject(data)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, c := range o.Sections[0].Changes {
		seqs = append(seqs, c.Seq)
	}
	if want := []uint64{4, 6, 7, 8, 9, 10, 11, 12, 13}; !reflect.DeepEqual(seqs, want) {
		t.Errorf("uploaded changes %v, want %v", seqs, want)
	}
	for after := uint64(0); after <= uint64(len(steps)); after++ {
		ha := h
		ha.After = after
		got := newSyncModel()
		got.m = replay(model{}, steps, 0, after)
		if err := Read(context.Background(), store, ReadOptions{}, []Handle{ha}, 0, 10, got.apply); err != nil {
			t.Fatal(err)
		}
		if d := diff(got.m, replay(model{}, steps, 0, uint64(len(steps)))); d != "" {
			t.Errorf("from %d:\n%s", after, d)
		}
	}
}

// TestPersistRanges: successive Persists describe exactly their changes;
// a Persist without new changes has no objects; after may not go back.
func TestPersistRanges(t *testing.T) {
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: time.Hour})
	w := l.Writer("w")
	ctx := context.Background()
	appendN := func(from, to int) {
		for i := from; i <= to; i++ {
			if err := w.Append(0, 1, []byte(fmt.Sprint("k", i%7)), []byte(fmt.Sprint(i)), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(1, 10)
	h1, err := w.Persist(ctx, 0)
	if err != nil || len(h1.Objects) != 1 || h1.Upto != 10 {
		t.Fatalf("h1 %+v %v", h1, err)
	}
	appendN(11, 20)
	h2, err := w.Persist(ctx, 0)
	if err != nil || len(h2.Objects) != 2 || h2.Objects[0] != h1.Objects[0] || h2.Upto != 20 {
		t.Fatalf("h2 %+v %v", h2, err)
	}
	h3, err := w.Persist(ctx, 10) // materialized at 10: the first batch is no longer needed
	if err != nil || !reflect.DeepEqual(h3.Objects, h2.Objects[1:]) || h3.After != 10 {
		t.Fatalf("h3 %+v %v", h3, err)
	}
	h4, err := w.Persist(ctx, 20)
	if err != nil || len(h4.Objects) != 0 || h4.Upto != 20 {
		t.Fatalf("h4 %+v %v", h4, err)
	}
	if _, err := w.Persist(ctx, 5); err == nil {
		t.Error("Persist with a smaller after than before: no error")
	}
	if _, err := w.Persist(ctx, 21); err == nil {
		t.Error("Persist after beyond Seq: no error")
	}
	// h1 still replays exactly changes 1..10 although later ones exist.
	var changes []change
	for i := 1; i <= 10; i++ {
		changes = append(changes, change{state: 1, key: fmt.Sprint("k", i%7), value: fmt.Sprint(i)})
	}
	got := newSyncModel()
	if err := Read(ctx, store, ReadOptions{}, []Handle{h1}, 0, 1, got.apply); err != nil {
		t.Fatal(err)
	}
	if d := diff(got.m, replay(model{}, changes, 0, 10)); d != "" {
		t.Error(d)
	}
	// Restart: a writer continuing after 20 numbers from 21; both runs'
	// handles replay in order.
	l2 := openLog(t, store, Options{FlushInterval: time.Hour})
	w2 := l2.WriterFrom("w", 20)
	if w2.Seq() != 20 {
		t.Fatalf("Seq = %d", w2.Seq())
	}
	if err := w2.Append(0, 1, []byte("k1"), []byte("new"), false); err != nil {
		t.Fatal(err)
	}
	h5, err := w2.Persist(ctx, 20)
	if err != nil || h5.After != 20 || h5.Upto != 21 {
		t.Fatalf("h5 %+v %v", h5, err)
	}
	got = newSyncModel()
	if err := Read(ctx, store, ReadOptions{}, []Handle{h5, h2}, 0, 1, got.apply); err != nil {
		t.Fatal(err)
	}
	if v := got.m[skey{0, 1, "k1"}]; v == nil || v.whole != "new" {
		t.Errorf("k1 = %q after replaying both runs, want \"new\"", v)
	}
}

// TestReadDetectsMissingChanges: a handle whose objects do not hold its
// last change (a replaced object) is an error.
func TestReadDetectsMissingChanges(t *testing.T) {
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: time.Hour})
	w := l.Writer("w")
	w.Append(0, 1, []byte("a"), []byte("1"), false)
	h, err := w.Persist(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	bad := h
	bad.Upto = 2
	err = Read(context.Background(), store, ReadOptions{}, []Handle{bad}, 0, 1, newSyncModel().apply)
	if err == nil || !strings.Contains(err.Error(), "hold no change 2") {
		t.Errorf("err = %v", err)
	}
	store.Delete(context.Background(), h.Objects[0])
	err = Read(context.Background(), store, ReadOptions{}, []Handle{h}, 0, 1, newSyncModel().apply)
	if !errors.Is(err, blob.ErrNotFound) || !strings.Contains(err.Error(), h.Objects[0]) {
		t.Errorf("missing object: err = %v", err)
	}
}

// TestLocalCopies: local recovery reads the local copy (also when the
// remote object is gone), falls back to the store when the copy is
// damaged, and copies are deleted once no writer needs them.
func TestLocalCopies(t *testing.T) {
	store := fileStore(t)
	local := t.TempDir()
	l := openLog(t, store, Options{FlushInterval: time.Hour, LocalDir: local, ObjectName: func(n uint64) string {
		return fmt.Sprintf("checkpoints/%020d/dstl-run-%d", 7, n)
	}})
	w := l.Writer("w")
	ctx := context.Background()
	var changes []change
	for i := 1; i <= 100; i++ {
		c := change{kg: uint32(i % 4), state: 1, key: fmt.Sprint(i % 30), value: fmt.Sprint(i)}
		changes = append(changes, c)
		w.Append(c.kg, c.state, []byte(c.key), []byte(c.value), false)
		if i%25 == 0 {
			if _, err := w.Persist(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	h, err := w.Persist(ctx, 0)
	if err != nil || len(h.Objects) != 4 {
		t.Fatalf("%+v %v", h, err)
	}
	want := replay(model{}, changes, 0, 100)
	read := func(opts ReadOptions) (*ReadStats, error) {
		st := &ReadStats{}
		opts.Stats = st
		got := newSyncModel()
		err := Read(ctx, store, opts, []Handle{h}, 0, 4, got.apply)
		if err == nil {
			if d := diff(got.m, want); d != "" {
				t.Fatal(d)
			}
		}
		return st, err
	}
	for _, o := range h.Objects {
		if _, err := os.Stat(filepath.Join(local, filepath.FromSlash(o))); err != nil {
			t.Fatalf("no local copy of %s: %v", o, err)
		}
	}
	// Remote object gone: the local copy serves.
	if err := store.Delete(ctx, h.Objects[0]); err != nil {
		t.Fatal(err)
	}
	st, err := read(ReadOptions{LocalDir: local})
	if err != nil || st.LocalReads != 4 || st.RemoteReads != 0 {
		t.Fatalf("read with remote deleted: %v, stats %+v", err, st)
	}
	if _, err := read(ReadOptions{}); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("read without local dir: err = %v, want not found", err)
	}
	// Damaged local copies (a flipped byte, a torn write) fall back to the
	// store.
	p1 := filepath.Join(local, filepath.FromSlash(h.Objects[1]))
	data, _ := os.ReadFile(p1)
	data[len(data)/2] ^= 0x40
	os.WriteFile(p1, data, 0o644)
	p2 := filepath.Join(local, filepath.FromSlash(h.Objects[2]))
	data, _ = os.ReadFile(p2)
	os.WriteFile(p2, data[:len(data)-3], 0o644)
	os.Remove(filepath.Join(local, filepath.FromSlash(h.Objects[3])))
	st, err = read(ReadOptions{LocalDir: local})
	if err != nil || st.LocalReads != 1 || st.LocalCorrupt != 2 || st.LocalMissing != 1 || st.RemoteReads != 3 {
		t.Fatalf("read with damaged copies: %v, stats %+v", err, st)
	}
	// Materialized past everything: the local copies go once a later
	// materialization point shows that checkpoints based on this one are
	// done.
	if _, err := w.Persist(ctx, 100); err != nil {
		t.Fatal(err)
	}
	w.Append(0, 1, []byte("x"), []byte("y"), false)
	h2, err := w.Persist(ctx, 100)
	if err != nil || len(h2.Objects) != 1 {
		t.Fatalf("%+v %v", h2, err)
	}
	if m := l.Metrics(); m.LocalDeletes != 0 {
		t.Errorf("LocalDeletes %d before a later materialization", m.LocalDeletes)
	}
	w.Append(0, 1, []byte("x"), []byte("z"), false)
	if _, err := w.Persist(ctx, 101); err != nil {
		t.Fatal(err)
	}
	if m := l.Metrics(); m.LocalWrites != 6 || m.LocalDeletes != 3 { // one was removed by hand
		t.Errorf("LocalWrites %d, LocalDeletes %d", m.LocalWrites, m.LocalDeletes)
	}
	// PruneLocal keeps what a handle references.
	os.WriteFile(filepath.Join(local, "stray"), []byte("x"), 0o644)
	if err := PruneLocal(local, []Handle{h2}); err != nil {
		t.Fatal(err)
	}
	var files []string
	filepath.WalkDir(local, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(local, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if !reflect.DeepEqual(files, h2.Objects) {
		t.Errorf("after PruneLocal: %v, want %v", files, h2.Objects)
	}
}

// slowFirst delays the Puts of first attempts (names without "-h") by
// delay; honorCtx says whether the delay ends when the context is done.
func slowFirst(inner blob.Store, delay time.Duration, honorCtx bool, slow *atomic.Int64) *hookStore {
	return &hookStore{Store: inner, put: func(ctx context.Context, name string, data []byte) error {
		if !strings.Contains(name, "-h") {
			slow.Add(1)
			if honorCtx {
				select {
				case <-time.After(delay):
				case <-ctx.Done():
					return ctx.Err()
				}
			} else {
				time.Sleep(delay)
				return inner.Put(context.Background(), name, data)
			}
		}
		return inner.Put(ctx, name, data)
	}}
}

// TestHedgedUpload: with every first attempt taking 3s and UploadTimeout
// 50ms, Persist returns well before the slow attempts would finish (a ctx
// deadline of 2s proves it), via hedges; the slow attempts' objects are
// deleted, also when they finish after losing.
func TestHedgedUpload(t *testing.T) {
	for _, honor := range []bool{true, false} {
		t.Run(fmt.Sprintf("honorCtx=%v", honor), func(t *testing.T) {
			inner := fileStore(t)
			var slow atomic.Int64
			delay := 3 * time.Second
			if !honor {
				delay = 300 * time.Millisecond // finishes late, after losing
			}
			store := slowFirst(inner, delay, honor, &slow)
			l, err := Open(store, Options{FlushInterval: time.Hour, UploadTimeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			w := l.Writer("w")
			var hs []Handle
			for round := range 3 {
				for i := range 10 {
					w.Append(0, 1, []byte(fmt.Sprint(i)), []byte(fmt.Sprint(round)), false)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				h, err := w.Persist(ctx, 0)
				cancel()
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				hs = append(hs, h)
			}
			// A hedge is itself hedged when it takes longer than
			// UploadTimeout (a loaded machine): at least one hedge per
			// batch, and a hedge wins.
			for _, h := range hs {
				for _, o := range h.Objects {
					if !strings.Contains(o, "-h") {
						t.Errorf("object %s did not come from a hedge", o)
					}
				}
			}
			m := l.Metrics()
			if m.HedgedUploads < 3 || m.Uploads != 3 || m.FailedBatches != 0 {
				t.Errorf("metrics %+v", m)
			}
			if err := l.Close(); err != nil { // waits for the losers' deletion
				t.Fatal(err)
			}
			m = l.Metrics()
			if m.LoserDeletes != m.Attempts-m.Uploads {
				t.Errorf("LoserDeletes = %d of %d attempts that lost", m.LoserDeletes, m.Attempts-m.Uploads)
			}
			names, _ := inner.List(context.Background(), "")
			if len(names) != 3 {
				t.Errorf("store holds %v, want only the 3 winners", names)
			}
			winners := map[string]bool{}
			for _, h := range hs {
				winners[h.Objects[len(h.Objects)-1]] = true
			}
			for _, n := range names {
				if !winners[n] {
					t.Errorf("loser %s left behind", n)
				}
			}
			got := newSyncModel()
			if err := Read(context.Background(), inner, ReadOptions{}, hs[2:], 0, 1, got.apply); err != nil {
				t.Fatal(err)
			}
			if v := got.m[skey{0, 1, "3"}]; len(got.m) != 10 || v == nil || v.whole != "2" {
				t.Errorf("replayed %v", got.m)
			}
		})
	}
}

// TestLongTailLatency: upload latency from a long-tailed distribution
// (p50 2ms, p99 100ms, p99.9 3s); hedging keeps every Persist within a
// 1.5s deadline although some uploads take seconds.
func TestLongTailLatency(t *testing.T) {
	inner := fileStore(t)
	store := faulty.New(inner, faulty.Options{Latency: faulty.LongTail(2*time.Millisecond, 100*time.Millisecond, 3*time.Second),
		Seed: 3, PutOnly: true})
	l := openLog(t, store, Options{FlushInterval: 2 * time.Millisecond, UploadTimeout: 50 * time.Millisecond})
	wl := workload{writers: 4, changes: 2000, keys: 100, persistEv: 25, materEv: 4, ctxLimit: 1500 * time.Millisecond}
	runs := wl.run(t, l, 3)
	m := l.Metrics()
	t.Logf("metrics %+v; injected put latency %v over %d puts", m, store.Stats().Put.Latency, store.Stats().Put.Calls)
	if m.HedgedUploads == 0 {
		t.Errorf("no hedged uploads: %+v", m)
	}
	if m.FailedBatches != 0 {
		t.Errorf("failed batches: %+v", m)
	}
	verify(t, inner, ReadOptions{}, runs)
}

// TestRetryAfterErrors: failed attempts are retried; MaxAttempts failures
// fail the batch, Persist and later Appends with an error naming the
// batch's object and the cause, and the attempts' objects are deleted.
func TestRetryAfterErrors(t *testing.T) {
	inner := newMemStore()
	var calls atomic.Int64
	failFirst := int64(2)
	store := &hookStore{Store: inner, put: func(ctx context.Context, name string, data []byte) error {
		if calls.Add(1) <= failFirst {
			inner.Put(ctx, name, data) // written, yet reported failed
			return errors.New("503 slow down")
		}
		return inner.Put(ctx, name, data)
	}}
	l := openLog(t, store, Options{FlushInterval: time.Hour, RetryBackoff: time.Millisecond})
	w := l.Writer("w")
	w.Append(0, 1, []byte("a"), []byte("1"), false)
	h, err := w.Persist(context.Background(), 0)
	if err != nil || h.Objects[0] != "dstl/"+strings.Split(h.Objects[0], "/")[1]+"/00000000000000000001-h2" {
		t.Fatalf("%+v %v", h, err)
	}
	l.Close()
	if m := l.Metrics(); m.Retries != 2 || m.FailedAttempts != 2 || m.LoserDeletes != 2 {
		t.Errorf("metrics %+v", m)
	}
	if names, _ := inner.List(context.Background(), ""); !reflect.DeepEqual(names, h.Objects) {
		t.Errorf("store holds %v, want %v", names, h.Objects)
	}

	// Every attempt fails.
	calls.Store(0)
	failFirst = 1 << 40
	l = openLog(t, store, Options{FlushInterval: time.Hour, RetryBackoff: time.Millisecond,
		ObjectName: func(n uint64) string { return fmt.Sprintf("b/%d", n) }})
	w = l.Writer("w")
	w.Append(0, 1, []byte("a"), []byte("1"), false)
	_, err = w.Persist(context.Background(), 0)
	var be *BatchError
	if !errors.As(err, &be) || be.Attempts != 3 || be.Object != "b/1" || !strings.Contains(err.Error(), `"b/1"`) ||
		!strings.Contains(err.Error(), "503 slow down") {
		t.Fatalf("err = %v", err)
	}
	if err := w.Append(0, 1, []byte("b"), nil, true); !errors.As(err, &be) {
		t.Errorf("Append after a failed batch: %v", err)
	}
	if err := l.Close(); !errors.As(err, &be) {
		t.Errorf("Close: %v", err)
	}
	if names, _ := inner.List(context.Background(), "b/"); len(names) != 0 {
		t.Errorf("failed attempts left %v", names)
	}
	if m := l.Metrics(); m.FailedBatches != 1 || m.Attempts != 3 || m.FailedAttempts != 3 {
		t.Errorf("metrics %+v", m)
	}
}

// TestBackpressure: while uploads hang, Append blocks once MaxInFlight is
// exceeded instead of failing, and continues when they finish.
func TestBackpressure(t *testing.T) {
	inner := newMemStore()
	gate := make(chan struct{})
	store := &hookStore{Store: inner, put: func(ctx context.Context, name string, data []byte) error {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		return inner.Put(ctx, name, data)
	}}
	l := openLog(t, store, Options{FlushInterval: time.Millisecond, MaxInFlight: 64 << 10, UploadTimeout: time.Hour})
	w := l.Writer("w")
	value := make([]byte, 1000)
	var appended atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := range 1000 {
			if err := w.Append(0, 1, []byte(fmt.Sprint(i)), value, false); err != nil {
				done <- err
				return
			}
			appended.Add(1)
		}
		done <- nil
	}()
	waitFor(t, 10*time.Second, "an Append to block", func() bool { return l.Metrics().BlockedAppends > 0 })
	if n := appended.Load(); n > 80 {
		t.Errorf("%d KB appended with 64 KB in flight allowed", n)
	}
	select {
	case err := <-done:
		t.Fatalf("appender finished while uploads hang: %v", err)
	default:
	}
	if m := l.Metrics(); m.BytesInFlight <= 64<<10 {
		t.Errorf("BytesInFlight = %d while blocked", m.BytesInFlight)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h, err := w.Persist(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := newSyncModel()
	if err := Read(context.Background(), inner, ReadOptions{}, []Handle{h}, 0, 1, got.apply); err != nil || len(got.m) != 1000 {
		t.Fatalf("read %d entries: %v", len(got.m), err)
	}
	if m := l.Metrics(); m.BlockedTime <= 0 {
		t.Errorf("BlockedTime = %v", m.BlockedTime)
	}
}

// TestFlushTriggers: the timer and the per-writer size threshold upload
// without a Persist.
func TestFlushTriggers(t *testing.T) {
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: 5 * time.Millisecond})
	l.Writer("w").Append(0, 1, []byte("a"), []byte("b"), false)
	waitFor(t, 5*time.Second, "the timer to upload", func() bool { return l.Metrics().Uploads == 1 })

	l2 := openLog(t, store, Options{FlushInterval: time.Hour, WriterFlushBytes: 1 << 10})
	w := l2.Writer("w")
	for i := range 20 {
		w.Append(0, 1, []byte(fmt.Sprint(i)), make([]byte, 100), false)
	}
	waitFor(t, 5*time.Second, "the writer threshold to upload", func() bool { return l2.Metrics().Uploads >= 1 })

	l3 := openLog(t, store, Options{FlushInterval: time.Hour, FlushBytes: 1 << 10})
	for i := range 20 {
		l3.Writer(fmt.Sprint("w", i)).Append(0, 1, []byte("k"), make([]byte, 100), false)
	}
	waitFor(t, 5*time.Second, "the log threshold to upload", func() bool { return l3.Metrics().Uploads >= 1 })
}

// TestClosed: methods after Close and Writer.Close fail with ErrClosed.
func TestClosed(t *testing.T) {
	l, err := Open(newMemStore(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := l.Writer("w")
	w2 := l.Writer("w2")
	w2.Close()
	if err := w2.Append(0, 0, nil, nil, false); !errors.Is(err, ErrClosed) {
		t.Errorf("append on closed writer: %v", err)
	}
	w3 := l.Writer("w") // replaces w
	if err := w.Append(0, 0, nil, nil, false); !errors.Is(err, ErrClosed) {
		t.Errorf("append on replaced writer: %v", err)
	}
	if err := w3.Append(0, 0, nil, nil, false); err != nil {
		t.Error(err)
	}
	l.Close()
	if err := w3.Append(0, 0, nil, nil, false); !errors.Is(err, ErrClosed) {
		t.Errorf("append after Close: %v", err)
	}
	if _, err := w3.Persist(context.Background(), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("persist after Close: %v", err)
	}
	if _, err := Open(newMemStore(), Options{MaxAttempts: -1}); err == nil {
		t.Error("negative option accepted")
	}
}

// TestHandleSerde: Handle is encodable by serde, as checkpoints store it.
func TestHandleSerde(t *testing.T) {
	c, err := serde.For[Handle]()
	if err != nil {
		t.Fatal(err)
	}
	h := Handle{Writer: "distance-3", After: 10, Upto: 99, Objects: []string{"a/1", "a/2-h1"}, Size: 1234}
	b, err := c.Append(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	var out Handle
	if err := c.Decode(b, &out); err != nil || !reflect.DeepEqual(out, h) {
		t.Fatalf("%+v %v", out, err)
	}
}

// TestCutPersistUpto: Cut at a barrier, PersistUpto in the background while
// the writer keeps appending; the handle holds exactly the changes up to
// the cut. Persists of two materialization points may complete out of
// order.
func TestCutPersistUpto(t *testing.T) {
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: time.Millisecond})
	w := l.Writer("w")
	ctx := context.Background()
	var changes []change
	add := func(n int) {
		for range n {
			c := change{kg: 1, state: 1, key: fmt.Sprint(len(changes) % 13), value: fmt.Sprint(len(changes))}
			changes = append(changes, c)
			if err := w.Append(c.kg, c.state, []byte(c.key), []byte(c.value), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(h Handle) {
		t.Helper()
		got := newSyncModel()
		got.m = replay(model{}, changes, 0, h.After)
		if err := Read(ctx, store, ReadOptions{}, []Handle{h}, 0, 2, got.apply); err != nil {
			t.Fatal(err)
		}
		if d := diff(got.m, replay(model{}, changes, 0, h.Upto)); d != "" {
			t.Fatalf("handle %+v:\n%s", h, d)
		}
	}
	add(100)
	cut1 := w.Cut()
	type res struct {
		h   Handle
		err error
	}
	bg := make(chan res, 1)
	go func() {
		h, err := w.PersistUpto(ctx, 0, cut1)
		bg <- res{h, err}
	}()
	add(100) // keeps appending meanwhile
	r := <-bg
	if r.err != nil || r.h.Upto != 100 {
		t.Fatalf("%+v %v", r.h, r.err)
	}
	check(r.h)
	cut2 := w.Cut()
	add(50)
	if _, err := w.PersistUpto(ctx, 0, cut2-1); err == nil || !strings.Contains(err.Error(), "boundary") {
		t.Errorf("PersistUpto inside a batch: %v", err)
	}
	// Materialization points 150 and then 200: the Persist for 200 runs
	// first, the one for 150 still works; one for 100 after a third point
	// does not.
	h200, err := w.PersistUpto(ctx, 200, cut2)
	if err != nil || len(h200.Objects) != 0 {
		t.Fatalf("%+v %v", h200, err)
	}
	h150, err := w.PersistUpto(ctx, 150, cut2)
	if err != nil {
		t.Fatal(err)
	}
	check(h150)
	if _, err := w.Persist(ctx, 240); err != nil {
		t.Fatal(err)
	}
	if _, err := w.PersistUpto(ctx, 150, cut2); err == nil {
		t.Error("Persist for a released materialization point: no error")
	}
}

// TestReadAppliesOnlyNeededChanges: across batches, Read applies only the
// last change of each key or element, and nothing before a later
// whole-value change of the key; the state is that of applying all.
func TestReadAppliesOnlyNeededChanges(t *testing.T) {
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: time.Hour})
	w := l.Writer("w")
	ctx := context.Background()
	var changes []change
	add := func(c change) {
		t.Helper()
		changes = append(changes, c)
		mustAppend(t, w, c)
	}
	for batch := range 10 {
		add(change{kg: 1, state: 1, key: "a", value: fmt.Sprint(batch)})
		add(change{kg: 1, state: 1, key: "m", op: OpPutElem, sub: fmt.Sprint(batch % 3), value: fmt.Sprint(batch)})
		if batch == 6 {
			add(change{kg: 1, state: 1, key: "m", op: OpDelete})
		}
		mustPersist(t, w) // ends the batch
	}
	h := mustPersist(t, w)
	if len(h.Objects) != 10 {
		t.Fatalf("%d objects, want 10", len(h.Objects))
	}
	var st ReadStats
	got := newSyncModel()
	if err := Read(ctx, store, ReadOptions{Stats: &st}, []Handle{h}, 0, 2, got.apply); err != nil {
		t.Fatal(err)
	}
	if d := diff(got.m, replay(model{}, changes, 0, uint64(len(changes)))); d != "" {
		t.Fatal(d)
	}
	// "a": its last put. "m": the delete in batch 6 (it erases what the
	// base holds) and the elements of batches 7, 8, 9.
	if st.Applied != 5 || st.Superseded != int64(len(changes))-5 {
		t.Errorf("applied %d, superseded %d; want 5 and %d", st.Applied, st.Superseded, len(changes)-5)
	}
}

// TestFetchThenRead: Fetch keeps only the handles' writers' changes, and a
// Read given its objects needs no store (the objects are gone from it).
func TestFetchThenRead(t *testing.T) {
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: time.Hour})
	wa, wb := l.Writer("a"), l.Writer("b")
	ctx := context.Background()
	var changes []change
	for i := range 50 {
		c := change{kg: uint32(i % 3), state: 1, key: fmt.Sprint(i % 7), value: fmt.Sprint(i)}
		changes = append(changes, c)
		mustAppend(t, wa, c)
		if err := wb.Append(0, 1, []byte("other"), []byte("x"), false); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			mustPersist(t, wb)
		}
	}
	h := mustPersist(t, wa)
	objs, err := Fetch(ctx, store, ReadOptions{}, []Handle{h})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != len(h.Objects) {
		t.Fatalf("fetched %d objects, want %d", len(objs), len(h.Objects))
	}
	for name, o := range objs {
		for _, s := range o.sections {
			if s.writer != "a" {
				t.Errorf("object %s: fetched the section of writer %q", name, s.writer)
			}
		}
	}
	for _, name := range h.Objects {
		store.Delete(ctx, name)
	}
	got := newSyncModel()
	if err := Read(ctx, store, ReadOptions{Prefetched: objs}, []Handle{h}, 0, 3, got.apply); err != nil {
		t.Fatal(err)
	}
	if d := diff(got.m, replay(model{}, changes, 0, 50)); d != "" {
		t.Fatal(d)
	}
}

// TestReplayHashCollisions: with every identity hashing alike, replay
// still applies exactly the needed changes (the exact map decides).
func TestReplayHashCollisions(t *testing.T) {
	collideForTest = func(*Change, bool) uint64 { return 7 }
	defer func() { collideForTest = nil }()
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: time.Hour})
	w := l.Writer("w")
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	var changes []change
	for i := range 2000 {
		c := change{kg: uint32(rng.IntN(3)), state: uint32(1 + rng.IntN(2)), key: fmt.Sprint(rng.IntN(20)), value: fmt.Sprint(i)}
		c.randomOp(rng, 10, 1, 5, 6, 5)
		changes = append(changes, c)
		mustAppend(t, w, c)
		if i%100 == 99 {
			mustPersist(t, w)
		}
	}
	h := mustPersist(t, w)
	var st ReadStats
	got := newSyncModel()
	if err := Read(ctx, store, ReadOptions{Stats: &st}, []Handle{h}, 0, 3, got.apply); err != nil {
		t.Fatal(err)
	}
	if d := diff(got.m, replay(model{}, changes, 0, uint64(len(changes)))); d != "" {
		t.Fatal(d)
	}
	if st.Superseded == 0 {
		t.Error("nothing superseded")
	}
}

// TestOptionsHaveDefaults: Options reports what the log runs with.
func TestOptionsHaveDefaults(t *testing.T) {
	l := openLog(t, newMemStore(), Options{MaxAttempts: 5})
	o := l.Options()
	if o.UploadTimeout != DefaultUploadTimeout || o.MaxAttempts != 5 || o.FlushInterval != DefaultFlushInterval {
		t.Errorf("options %+v", o)
	}
}

// TestSharedFetchesOnce: two restores of one process, each for its own
// writer of a shared log, fetch every object once between them through a
// Shared, replay exactly their own changes, and leave nothing held. A
// failed fetch is not kept: the next one tries the store again.
func TestSharedFetchesOnce(t *testing.T) {
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: time.Hour})
	ctx := context.Background()
	writers := []*Writer{l.Writer("a"), l.Writer("b")}
	changes := make([][]change, 2)
	for i := range 60 {
		for wi, w := range writers {
			c := change{kg: uint32(i % 3), state: 1, key: fmt.Sprint(i % 7), value: fmt.Sprint(wi, "-", i)}
			changes[wi] = append(changes[wi], c)
			mustAppend(t, w, c)
		}
		if i%10 == 9 {
			mustPersist(t, writers[0]) // ends the batch of both
		}
	}
	handles := []Handle{mustPersist(t, writers[0]), mustPersist(t, writers[1])}
	if !slices.Equal(handles[0].Objects, handles[1].Objects) || len(handles[0].Objects) < 3 {
		t.Fatalf("the writers' objects differ or are few: %q, %q", handles[0].Objects, handles[1].Objects)
	}
	shared := NewShared()
	check := func(wi int, ro ReadOptions) {
		t.Helper()
		got := newSyncModel()
		if err := Read(ctx, store, ro, handles[wi:wi+1], 0, 3, got.apply); err != nil {
			t.Fatal(err)
		}
		if d := diff(got.m, replay(model{}, changes[wi], 0, 60)); d != "" {
			t.Fatalf("writer %d: %s", wi, d)
		}
	}
	// Restore a prefetches and holds the objects; restore b's Read finds
	// them held and fetches nothing; then a replays and releases.
	objs, err := Fetch(ctx, store, ReadOptions{Shared: shared}, handles[:1])
	if err != nil {
		t.Fatal(err)
	}
	check(1, ReadOptions{Shared: shared})
	check(0, ReadOptions{Shared: shared, Prefetched: objs})
	shared.Release(objs)
	for _, name := range handles[0].Objects {
		if n := store.getsOf(name); n != 1 {
			t.Errorf("object %s read %d times, want once", name, n)
		}
	}
	if n := len(shared.objs); n != 0 {
		t.Fatalf("%d objects still held after every restore released them", n)
	}

	// A damaged object fails every Read that needs it, and is fetched
	// anew by the next: nothing failed is kept.
	bad := handles[0].Objects[1]
	store.mu.Lock()
	good := store.objects[bad]
	store.objects[bad] = append([]byte(nil), good[:len(good)-3]...)
	store.mu.Unlock()
	before := store.getsOf(bad)
	if err := Read(ctx, store, ReadOptions{Shared: shared}, handles[:1], 0, 3, newSyncModel().apply); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read of a damaged object: %v, want ErrCorrupt", err)
	}
	store.mu.Lock()
	store.objects[bad] = good
	store.mu.Unlock()
	if err := Read(ctx, store, ReadOptions{Shared: shared}, handles[:1], 0, 3, newSyncModel().apply); err != nil {
		t.Fatalf("Read after the object was mended: %v", err)
	}
	if n := store.getsOf(bad) - before; n < 2 {
		t.Fatalf("the damaged object was read %d times over two Reads: the failure was kept", n)
	}
	if n := len(shared.objs); n != 0 {
		t.Fatalf("%d objects still held", n)
	}
}

// TestSharedRetriesAfterAnotherUsersContextEnds: a restore waiting for an
// object another restore is fetching does not fail because that restore's
// context ended; it fetches the object itself.
func TestSharedRetriesAfterAnotherUsersContextEnds(t *testing.T) {
	s := NewShared()
	ctxA, cancelA := context.WithCancel(context.Background())
	started := make(chan struct{})
	errA := make(chan error, 1)
	go func() {
		_, err := s.acquire(ctxA, "x", func() (*Batch, error) {
			close(started)
			<-ctxA.Done()
			return nil, fmt.Errorf("fetching x: %w", ctxA.Err())
		})
		errA <- err
	}()
	<-started
	want := &Batch{}
	gotB := make(chan *Batch, 1)
	go func() {
		o, err := s.acquire(context.Background(), "x", func() (*Batch, error) { return want, nil })
		if err != nil {
			t.Error(err)
		}
		gotB <- o
	}()
	for { // until B waits on A's fetch
		s.mu.Lock()
		users := s.objs["x"].users
		s.mu.Unlock()
		if users == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Fatalf("A: %v, want its own cancellation", err)
	}
	if o := <-gotB; o != want {
		t.Fatalf("B got %p, want the object it fetched itself", o)
	}
	s.Release(map[string]*Batch{"x": want})
	if len(s.objs) != 0 {
		t.Fatalf("%d objects held", len(s.objs))
	}
}

// TestReadScatteredKeyGroups: changes in a few key groups far apart (the
// selection sorts them instead of counting over the extent), and two
// writers whose changes of one key group interleave across objects (the
// key group's changes are sorted into writer order), replay as applying
// them all in that order does.
func TestReadScatteredKeyGroups(t *testing.T) {
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: time.Hour})
	wa, wb := l.Writer("a"), l.Writer("b")
	kgs := []uint32{0, 7, 1 << 20, 1<<31 + 5, 1<<32 - 2}
	rng := rand.New(rand.NewPCG(7, 7))
	var ca, cb []change
	for i := range 400 {
		c := change{kg: kgs[rng.IntN(len(kgs))], state: 1, key: fmt.Sprintf("k%d", rng.IntN(8)), value: fmt.Sprint(i)}
		c.randomOp(rng, 20, 2, 9, 11, 4)
		// b writes after a: b's changes of a key must win even where an
		// object holds b's section before a later object's a section.
		if i%2 == 0 {
			mustAppend(t, wa, c)
			ca = append(ca, c)
		} else {
			mustAppend(t, wb, c)
			cb = append(cb, c)
		}
		if i%50 == 49 {
			mustPersist(t, wa)
		}
	}
	ha, hb := mustPersist(t, wa), mustPersist(t, wb)
	want := replay(replay(model{}, ca, 0, uint64(len(ca))), cb, 0, uint64(len(cb)))
	for _, rd := range readers {
		for _, rg := range [][2]uint32{{0, 1<<32 - 1}, {0, 1 << 20}, {8, 1<<32 - 1}} {
			got := newSyncModel()
			if err := rd.read(context.Background(), store, ReadOptions{}, []Handle{ha, hb}, rg[0], rg[1], got.apply); err != nil {
				t.Fatal(rd.name, err)
			}
			inRange := model{}
			for k, v := range want {
				if k.kg >= rg[0] && k.kg < rg[1] {
					inRange[k] = v
				}
			}
			if d := diff(got.m, inRange); d != "" {
				t.Fatalf("%s: range %v: replay differs from applying every change:\n%s", rd.name, rg, d)
			}
		}
	}
}

// TestHedgeAfterP90: once enough uploads are known to be fast, an upload
// that stalls is hedged long before UploadTimeout (an hour here), and the
// batch persists; with HedgeAfterP90 negative it is not hedged.
func TestHedgeAfterP90(t *testing.T) {
	for _, adaptive := range []bool{true, false} {
		t.Run(fmt.Sprintf("adaptive=%v", adaptive), func(t *testing.T) {
			var stallNext atomic.Bool
			inner := newMemStore()
			store := &hookStore{Store: inner, put: func(ctx context.Context, name string, data []byte) error {
				if stallNext.CompareAndSwap(true, false) {
					<-ctx.Done() // stuck until cancelled
					return ctx.Err()
				}
				return inner.Put(ctx, name, data)
			}}
			opts := Options{FlushInterval: time.Hour, UploadTimeout: time.Hour}
			if !adaptive {
				opts.HedgeAfterP90 = -1
			}
			l := openLog(t, store, opts)
			w := l.Writer("a")
			for i := range 20 { // 20 fast uploads: enough to know the store
				mustAppend(t, w, change{kg: 1, state: 1, key: fmt.Sprint(i), value: "v"})
				mustPersist(t, w)
			}
			mustAppend(t, w, change{kg: 1, state: 1, key: "stuck", value: "v"})
			stallNext.Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := w.Persist(ctx, 0)
			hedged := l.Metrics().HedgedUploads
			if adaptive && (err != nil || hedged != 1) {
				t.Fatalf("Persist: %v, %d hedged uploads; want it persisted by one hedge", err, hedged)
			}
			if !adaptive && (err == nil || hedged != 0) {
				t.Fatalf("Persist: %v, %d hedged uploads; want no hedge before UploadTimeout", err, hedged)
			}
		})
	}
}

// TestHedgeDelayBounds: the adaptive delay stays between 50ms and
// UploadTimeout, also for a factor too large to convert, and a NaN factor
// is refused.

// TestHedgeAfterP90Options: the log hedges after the factor times the
// recent p90 (blob.Hedger), at the latest after UploadTimeout, and a NaN
// factor is refused.
func TestHedgeAfterP90Options(t *testing.T) {
	l := openLog(t, newMemStore(), Options{UploadTimeout: 700 * time.Millisecond, HedgeAfterP90: 2})
	for range 20 {
		l.hedger.Record(100 * time.Millisecond)
	}
	if got := l.hedger.Delay(); got != 200*time.Millisecond {
		t.Errorf("hedge after %v, want 2 x 100ms", got)
	}
	l = openLog(t, newMemStore(), Options{UploadTimeout: 700 * time.Millisecond, HedgeAfterP90: -1})
	for range 20 {
		l.hedger.Record(100 * time.Millisecond)
	}
	if got := l.hedger.Delay(); got != 700*time.Millisecond {
		t.Errorf("HedgeAfterP90 -1: hedge after %v, want UploadTimeout", got)
	}
	if _, err := Open(newMemStore(), Options{HedgeAfterP90: math.NaN()}); err == nil {
		t.Error("a NaN HedgeAfterP90 was accepted")
	}
}

// TestReadHedgesStuckObject: with ReadOptions.Hedger, a read of an object
// stuck in the store is hedged, and the log replays in full; reads run
// ReadOptions.Fetches at a time.
func TestReadHedgesStuckObject(t *testing.T) {
	inner := newMemStore()
	var stuck atomic.Bool
	var running, most atomic.Int64
	store := &hookStore{Store: inner, get: func(ctx context.Context, name string) ([]byte, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		if stuck.CompareAndSwap(true, false) {
			<-ctx.Done() // stuck until cancelled
			return nil, ctx.Err()
		}
		time.Sleep(time.Millisecond) // so reads overlap
		return inner.Get(ctx, name)
	}}
	l := openLog(t, store, Options{FlushInterval: time.Hour})
	w := l.Writer("a")
	var hs []Handle
	for i := range 40 {
		mustAppend(t, w, change{kg: 1, state: 1, key: fmt.Sprint(i), value: "v"})
		hs = append(hs, mustPersist(t, w))
	}
	h := blob.NewHedger(3, time.Hour)
	for range 20 {
		h.Record(time.Millisecond)
	}
	stuck.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var applied int
	err := Read(ctx, store, ReadOptions{Hedger: h, Fetches: 3}, hs, 0, 2, func(c *Change) error {
		applied++
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if applied != 40 {
		t.Errorf("applied %d changes, want 40", applied)
	}
	// Three fetches, and a hedge beside the stuck one.
	if got := most.Load(); got > 4 {
		t.Errorf("%d reads at once, want at most 3 fetches and a hedge", got)
	}
}

// TestReadRefusesReplacedObject: an intact object that is not the one the
// handle recorded (another valid object put under its name) is refused,
// naming the object; a local copy that differs is read from the store
// instead; a handle without checksums (written before they were recorded)
// still reads.
func TestReadRefusesReplacedObject(t *testing.T) {
	store := fileStore(t)
	local := t.TempDir()
	ctx := context.Background()
	l := openLog(t, store, Options{FlushInterval: time.Hour, LocalDir: local})
	w := l.Writer("w")
	w.Append(0, 1, []byte("a"), []byte("1"), false)
	h1, err := w.Persist(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(0, 1, []byte("a"), []byte("2"), false)
	h2, err := w.Persist(ctx, h1.Upto)
	if err != nil {
		t.Fatal(err)
	}
	if len(h1.CRCs) != 1 || len(h2.CRCs) != 1 || h1.CRCs[0] == h2.CRCs[0] {
		t.Fatalf("checksums not recorded: %v %v", h1.CRCs, h2.CRCs)
	}
	read := func(opts ReadOptions, h Handle) (model, *ReadStats, error) {
		got := newSyncModel()
		st := &ReadStats{}
		opts.Stats = st
		err := Read(ctx, store, opts, []Handle{h}, 0, 1, got.apply)
		return got.m, st, err
	}
	if _, _, err := read(ReadOptions{}, h1); err != nil {
		t.Fatal(err)
	}
	// The local copy of h1's object replaced by h2's object: the store's
	// copy is read.
	p1 := filepath.Join(local, filepath.FromSlash(h1.Objects[0]))
	obj2, err := store.Get(ctx, h2.Objects[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p1, obj2, 0o644); err != nil {
		t.Fatal(err)
	}
	m, st, err := read(ReadOptions{LocalDir: local}, h1)
	if err != nil || st.LocalCorrupt != 1 || st.RemoteReads != 1 {
		t.Fatalf("replaced local copy: %v, stats %+v", err, st)
	}
	if v := m[skey{0, 1, "a"}]; v == nil || v.whole != "1" {
		got := "<none>"
		if v != nil {
			got = v.whole
		}
		t.Fatalf("replaced local copy: read value %q, want the recorded object's \"1\"", got)
	}
	// The store's object replaced too: refused, naming it.
	obj1, err := store.Get(ctx, h1.Objects[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, h1.Objects[0], obj2); err != nil {
		t.Fatal(err)
	}
	_, _, err = read(ReadOptions{LocalDir: local}, h1)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), h1.Objects[0]) || !strings.Contains(err.Error(), "checkpoint recorded") {
		t.Fatalf("replaced object: err = %v", err)
	}
	if _, err := Fetch(ctx, store, ReadOptions{}, []Handle{h1}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("replaced object, Fetch: err = %v", err)
	}
	// A handle without checksums (an older checkpoint's) reads.
	if err := store.Put(ctx, h1.Objects[0], obj1); err != nil {
		t.Fatal(err)
	}
	old := h1
	old.CRCs = nil
	if _, _, err := read(ReadOptions{}, old); err != nil {
		t.Fatalf("handle without checksums: %v", err)
	}
	bad := h1
	bad.CRCs = []uint32{1, 2}
	if _, _, err := read(ReadOptions{}, bad); err == nil || !strings.Contains(err.Error(), "2 checksums for 1 objects") {
		t.Fatalf("checksum count mismatch: err = %v", err)
	}
}

// TestCutsOfOneBarrierShareAnObject: the Cuts of the writers of a process
// at one barrier end one batch, sealed when the last writer holding
// changes has cut; a change appended after a writer's Cut (a later
// checkpoint's) stays out of it, also when the same key changed before
// the Cut, and replay gives each checkpoint's state.
func TestCutsOfOneBarrierShareAnObject(t *testing.T) {
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: time.Hour, PersistDelay: time.Hour})
	a, b, idle := l.Writer("a"), l.Writer("b"), l.Writer("idle")
	mustAppend(t, a, change{kg: 1, state: 1, key: "k", value: "a1"})
	mustAppend(t, b, change{kg: 2, state: 1, key: "k", value: "b1"})
	ua := a.Cut()
	mustAppend(t, a, change{kg: 1, state: 1, key: "k", value: "a2"}) // after a's barrier
	if n := l.Metrics().Batches; n != 0 {
		t.Fatalf("%d batches sealed before b reached the barrier", n)
	}
	ub := b.Cut() // idle holds no changes: b is the last
	if n := l.Metrics().Batches; n != 1 {
		t.Fatalf("%d batches sealed once every writer cut, want 1", n)
	}
	if idle.Cut() != 0 || l.Metrics().Batches != 1 {
		t.Fatalf("a writer without changes sealed a batch")
	}
	ha, hb := mustPersistUpto(t, a, 0, ua), mustPersistUpto(t, b, 0, ub)
	if len(ha.Objects) != 1 || !reflect.DeepEqual(ha.Objects, hb.Objects) || ha.Upto != 1 || hb.Upto != 1 {
		t.Fatalf("handles %+v and %+v, want one shared object up to 1 each", ha, hb)
	}
	got := newSyncModel()
	if err := Read(context.Background(), store, ReadOptions{}, []Handle{ha, hb}, 0, 10, got.apply); err != nil {
		t.Fatal(err)
	}
	want := model{}
	for _, c := range []change{{kg: 1, state: 1, key: "k", value: "a1"}, {kg: 2, state: 1, key: "k", value: "b1"}} {
		want = replay(want, []change{c}, 0, 1)
	}
	if d := diff(got.m, want); d != "" {
		t.Errorf("checkpoint of the barrier: %s", d)
	}
	// The change after a's Cut is the next checkpoint's.
	h2 := mustPersist(t, a)
	if h2.Upto != 2 || len(h2.Objects) != 2 || h2.Objects[1] == ha.Objects[0] {
		t.Fatalf("next handle %+v", h2)
	}
	got = newSyncModel()
	if err := Read(context.Background(), store, ReadOptions{}, []Handle{h2}, 0, 10, got.apply); err != nil {
		t.Fatal(err)
	}
	if d := diff(got.m, replay(model{}, []change{{kg: 1, state: 1, key: "k", value: "a1"}, {kg: 1, state: 1, key: "k", value: "a2"}}, 0, 2)); d != "" {
		t.Errorf("next checkpoint: %s", d)
	}
}

// TestPersistDelaySealsWithoutTheOtherCuts: a writer that does not reach
// the barrier does not hold the batch back beyond PersistDelay; its
// changes so far go into the batch.
func TestPersistDelaySealsWithoutTheOtherCuts(t *testing.T) {
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: time.Hour, PersistDelay: time.Millisecond})
	a, b := l.Writer("a"), l.Writer("b")
	mustAppend(t, a, change{kg: 1, state: 1, key: "k", value: "a1"})
	mustAppend(t, b, change{kg: 2, state: 1, key: "k", value: "b1"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ha, err := a.PersistUpto(ctx, 0, a.Cut())
	if err != nil {
		t.Fatal(err)
	}
	if m := l.Metrics(); m.Batches != 1 || m.Changes != 2 {
		t.Fatalf("batches %d holding %d changes, want 1 holding both writers' 2", m.Batches, m.Changes)
	}
	hb := mustPersist(t, b)
	if !reflect.DeepEqual(ha.Objects, hb.Objects) {
		t.Errorf("b's changes before the delay are in %v, a's in %v", hb.Objects, ha.Objects)
	}
}

// TestIntervalLogIsOneObject: with the default options, the log of one
// checkpoint interval of two busy writers, 12 MB between them (6 MB each,
// past the 5 MB per writer and 10 MB per log that split it before), is
// one object uploaded with one Put, at the barrier; nothing is uploaded
// before it, however long the interval. An interval's log beyond
// FlushBytes is split, each object within FlushBytes and one change (and
// the encoding's sequence numbers): the Append that crosses the threshold
// seals the batch itself.
func TestIntervalLogIsOneObject(t *testing.T) {
	var reqs blob.Counter
	inner := newMemStore()
	l := openLog(t, blob.Count(inner, &reqs), Options{})
	o := l.Options()
	if o.FlushInterval != 0 || o.WriterFlushBytes != o.FlushBytes || o.FlushBytes != DefaultFlushBytes {
		t.Fatalf("defaults %+v: want no timer and one threshold of %d bytes", o, DefaultFlushBytes)
	}
	a, b := l.Writer("a"), l.Writer("b")
	value := make([]byte, 1000)
	key := func(i int) []byte { return fmt.Appendf(nil, "k%07d", i) }
	appendN := func(w *Writer, from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if err := w.Append(0, 1, key(i), value, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(a, 0, 6000)
	appendN(b, 6000, 6000)
	if m := l.Metrics(); m.Batches != 0 {
		t.Fatalf("%d batches sealed before the barrier", m.Batches)
	}
	ua, ub := a.Cut(), b.Cut()
	ha, hb := mustPersistUpto(t, a, 0, ua), mustPersistUpto(t, b, 0, ub)
	if len(ha.Objects) != 1 || !reflect.DeepEqual(ha.Objects, hb.Objects) {
		t.Fatalf("handles %+v and %+v, want one shared object", ha.Objects, hb.Objects)
	}
	if r := reqs.Requests(); r.Put != 1 {
		t.Fatalf("%v for one interval's log, want 1 PUT", r)
	}

	// 40 MB in one interval, all from a: three objects, each sealed by
	// the Append that crossed FlushBytes.
	// An object is its changes as queued plus, per change, its sequence
	// number's delta (a byte here), the writer table and the header.
	limit := int64(o.FlushBytes) + int64(o.FlushBytes)/256 + int64(len(value)) + 64
	appendN(a, 12000, 40000)
	if n := l.Metrics().Batches; n != 1+2 {
		t.Fatalf("%d batches sealed after appending 40 MB, want the barrier's and 2 early ones", n-1)
	}
	h := mustPersist(t, a)
	if len(h.Objects) != 1+3 {
		t.Fatalf("objects %v, want the first interval's and 3", h.Objects)
	}
	for _, name := range h.Objects[1:] {
		inner.mu.Lock()
		size := int64(len(inner.objects[name]))
		inner.mu.Unlock()
		if size > limit {
			t.Errorf("object %s has %d bytes, more than FlushBytes and a change (%d)", name, size, limit)
		}
	}
	got := newSyncModel()
	if err := Read(context.Background(), inner, ReadOptions{}, []Handle{h, hb}, 0, 1, got.apply); err != nil {
		t.Fatal(err)
	}
	if len(got.m) != 52000 {
		t.Fatalf("replayed %d keys, want 52000", len(got.m))
	}
}
