package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
	"github.com/eddyflow/eddy/state/pebble"
)

func blobStore(t testing.TB) *file.Store {
	t.Helper()
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// subtask is one keyed subtask run twice: on the heap (the reference) and
// on Pebble.
type subtask struct {
	start, end int
	heap, pb   *states
	db         *pebble.DB
}

func newSubtask(t *testing.T, p *pebble.Pool, root string, start, end int) *subtask {
	t.Helper()
	db := openDB(t, p, filepath.Join(root, fmt.Sprintf("db-%d-%d", start, end)), start, end)
	return wrapDB(t, db, start, end)
}

func wrapDB(t *testing.T, db *pebble.DB, start, end int) *subtask {
	s := &subtask{start: start, end: end, db: db,
		heap: declare(t, state.NewBackend(maxPar, start, end, keySchema(t))),
		pb:   declare(t, state.NewStoreBackend(maxPar, start, end, keySchema(t), db))}
	s.heap.b.SetDeterministic(true)
	s.pb.b.SetDeterministic(true)
	return s
}

// run applies n random operations to keys of the subtask's key groups (keys
// from the first keys of the job that fall into them), flushing every 16.
func (s *subtask) run(t *testing.T, rng *rand.Rand, keys int, n int) {
	t.Helper()
	all, groups := keysOf(keys, 0, maxPar)
	for r := 0; r < n; r++ {
		i := rng.IntN(len(all))
		if groups[i] < s.start || groups[i] >= s.end {
			continue
		}
		o, x := rng.IntN(ops), rng.Int64N(100)
		for _, st := range []*states{s.heap, s.pb} {
			st.b.SetCurrentKey(all[i], groups[i])
			st.op(o, x)
		}
		if r%16 == 15 {
			if err := s.pb.b.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.pb.b.Flush(); err != nil {
		t.Fatal(err)
	}
}

func (s *subtask) check(t *testing.T) {
	t.Helper()
	compareSnapshots(t, s.heap.b, s.pb.b)
}

func ssts(c pebble.Checkpoint) []string {
	var out []string
	for _, f := range c.Files {
		if strings.HasSuffix(f.Name, ".sst") {
			out = append(out, f.Object)
		}
	}
	return out
}

// TestIncrementalCheckpoint: the second checkpoint uploads only the SSTs the
// first does not hold, and lists the first's by their objects.
func TestIncrementalCheckpoint(t *testing.T) {
	ctx := context.Background()
	// Without automatic compactions: one running between the checkpoints
	// may rewrite every file of the first, leaving nothing to reuse.
	p, err := pebble.NewPool(pebble.Memory(64<<20), pebble.MaxDBs(8), pebble.NoAutoCompactions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	store := blobStore(t)
	s := newSubtask(t, p, t.TempDir(), 0, maxPar)
	rng := rand.New(rand.NewPCG(2, 2))
	s.run(t, rng, 500, 3000)
	c1, st1, err := s.db.Checkpoint(ctx, store, pebble.CheckpointOptions{Prefix: "op/0", Run: "r1", ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The small files (MANIFEST, OPTIONS, markers) go up as one bundle.
	if st1.ReusedFiles != 0 || st1.UploadedFiles != len(ssts(c1))+1 || len(ssts(c1)) == 0 || len(c1.Files) < len(ssts(c1))+2 {
		t.Fatalf("first checkpoint: %+v of %d files (%d SSTs), want the SSTs and one bundle uploaded", st1, len(c1.Files), len(ssts(c1)))
	}
	if small, _ := store.List(ctx, "op/0/1/"); len(small) != 1 {
		t.Fatalf("the first checkpoint's small files are in %v, want one bundle", small)
	}
	for _, f := range c1.Files {
		if f.InBundle == slices.Contains(ssts(c1), f.Object) {
			t.Fatalf("file %+v: an SST must have its own object, a small file the bundle", f)
		}
	}
	s.run(t, rng, 500, 200)
	c2, st2, err := s.db.Checkpoint(ctx, store, pebble.CheckpointOptions{Prefix: "op/0", Run: "r1", ID: 2, Prev: &c1})
	if err != nil {
		t.Fatal(err)
	}
	old := ssts(c1)
	var reused, fresh []string
	for _, o := range ssts(c2) {
		if slices.Contains(old, o) {
			reused = append(reused, o)
		} else {
			fresh = append(fresh, o)
		}
	}
	if len(reused) == 0 || len(fresh) == 0 {
		t.Fatalf("second checkpoint: SSTs %v, of which the first held %v", ssts(c2), reused)
	}
	var reusedBytes int64
	for _, f := range c2.Files {
		if slices.Contains(reused, f.Object) {
			reusedBytes += f.Size
		}
	}
	if st2.ReusedFiles != len(reused) || st2.ReusedBytes != reusedBytes {
		t.Fatalf("second checkpoint stats %+v; reused %d SSTs of %d bytes", st2, len(reused), reusedBytes)
	}
	// Exactly the union of both checkpoints' SSTs is stored: nothing was
	// uploaded twice under another name.
	stored, err := store.List(ctx, "op/0/sst/")
	if err != nil {
		t.Fatal(err)
	}
	union := slices.Compact(slices.Sorted(slices.Values(append(ssts(c1), ssts(c2)...))))
	if !slices.Equal(stored, union) {
		t.Fatalf("stored SSTs %v, checkpoints list %v", stored, union)
	}
	// Retention: dropping the first checkpoint frees its SSTs that the
	// second does not hold, and its small files.
	del := pebble.Unreferenced([]pebble.Checkpoint{c1}, []pebble.Checkpoint{c2})
	for _, o := range del {
		if slices.Contains(reused, o) || strings.HasPrefix(o, "op/0/2/") {
			t.Fatalf("retention would delete %s, which the retained checkpoint lists", o)
		}
	}
	if len(del) != len(ssts(c1))+1-len(reused) {
		t.Fatalf("retention deletes %d objects; the first checkpoint has %d SSTs and a bundle, %d SSTs shared", len(del), len(ssts(c1)), len(reused))
	}
	// The checkpoint round-trips through serde, as a manifest holds it.
	codec := serde.MustFor[pebble.Checkpoint]()
	enc, err := codec.Append(nil, &c2)
	if err != nil {
		t.Fatal(err)
	}
	var back pebble.Checkpoint
	if err := codec.Decode(enc, &back); err != nil || !slices.Equal(back.Files, c2.Files) || back.End != c2.End {
		t.Fatalf("serde round trip: %v %+v", err, back)
	}
}

func TestUnreferenced(t *testing.T) {
	f := func(objs ...string) pebble.Checkpoint {
		var c pebble.Checkpoint
		for _, o := range objs {
			c.Files = append(c.Files, pebble.File{Name: o, Object: o})
		}
		return c
	}
	got := pebble.Unreferenced(
		[]pebble.Checkpoint{f("a", "b", "m1"), f("b", "c", "m2")},
		[]pebble.Checkpoint{f("c", "d", "m3"), f("a")})
	if want := []string{"b", "m1", "m2"}; !slices.Equal(got, want) {
		t.Fatalf("Unreferenced = %v, want %v", got, want)
	}
	if got := pebble.Unreferenced(nil, []pebble.Checkpoint{f("a")}); len(got) != 0 {
		t.Fatalf("nothing dropped: %v", got)
	}
}

// checkpointAll checkpoints every subtask's DB.
func checkpointAll(t *testing.T, store blob.Store, subs []*subtask, run string, id uint64) []pebble.Checkpoint {
	t.Helper()
	var parts []pebble.Checkpoint
	for i, s := range subs {
		c, _, err := s.db.Checkpoint(context.Background(), store, pebble.CheckpointOptions{
			Prefix: fmt.Sprintf("op/%d-%d", s.start, s.end), Run: run, ID: id, Prev: s.db.Restored()})
		if err != nil {
			t.Fatalf("subtask %d: %v", i, err)
		}
		parts = append(parts, c)
	}
	return parts
}

// rescale restores the Pebble checkpoint parts and the heap snapshots of
// subs at parallelism par, and checks that each new subtask's state is the
// same on both.
func rescale(t *testing.T, p *pebble.Pool, store blob.Store, subs []*subtask, parts []pebble.Checkpoint, par int) []*subtask {
	t.Helper()
	var snaps [][]byte
	for _, s := range subs {
		b, err := s.heap.b.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, b)
	}
	for _, s := range subs {
		if err := s.db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	var out []*subtask
	for i := range par {
		start, end := state.KeyGroupRange(maxPar, par, i)
		db, err := p.Restore(context.Background(), store, filepath.Join(root, fmt.Sprint(i)), maxPar, start, end, parts)
		if err != nil {
			t.Fatalf("restore of subtask %d of %d: %v", i, par, err)
		}
		t.Cleanup(func() { db.Close() })
		s := wrapDB(t, db, start, end)
		if err := s.heap.b.Restore(snaps); err != nil {
			t.Fatal(err)
		}
		s.check(t)
		out = append(out, s)
	}
	return out
}

// TestRestoreRescale checkpoints 2 subtasks, restores them at 2 (same key
// groups), then 3 (split), then 1 (merge), with writes in between, and
// compares every subtask's state with the heap backend's restored from its
// snapshots.
func TestRestoreRescale(t *testing.T) {
	p := newPool(t)
	store := blobStore(t)
	rng := rand.New(rand.NewPCG(3, 3))
	root := t.TempDir()
	var subs []*subtask
	for i := range 2 {
		start, end := state.KeyGroupRange(maxPar, 2, i)
		s := newSubtask(t, p, root, start, end)
		s.run(t, rng, 400, 2000)
		s.check(t)
		subs = append(subs, s)
	}
	id := uint64(0)
	for _, par := range []int{2, 3, 1} {
		id++
		parts := checkpointAll(t, store, subs, fmt.Sprint("run", id), id)
		subs = rescale(t, p, store, subs, parts, par)
		for _, s := range subs {
			s.run(t, rng, 400, 500)
			s.check(t)
		}
	}
	if n := subs[0].pb.b.Entries(); n == 0 {
		t.Fatal("no state after the rescales")
	}
}

// TestCorruptCheckpointFile: a downloaded file whose bytes are not what the
// checkpoint recorded fails the restore with an error naming it.
func TestCorruptCheckpointFile(t *testing.T) {
	ctx := context.Background()
	p := newPool(t)
	store := blobStore(t)
	s := newSubtask(t, p, t.TempDir(), 0, maxPar)
	s.run(t, rand.New(rand.NewPCG(4, 4)), 300, 1000)
	c, _, err := s.db.Checkpoint(ctx, store, pebble.CheckpointOptions{Prefix: "op", Run: "r", ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	var sst pebble.File
	for _, f := range c.Files {
		if strings.HasSuffix(f.Name, ".sst") {
			sst = f
		}
	}
	good, err := store.Get(ctx, sst.Object)
	if err != nil {
		t.Fatal(err)
	}
	for name, damage := range map[string]func(){
		// A valid object with other bytes (the blob checksum holds).
		"truncated": func() { store.Put(ctx, sst.Object, good[:len(good)/2]) },
		"flipped": func() {
			b := slices.Clone(good)
			b[len(b)/3] ^= 0x40
			store.Put(ctx, sst.Object, b)
		},
		// The object's own bytes damaged on storage.
		"damaged object": func() {
			path := store.Path(sst.Object)
			b, _ := os.ReadFile(path)
			b[len(b)/2] ^= 1
			os.WriteFile(path, b, 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			damage()
			defer store.Put(ctx, sst.Object, good)
			_, err := p.Restore(ctx, store, filepath.Join(t.TempDir(), "db"), maxPar, 0, maxPar, []pebble.Checkpoint{c})
			var ce *pebble.CorruptFileError
			if !errors.As(err, &ce) || ce.File != sst.Name || !strings.Contains(err.Error(), sst.Name) {
				t.Fatalf("restore = %v, want a CorruptFileError naming %s", err, sst.Name)
			}
		})
	}
	// Undamaged, it restores.
	db, err := p.Restore(ctx, store, filepath.Join(t.TempDir(), "db"), maxPar, 0, maxPar, []pebble.Checkpoint{c})
	if err != nil {
		t.Fatal(err)
	}
	compareSnapshots(t, s.heap.b, wrapDB(t, db, 0, maxPar).pb.b)
	db.Close()
}

// TestRestoreNarrowedParts restores from parts narrowed to some of their
// database's key groups, as the changelog state backend lists the
// databases a subtask was restored from: database A holds all key groups
// but is listed for [4, 16) only; database M, restored from A for [0, 4)
// and changed since, for [0, 4). Whichever is the base, the key groups a
// part is not listed for are cut from it (A's stale [0, 4) would otherwise
// resurrect what M deleted), and the state equals the heap's built from the
// same parts. Without files, a part's key groups start empty.
func TestRestoreNarrowedParts(t *testing.T) {
	ctx := context.Background()
	p := newPool(t)
	store := blobStore(t)
	rng := rand.New(rand.NewPCG(5, 5))
	const h = maxPar / 4
	a := newSubtask(t, p, t.TempDir(), 0, maxPar)
	a.run(t, rng, 400, 3000)
	ca, _, err := a.db.Checkpoint(ctx, store, pebble.CheckpointOptions{Prefix: "op/a", Run: "r1", ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	snapA, err := a.heap.b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	a.db.Close()
	own := func(c pebble.Checkpoint, start, end int) pebble.Checkpoint {
		c.OwnStart, c.OwnEnd = uint32(start), uint32(end)
		return c
	}
	db, err := p.Restore(ctx, store, filepath.Join(t.TempDir(), "m"), maxPar, 0, h, []pebble.Checkpoint{own(ca, 0, h), own(ca, h, maxPar)})
	if err != nil {
		t.Fatal(err)
	}
	m := wrapDB(t, db, 0, h)
	if err := m.heap.b.RestorePart(snapA, 0, h); err != nil {
		t.Fatal(err)
	}
	m.check(t)
	m.run(t, rng, 400, 3000) // deletes some of A's keys, too
	m.check(t)
	cm, _, err := m.db.Checkpoint(ctx, store, pebble.CheckpointOptions{Prefix: "op/m", Run: "r2", ID: 2, Prev: m.db.Restored()})
	if err != nil {
		t.Fatal(err)
	}
	snapM, err := m.heap.b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	m.db.Close()
	parts := []pebble.Checkpoint{own(cm, 0, h), own(ca, h, maxPar)}
	for _, r := range [][2]int{{0, maxPar}, {0, h + 1}, {h - 1, maxPar}, {1, 3}} {
		start, end := r[0], r[1]
		db, err := p.Restore(ctx, store, filepath.Join(t.TempDir(), "r"), maxPar, start, end, parts)
		if err != nil {
			t.Fatalf("restore of [%d, %d): %v", start, end, err)
		}
		s := wrapDB(t, db, start, end)
		if err := s.heap.b.RestorePart(snapM, 0, h); err != nil {
			t.Fatal(err)
		}
		if err := s.heap.b.RestorePart(snapA, h, maxPar); err != nil {
			t.Fatal(err)
		}
		s.check(t)
		db.Close()
	}
	// A part without files: its key groups start empty.
	empty := pebble.Checkpoint{MaxParallelism: maxPar, Start: 0, End: h}
	db, err = p.Restore(ctx, store, filepath.Join(t.TempDir(), "e"), maxPar, 0, maxPar, []pebble.Checkpoint{empty, own(ca, h, maxPar)})
	if err != nil {
		t.Fatal(err)
	}
	s := wrapDB(t, db, 0, maxPar)
	if err := s.heap.b.RestorePart(snapA, h, maxPar); err != nil {
		t.Fatal(err)
	}
	s.check(t)
	db.Close()
	// Listed for key groups its database did not hold: refused.
	if _, err := p.Restore(ctx, store, filepath.Join(t.TempDir(), "x"), maxPar, 0, maxPar, []pebble.Checkpoint{own(cm, 0, h+1), own(ca, h+1, maxPar)}); err == nil || !strings.Contains(err.Error(), "held") {
		t.Fatalf("restore of a part listed beyond its database: %v", err)
	}
}

// TestTakeCheckpointAsync: the checkpoint taken after the DB took more
// writes holds every write committed before TakeCheckpointAsync, and maybe
// some later ones: restoring it and replaying the writes logged since the
// call gives the DB's state, as the changelog's restore does.
func TestTakeCheckpointAsync(t *testing.T) {
	ctx := context.Background()
	p := newPool(t)
	store := blobStore(t)
	s := newSubtask(t, p, t.TempDir(), 0, maxPar)
	rng := rand.New(rand.NewPCG(6, 6))
	s.run(t, rng, 300, 2000)
	take, err := s.db.TakeCheckpointAsync(1)
	if err != nil {
		t.Fatal(err)
	}
	var later []change
	s.pb.b.SetChangeLog(func(kg, st uint32, op state.ChangeOp, key, sub, value []byte) error {
		later = append(later, change{kg, st, op, slices.Clone(key), slices.Clone(sub), slices.Clone(value)})
		return nil
	})
	s.run(t, rng, 300, 500) // after the call: in the checkpoint or not
	lc, err := take()
	if err != nil {
		t.Fatal(err)
	}
	s.run(t, rng, 300, 500) // after the checkpoint: not in it
	c, _, err := lc.Upload(ctx, store, pebble.CheckpointOptions{Prefix: "op", Run: "r", ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := lc.Remove(); err != nil {
		t.Fatal(err)
	}
	db, err := p.Restore(ctx, store, filepath.Join(t.TempDir(), "db"), maxPar, 0, maxPar, []pebble.Checkpoint{c})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := wrapDB(t, db, 0, maxPar)
	for _, ch := range later {
		if err := r.pb.b.ApplyChange(ch.kg, ch.st, ch.op, ch.key, ch.sub, ch.value); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.pb.b.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(later) == 0 {
		t.Fatal("no write logged after the call")
	}
	compareSnapshots(t, s.heap.b, r.pb.b)
}

// TestFileContents: a file alone in its object must be all of it (as
// checkpoints written before bundles have them); a bundled one is found at
// its offset; a wrong size, range or checksum is an error saying which.
func TestFileContents(t *testing.T) {
	crc := func(b string) uint32 { return crc32.Checksum([]byte(b), crc32.MakeTable(crc32.Castagnoli)) }
	alone := pebble.File{Name: "000004.sst", Object: "o", Size: 3, CRC32C: crc("abc")}
	if got, err := alone.Contents([]byte("abc")); err != nil || string(got) != "abc" {
		t.Fatalf("alone: %q, %v", got, err)
	}
	bundled := pebble.File{Name: "OPTIONS-000003", Object: "b", Size: 3, CRC32C: crc("def"), InBundle: true, Offset: 3}
	if got, err := bundled.Contents([]byte("abcdefgh")); err != nil || string(got) != "def" {
		t.Fatalf("bundled: %q, %v", got, err)
	}
	for _, c := range []struct {
		f    pebble.File
		obj  string
		want string
	}{
		{alone, "abcd", "4 bytes, the checkpoint recorded 3"},
		{alone, "abd", "CRC-32C"},
		{bundled, "abcde", "bytes [3, 6) of a 5-byte bundle"},
		{bundled, "abcdeF", "CRC-32C"},
		{pebble.File{InBundle: true, Offset: -1, Size: 1}, "abc", "bytes [-1, 0)"},
	} {
		if _, err := c.f.Contents([]byte(c.obj)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v in %q: %v, want an error with %q", c.f, c.obj, err, c.want)
		}
	}
}
