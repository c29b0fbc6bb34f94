package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/checkpoint"
)

var ctx = context.Background()

func newFileStore(t *testing.T) *file.Store {
	t.Helper()
	fs, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// writeCheckpoint uploads a state part per name in own (under id's
// directory) and completes a manifest listing them plus shared.
func writeCheckpoint(t *testing.T, st *checkpoint.Storage, bs blob.Store, id uint64, own int, shared ...string) *checkpoint.Manifest {
	t.Helper()
	m := &checkpoint.Manifest{
		ID:        id,
		Job:       "job",
		CreatedAt: int64(id) * 1e9,
		Sources:   []checkpoint.SourceState{{Name: "src", Splits: []checkpoint.SplitState{{Split: 0, Pos: []byte{byte(id)}}, {Split: 1, Pos: []byte("end"), Done: true}}}},
		Operators: []checkpoint.OperatorState{{Name: "agg", MaxParallelism: 128, Parallelism: uint32(own), Schemas: []byte("schemas")}},
		Sinks:     []checkpoint.SinkState{{Name: "out", Txns: [][]byte{[]byte(fmt.Sprintf("txn-%d", id))}}},
	}
	for i := 0; i < own; i++ {
		name := st.StateBlobName(id, "agg", i)
		data := []byte(fmt.Sprintf("state %d/%d", id, i))
		if err := bs.Put(ctx, name, data); err != nil {
			t.Fatal(err)
		}
		lo, hi := uint32(i*128/own), uint32((i+1)*128/own)
		m.Operators[0].Parts = append(m.Operators[0].Parts, checkpoint.StatePart{Subtask: uint32(i), KeyGroupStart: lo, KeyGroupEnd: hi, Blob: name, Size: int64(len(data))})
		m.Files = append(m.Files, name)
	}
	m.Files = append(m.Files, shared...)
	if err := st.Complete(ctx, m); err != nil {
		t.Fatalf("Complete(%d): %v", id, err)
	}
	return m
}

func names(t *testing.T, bs blob.Store) []string {
	t.Helper()
	n, err := bs.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCompleteLatestRoundTrip(t *testing.T) {
	bs := newFileStore(t)
	st := checkpoint.NewStorage(bs, 0)
	if m, skipped, err := st.Latest(ctx); m != nil || skipped != nil || err != nil {
		t.Fatalf("Latest of an empty store = %v, %v, %v", m, skipped, err)
	}
	if id, err := st.NextID(ctx); id != 1 || err != nil {
		t.Fatalf("NextID = %d, %v", id, err)
	}
	want := writeCheckpoint(t, st, bs, 7, 2)
	want.Version = 1 // no deferred log uploads: version 1, which older builds read
	got, skipped, err := st.Latest(ctx)
	if err != nil || len(skipped) != 0 {
		t.Fatalf("Latest: %v, skipped %v", err, skipped)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Latest =\n%+v\nwant\n%+v", got, want)
	}
	if got, err := st.Load(ctx, 7); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	if ids, err := st.List(ctx); !slices.Equal(ids, []uint64{7}) || err != nil {
		t.Fatalf("List = %v, %v", ids, err)
	}
	if id, _ := st.NextID(ctx); id != 8 {
		t.Fatalf("NextID = %d, want 8", id)
	}
	if _, err := bs.Get(ctx, "checkpoints/00000000000000000007/MANIFEST"); err != nil {
		t.Fatalf("manifest not at the documented name: %v", err)
	}
	// Completing the same manifest again (a retry after a lost reply)
	// succeeds; another writer's manifest for the same id does not replace
	// it.
	if err := st.Complete(ctx, want); err != nil {
		t.Fatalf("completing the same manifest again: %v", err)
	}
	other := *want
	other.Job = "another writer"
	if err := checkpoint.NewStorage(bs, 3).Complete(ctx, &other); !errors.Is(err, checkpoint.ErrTaken) || !errors.Is(err, blob.ErrExists) {
		t.Fatalf("completing checkpoint 7 with another manifest = %v, want ErrTaken", err)
	}
	if got, _, _ := st.Latest(ctx); got.Job != want.Job {
		t.Fatalf("Job = %q after another writer's attempt, want %q", got.Job, want.Job)
	}
}

// TestWritersRaceForOneID: of 8 storages writing manifests of one id at
// once, exactly one completes it and Latest returns its manifest.
func TestWritersRaceForOneID(t *testing.T) {
	bs := newFileStore(t)
	const writers = 8
	errs := make([]error, writers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range writers {
		wg.Go(func() {
			m := &checkpoint.Manifest{ID: 3, Job: fmt.Sprintf("writer %d", i), CreatedAt: int64(i)}
			<-start
			errs[i] = checkpoint.NewStorage(bs, 3).Write(ctx, m)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both completed checkpoint 3", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, checkpoint.ErrTaken):
			t.Fatalf("writer %d: %v, want ErrTaken", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer completed checkpoint 3")
	}
	got, _, err := checkpoint.NewStorage(bs, 3).Latest(ctx)
	if err != nil || got.Job != fmt.Sprintf("writer %d", winner) {
		t.Fatalf("Latest = %+v, %v; want writer %d's manifest", got, err, winner)
	}
}

func TestRetention(t *testing.T) {
	bs := newFileStore(t)
	st := checkpoint.NewStorage(bs, 3)
	put := func(name string) {
		if err := bs.Put(ctx, name, []byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	shared := st.StateBlobName(1, "agg", 99) // uploaded by checkpoint 1, used by all
	put(shared)
	put("dstl/segment-1")                 // not a checkpoint's blob: never touched
	put("checkpoints/shared/incremental") // no id in its path: never touched
	writeCheckpoint(t, st, bs, 1, 2, shared)
	writeCheckpoint(t, st, bs, 2, 2, shared)
	writeCheckpoint(t, st, bs, 3, 1, shared)
	// Checkpoint 4 was aborted after uploading state: no manifest.
	put(st.StateBlobName(4, "agg", 0))
	put(st.StateBlobName(4, "agg", 1))
	writeCheckpoint(t, st, bs, 5, 2, shared, st.StateBlobName(3, "agg", 0)) // reuses one of 3's parts
	if ids, _ := st.List(ctx); !slices.Equal(ids, []uint64{2, 3, 5}) {
		t.Fatalf("after 5: List = %v, want [2 3 5]", ids)
	}
	// Checkpoints 7 and 8 are in flight while 6 completes.
	put(st.StateBlobName(7, "agg", 0))
	put(st.StateBlobName(8, "agg", 0))
	writeCheckpoint(t, st, bs, 6, 1, shared)

	if ids, _ := st.List(ctx); !slices.Equal(ids, []uint64{3, 5, 6}) {
		t.Fatalf("List = %v, want [3 5 6]", ids)
	}
	want := []string{
		"checkpoints/00000000000000000001/agg-99.state", // shared by retained ones
		"checkpoints/00000000000000000003/MANIFEST",
		"checkpoints/00000000000000000003/agg-0.state",
		"checkpoints/00000000000000000005/MANIFEST",
		"checkpoints/00000000000000000005/agg-0.state",
		"checkpoints/00000000000000000005/agg-1.state",
		"checkpoints/00000000000000000006/MANIFEST",
		"checkpoints/00000000000000000006/agg-0.state",
		"checkpoints/00000000000000000007/agg-0.state", // in flight
		"checkpoints/00000000000000000008/agg-0.state", // in flight
		"checkpoints/shared/incremental",
		"dstl/segment-1",
	}
	if got := names(t, bs); !slices.Equal(got, want) {
		t.Fatalf("blobs after retention:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Every retained checkpoint is still restorable.
	for _, id := range []uint64{3, 5, 6} {
		if m, skipped, err := st.Before(ctx, id+1); err != nil || len(skipped) != 0 || m.ID != id {
			t.Fatalf("Before(%d) = %v, %v, %v", id+1, m, skipped, err)
		}
	}
	// Completing 7 retains 5, 6 and 7: 3's manifest goes, but its part
	// stays while 5 uses it; 8 is still in flight.
	writeCheckpoint(t, st, bs, 7, 1)
	got := names(t, bs)
	if slices.Contains(got, st.ManifestName(3)) {
		t.Error("manifest 3 survived completing 7")
	}
	for _, kept := range []string{shared, st.StateBlobName(3, "agg", 0), st.StateBlobName(8, "agg", 0)} {
		if !slices.Contains(got, kept) {
			t.Errorf("%s was deleted", kept)
		}
	}
	// Completing 8 retains 6, 7 and 8: nothing uses 3's part any more.
	writeCheckpoint(t, st, bs, 8, 1)
	if slices.Contains(names(t, bs), st.StateBlobName(3, "agg", 0)) {
		t.Error("3's part survived once no retained checkpoint used it")
	}
}

func TestRetentionDefaultAndOne(t *testing.T) {
	for _, c := range []struct{ retain, want int }{{0, 3}, {-5, 3}, {1, 1}, {5, 5}} {
		bs := newFileStore(t)
		st := checkpoint.NewStorage(bs, c.retain)
		for id := uint64(1); id <= 8; id++ {
			writeCheckpoint(t, st, bs, id, 1)
		}
		ids, _ := st.List(ctx)
		if len(ids) != c.want || ids[len(ids)-1] != 8 {
			t.Errorf("retain %d: List = %v, want the newest %d", c.retain, ids, c.want)
		}
		if n := len(names(t, bs)); n != 2*c.want {
			t.Errorf("retain %d: %d blobs left, want %d", c.retain, n, 2*c.want)
		}
	}
}

// corrupt rewrites the file of blob name with f applied to its bytes.
func corrupt(t *testing.T, fs *file.Store, name string, f func([]byte) []byte) {
	t.Helper()
	data, err := os.ReadFile(fs.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fs.Path(name), f(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantSkip(t *testing.T, err error, id uint64, why string) {
	t.Helper()
	var se *checkpoint.SkipError
	if !errors.As(err, &se) || se.ID != id {
		t.Fatalf("skipped error %v is not a *SkipError for checkpoint %d", err, id)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, fmt.Sprintf("checkpoint %d: ", id)) || !strings.Contains(msg, why) || !strings.Contains(msg, "falling back") {
		t.Fatalf("skipped error %q does not name checkpoint %d and %q", msg, id, why)
	}
}

func TestLatestFallsBack(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, fs *file.Store, st *checkpoint.Storage)
		why    string
	}{
		{"flipped byte", func(t *testing.T, fs *file.Store, st *checkpoint.Storage) {
			corrupt(t, fs, st.ManifestName(3), func(b []byte) []byte { b[len(b)/2] ^= 1; return b })
		}, "manifest corrupt: blob: object \"checkpoints/00000000000000000003/MANIFEST\" is corrupt: checksum mismatch"},
		{"truncated", func(t *testing.T, fs *file.Store, st *checkpoint.Storage) {
			corrupt(t, fs, st.ManifestName(3), func(b []byte) []byte { return b[:len(b)-3] })
		}, "manifest corrupt"},
		{"empty", func(t *testing.T, fs *file.Store, st *checkpoint.Storage) {
			corrupt(t, fs, st.ManifestName(3), func(b []byte) []byte { return nil })
		}, "truncated"},
		{"not a manifest", func(t *testing.T, fs *file.Store, st *checkpoint.Storage) {
			fs.Put(ctx, st.ManifestName(3), []byte("\xff\xff\xff garbage with a valid trailer"))
		}, "manifest undecodable"},
		{"no version", func(t *testing.T, fs *file.Store, st *checkpoint.Storage) {
			fs.Put(ctx, st.ManifestName(3), nil)
		}, "no format version"},
		{"other checkpoint's manifest", func(t *testing.T, fs *file.Store, st *checkpoint.Storage) {
			data, _ := fs.Get(ctx, st.ManifestName(2))
			fs.Put(ctx, st.ManifestName(3), data)
		}, "describes checkpoint 2"},
		{"missing state", func(t *testing.T, fs *file.Store, st *checkpoint.Storage) {
			fs.Delete(ctx, st.StateBlobName(3, "agg", 1))
		}, `1 of its 2 files missing, first "checkpoints/00000000000000000003/agg-1.state"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := newFileStore(t)
			st := checkpoint.NewStorage(fs, 3)
			for id := uint64(1); id <= 3; id++ {
				writeCheckpoint(t, st, fs, id, 2)
			}
			c.damage(t, fs, st)
			m, skipped, err := st.Latest(ctx)
			if err != nil || m == nil || m.ID != 2 || len(skipped) != 1 {
				t.Fatalf("Latest = %v, skipped %v, %v; want checkpoint 2 and one skip", m, skipped, err)
			}
			wantSkip(t, skipped[0], 3, c.why)
			if c.name == "flipped byte" {
				var ce *blob.CorruptError
				if !errors.As(skipped[0], &ce) || ce.Name != st.ManifestName(3) {
					t.Fatalf("skip does not carry the *blob.CorruptError: %v", skipped[0])
				}
			}
		})
	}
}

func TestLatestNothingUsable(t *testing.T) {
	fs := newFileStore(t)
	st := checkpoint.NewStorage(fs, 3)
	writeCheckpoint(t, st, fs, 1, 1)
	writeCheckpoint(t, st, fs, 2, 1)
	corrupt(t, fs, st.ManifestName(1), func(b []byte) []byte { return b[:1] })
	corrupt(t, fs, st.ManifestName(2), func(b []byte) []byte { return b[:1] })
	m, skipped, err := st.Latest(ctx)
	if m != nil || err != nil || len(skipped) != 2 {
		t.Fatalf("Latest = %v, %v, %v", m, skipped, err)
	}
	wantSkip(t, skipped[0], 2, "corrupt")
	wantSkip(t, skipped[1], 1, "corrupt")
}

func TestBefore(t *testing.T) {
	fs := newFileStore(t)
	st := checkpoint.NewStorage(fs, 5)
	for _, id := range []uint64{2, 4, 6} {
		writeCheckpoint(t, st, fs, id, 1)
	}
	for before, want := range map[uint64]uint64{7: 6, 6: 4, 5: 4, 3: 2, 2: 0, 1: 0, 0: 0} {
		m, skipped, err := st.Before(ctx, before)
		if err != nil || len(skipped) != 0 {
			t.Fatalf("Before(%d): %v, %v", before, skipped, err)
		}
		if got := uint64(0); m != nil {
			got = m.ID
			if got != want {
				t.Errorf("Before(%d) = %d, want %d", before, got, want)
			}
		} else if want != 0 {
			t.Errorf("Before(%d) = nil, want %d", before, want)
		}
	}
	corrupt(t, fs, st.ManifestName(4), func(b []byte) []byte { b[0] ^= 0xff; return b })
	m, skipped, err := st.Before(ctx, 6)
	if err != nil || m == nil || m.ID != 2 || len(skipped) != 1 {
		t.Fatalf("Before(6) with 4 corrupt = %v, %v, %v", m, skipped, err)
	}
	wantSkip(t, skipped[0], 4, "corrupt")
}

// faultStore fails Get of one name, or every Delete, with a plain error.
type faultStore struct {
	blob.Store
	failGet    string
	failDelete bool
}

var errInjected = errors.New("injected I/O error")

func (f *faultStore) Get(ctx context.Context, name string) ([]byte, error) {
	if name == f.failGet {
		return nil, fmt.Errorf("get %q: %w", name, errInjected)
	}
	return f.Store.Get(ctx, name)
}

func (f *faultStore) Delete(ctx context.Context, name string) error {
	if f.failDelete {
		return fmt.Errorf("delete %q: %w", name, errInjected)
	}
	return f.Store.Delete(ctx, name)
}

func TestTransientErrorDoesNotFallBack(t *testing.T) {
	fs := &faultStore{Store: newFileStore(t)}
	st := checkpoint.NewStorage(fs, 3)
	writeCheckpoint(t, st, fs, 1, 1)
	writeCheckpoint(t, st, fs, 2, 1)
	fs.failGet = st.ManifestName(2)
	m, _, err := st.Latest(ctx)
	if m != nil || !errors.Is(err, errInjected) {
		t.Fatalf("Latest = %v, %v; want the I/O error, not a fallback", m, err)
	}
	// Pruning that cannot read a retained manifest deletes nothing.
	before := names(t, fs)
	m3 := &checkpoint.Manifest{ID: 3}
	var pe *checkpoint.PruneError
	if err := st.Complete(ctx, m3); !errors.As(err, &pe) || pe.ID != 3 || !errors.Is(err, errInjected) {
		t.Fatalf("Complete = %v, want a *PruneError", err)
	}
	after := names(t, fs)
	if want := append(slices.Clone(before), st.ManifestName(3)); !slices.Equal(after, want) {
		t.Fatalf("blobs = %q, want %q", after, want)
	}
}

func TestPruneErrorStillComplete(t *testing.T) {
	fs := &faultStore{Store: newFileStore(t)}
	st := checkpoint.NewStorage(fs, 1)
	writeCheckpoint(t, st, fs, 1, 1)
	fs.failDelete = true
	m := &checkpoint.Manifest{ID: 2}
	err := st.Complete(ctx, m)
	var pe *checkpoint.PruneError
	if !errors.As(err, &pe) || pe.ID != 2 || !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "checkpoint 2 is complete") {
		t.Fatalf("Complete = %v, want a *PruneError", err)
	}
	if got, _, err := st.Latest(ctx); err != nil || got.ID != 2 {
		t.Fatalf("Latest = %v, %v; want checkpoint 2", got, err)
	}
	// The next Complete prunes what this one could not.
	fs.failDelete = false
	if err := st.Complete(ctx, &checkpoint.Manifest{ID: 3}); err != nil {
		t.Fatal(err)
	}
	if got := names(t, fs); !slices.Equal(got, []string{st.ManifestName(3)}) {
		t.Fatalf("blobs = %q", got)
	}
}

func TestPruneSkipsCorruptRetained(t *testing.T) {
	fs := newFileStore(t)
	st := checkpoint.NewStorage(fs, 3)
	for id := uint64(1); id <= 4; id++ {
		writeCheckpoint(t, st, fs, id, 1)
	}
	corrupt(t, fs, st.ManifestName(3), func(b []byte) []byte { return b[:4] })
	writeCheckpoint(t, st, fs, 5, 1)
	if ids, _ := st.List(ctx); !slices.Equal(ids, []uint64{2, 4, 5}) {
		t.Fatalf("List = %v, want [2 4 5]: a corrupt manifest holds no retention slot", ids)
	}
	if got := names(t, fs); slices.Contains(got, st.StateBlobName(3, "agg", 0)) {
		t.Fatal("state of the corrupt checkpoint 3 survived")
	}
}

// upload is checkpoint 6 with a log part of object "a" recording u.
func upload(u checkpoint.LogUpload) checkpoint.Manifest {
	return checkpoint.Manifest{ID: 6, Files: []string{"a"}, Operators: []checkpoint.OperatorState{{Name: "op", MaxParallelism: 8, Parallelism: 1,
		Changelog: []checkpoint.LogPart{{KeyGroupEnd: 8, Writer: "w", Upto: 1, Objects: []string{"a"}, Uploads: []checkpoint.LogUpload{u}}}}}}
}

func TestCompleteRejects(t *testing.T) {
	fs := newFileStore(t)
	st := checkpoint.NewStorage(fs, 3)
	writeCheckpoint(t, st, fs, 5, 1)
	part := func(p checkpoint.StatePart) []checkpoint.OperatorState {
		return []checkpoint.OperatorState{{Name: "op", MaxParallelism: 8, Parallelism: 2, Parts: []checkpoint.StatePart{p}}}
	}
	cases := []struct {
		m    checkpoint.Manifest
		want string
	}{
		{checkpoint.Manifest{ID: 0}, "ids start at 1"},
		{checkpoint.Manifest{ID: 4}, "subsumed by a newer complete checkpoint 5"},
		{checkpoint.Manifest{ID: 6, Files: []string{"../x"}}, `Files[0]: blob: invalid object name "../x"`},
		{checkpoint.Manifest{ID: 6, Operators: part(checkpoint.StatePart{Blob: "b"})}, `blob "b" is not listed in Files`},
		{checkpoint.Manifest{ID: 6, Operators: part(checkpoint.StatePart{KeyGroupStart: 4, KeyGroupEnd: 2})}, "run backwards"},
		{checkpoint.Manifest{ID: 6, Operators: part(checkpoint.StatePart{KeyGroupEnd: 9})}, "exceed the operator's 8 key groups"},
		{checkpoint.Manifest{ID: 6, Operators: part(checkpoint.StatePart{Subtask: 2})}, "subtask 2 of an operator with parallelism 2"},
		{checkpoint.Manifest{ID: 6, Operators: part(checkpoint.StatePart{Size: -1})}, "negative size"},
		{checkpoint.Manifest{ID: 6, Sources: []checkpoint.SourceState{{Name: "a"}, {Name: "a"}}}, `two sources named "a"`},
		{checkpoint.Manifest{ID: 6, Sinks: []checkpoint.SinkState{{}}}, "sink with an empty name"},
		{checkpoint.Manifest{ID: 6, Sources: []checkpoint.SourceState{{Name: "a", Splits: []checkpoint.SplitState{{Split: 1}, {Split: 0}, {Split: 1}}}}},
			`source "a" lists split 1 twice`},
		{upload(checkpoint.LogUpload{Object: "b", ID: "u", Parts: 1, Size: 16}), `upload "u" of object "b", which is not among its log objects`},
		{upload(checkpoint.LogUpload{Object: "a", Parts: 1, Size: 16}), `upload of log object "a" without an id`},
		{upload(checkpoint.LogUpload{Object: "a", ID: "u", Parts: 10001, Size: 16}), "part count 10001 outside 1..10000"},
		{upload(checkpoint.LogUpload{Object: "a", ID: "u", Parts: 1, Size: 15}), "size 15 is less than a trailer"},
	}
	for _, c := range cases {
		err := st.Complete(ctx, &c.m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Complete(%+v) = %v, want an error containing %q", c.m, err, c.want)
		}
		var pe *checkpoint.PruneError
		if errors.As(err, &pe) {
			t.Errorf("Complete(%+v) wrote its manifest", c.m)
		}
	}
	if err := st.Complete(ctx, &checkpoint.Manifest{ID: 4}); !errors.Is(err, checkpoint.ErrSubsumed) {
		t.Errorf("Complete(4) = %v, want ErrSubsumed", err)
	}
	if ids, _ := st.List(ctx); !slices.Equal(ids, []uint64{5}) {
		t.Fatalf("List = %v: a rejected checkpoint became complete", ids)
	}
}

func TestStateBlobName(t *testing.T) {
	st := checkpoint.NewStorage(newFileStore(t), 0)
	if got, want := st.StateBlobName(12, "window-agg_1.v2", 3), "checkpoints/00000000000000000012/window-agg_1.v2-3.state"; got != want {
		t.Errorf("StateBlobName = %q, want %q", got, want)
	}
	if got, want := st.ManifestName(12), "checkpoints/00000000000000000012/MANIFEST"; got != want {
		t.Errorf("ManifestName = %q, want %q", got, want)
	}
	ops := []string{"", ".", "..", ".hidden", "a/b", "a_b", "a b", "a\\b", "ünïcode", "a/../../etc", strings.Repeat("x", 300), strings.Repeat("x", 301)}
	seen := map[string]string{}
	for _, op := range ops {
		n := st.StateBlobName(^uint64(0), op, 0)
		if err := blob.ValidateName(n); err != nil {
			t.Errorf("StateBlobName(%q) = %q: %v", op, n, err)
		}
		if strings.Count(n, "/") != 2 || len(n[strings.LastIndexByte(n, '/')+1:]) > 200 {
			t.Errorf("StateBlobName(%q) = %q: not one short file in the checkpoint's directory", op, n)
		}
		if prev, dup := seen[n]; dup {
			t.Errorf("operators %q and %q share blob %q", prev, op, n)
		}
		seen[n] = op
	}
}

// blockingDeletes holds every Delete until release is closed.
type blockingDeletes struct {
	blob.Store
	deleting chan struct{} // receives once per Delete that starts
	release  chan struct{}
}

func (b *blockingDeletes) Delete(ctx context.Context, name string) error {
	b.deleting <- struct{}{}
	<-b.release
	return b.Store.Delete(ctx, name)
}

// TestWriteDoesNotWaitForPrune: a checkpoint completes while the prune of
// the one before it is still deleting, and the prune, finishing later,
// deletes nothing the newer checkpoint uses.
func TestWriteDoesNotWaitForPrune(t *testing.T) {
	inner := newFileStore(t)
	st := checkpoint.NewStorage(inner, 1)
	writeCheckpoint(t, st, inner, 1, 2)
	m2 := writeCheckpoint(t, st, inner, 2, 2) // prunes checkpoint 1 at once

	bs := &blockingDeletes{Store: inner, deleting: make(chan struct{}, 100), release: make(chan struct{})}
	slow := checkpoint.NewStorage(bs, 1)
	m3 := &checkpoint.Manifest{ID: 3, Files: m2.Files} // shares checkpoint 2's parts
	if err := slow.Write(ctx, m3); err != nil {
		t.Fatal(err)
	}
	pruned := make(chan error, 1)
	go func() { pruned <- slow.Prune(ctx, m3) }() // deletes manifest 2, keeps its parts
	<-bs.deleting
	m4 := &checkpoint.Manifest{ID: 4, Files: m2.Files}
	wrote := make(chan error, 1)
	go func() { wrote <- slow.Write(ctx, m4) }()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Write waited for a running Prune")
	}
	close(bs.release)
	if err := <-pruned; err != nil {
		t.Fatal(err)
	}
	got, _, err := slow.Latest(ctx)
	if err != nil || got == nil || got.ID != 4 {
		t.Fatalf("Latest = %v, %v; want checkpoint 4", got, err)
	}
	for _, f := range m2.Files {
		if _, err := inner.Get(ctx, f); err != nil {
			t.Fatalf("the prune deleted %s, which checkpoint 4 uses: %v", f, err)
		}
	}
}

// stallingDeletes records the Deletes that start and end, in order, and
// holds a Delete of stall until its context is done.
type stallingDeletes struct {
	blob.Store
	stall string
	mu    sync.Mutex
	log   []string // "start name" and "end name"
}

func (s *stallingDeletes) note(ev string) {
	s.mu.Lock()
	s.log = append(s.log, ev)
	s.mu.Unlock()
}

func (s *stallingDeletes) events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

func (s *stallingDeletes) Delete(ctx context.Context, name string) error {
	s.note("start " + name)
	defer s.note("end " + name)
	if name == s.stall {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Store.Delete(ctx, name)
}

// TestPruneDeletesInParallelManifestsFirst: one delete that hangs does not
// hold up the others, every manifest is gone before any file is deleted,
// a cancelled prune says so, and the next prune deletes what it left.
func TestPruneDeletesInParallelManifestsFirst(t *testing.T) {
	inner := newFileStore(t)
	st := checkpoint.NewStorage(inner, 3)
	m1 := writeCheckpoint(t, st, inner, 1, 6)
	writeCheckpoint(t, st, inner, 2, 1)
	writeCheckpoint(t, st, inner, 3, 1)

	sd := &stallingDeletes{Store: inner, stall: m1.Files[2]}
	slow := checkpoint.NewStorage(sd, 1)
	m4 := &checkpoint.Manifest{ID: 4}
	if err := slow.Write(ctx, m4); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(ctx)
	pruned := make(chan error, 1)
	go func() { pruned <- slow.Prune(pctx, m4) }()
	// Everything but the stalled part goes while it hangs.
	want := []string{m1.Files[2], st.ManifestName(4)}
	deadline := time.Now().Add(20 * time.Second)
	for !slices.Equal(names(t, inner), want) {
		if time.Now().After(deadline) {
			t.Fatalf("blobs = %q while one delete hangs, want %q", names(t, inner), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	err := <-pruned
	var pe *checkpoint.PruneError
	if !errors.As(err, &pe) || pe.ID != 4 || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Prune = %v, want a *PruneError wrapping context.Canceled", err)
	}
	// Manifests first: the last manifest delete ended before the first
	// file delete started.
	lastManifestEnd, firstFileStart := -1, -1
	for i, ev := range sd.events() {
		kind, name, _ := strings.Cut(ev, " ")
		isManifest := strings.HasSuffix(name, path.Base(st.ManifestName(1)))
		switch {
		case isManifest && kind == "end":
			lastManifestEnd = i
		case !isManifest && kind == "start" && firstFileStart < 0:
			firstFileStart = i
		}
	}
	if lastManifestEnd < 0 || firstFileStart < 0 || lastManifestEnd > firstFileStart {
		t.Fatalf("deletes %q: want every manifest deleted before any file", sd.events())
	}
	if err := st.Prune(ctx, m4); err != nil {
		t.Fatal(err)
	}
	if got := names(t, inner); !slices.Equal(got, []string{st.ManifestName(4)}) {
		t.Fatalf("blobs after the next prune = %q", got)
	}
}

// TestSavepointSurvivesRetention: a checkpoint marked by Retain keeps its
// manifest and files however many checkpoints follow, including files the
// checkpoints after it share; deleting its marker releases it.
func TestSavepointSurvivesRetention(t *testing.T) {
	bs := newFileStore(t)
	st := checkpoint.NewStorage(bs, 2)
	writeCheckpoint(t, st, bs, 1, 1)
	sp := writeCheckpoint(t, st, bs, 2, 2)
	if err := st.Retain(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for id := uint64(3); id <= 6; id++ {
		writeCheckpoint(t, st, bs, id, 1, st.StateBlobName(2, "agg", 1)) // shares one of 2's parts
	}
	if ids, _ := st.List(ctx); !slices.Equal(ids, []uint64{2, 5, 6}) {
		t.Fatalf("List = %v, want the savepoint 2 and the newest 5, 6", ids)
	}
	got := names(t, bs)
	for _, f := range append(sp.Files, st.ManifestName(2), checkpoint.SavepointName(2)) {
		if !slices.Contains(got, f) {
			t.Errorf("%s of the savepoint was deleted", f)
		}
	}
	if m, err := st.Load(ctx, 2); err != nil || m.ID != 2 {
		t.Fatalf("Load(2) = %v, %v", m, err)
	}
	if ids, err := st.Savepoints(ctx); err != nil || !slices.Equal(ids, []uint64{2}) {
		t.Fatalf("Savepoints = %v, %v", ids, err)
	}
	if err := bs.Delete(ctx, checkpoint.SavepointName(2)); err != nil {
		t.Fatal(err)
	}
	writeCheckpoint(t, st, bs, 7, 1)
	if ids, _ := st.List(ctx); !slices.Equal(ids, []uint64{6, 7}) {
		t.Fatalf("after releasing the savepoint: List = %v, want [6 7]", ids)
	}
}

// TestVoidInFlight: a checkpoint with objects but no manifest when a
// restore chose an older one is made void; its manifest landing late is
// never restored, and a later prune deletes it and its files.
func TestVoidInFlight(t *testing.T) {
	bs := newFileStore(t)
	st := checkpoint.NewStorage(bs, 3)
	writeCheckpoint(t, st, bs, 1, 1)
	// Checkpoint 2 was in flight: its part is written, its manifest not.
	late := checkpoint.NewStorage(bs, 3)
	part := st.StateBlobName(2, "agg", 0)
	if err := bs.Put(ctx, part, []byte("state 2/0")); err != nil {
		t.Fatal(err)
	}
	void, err := st.VoidInFlight(ctx, 1)
	slices.Sort(void)
	// 2 has objects; 3 and 4 are ahead of the newest id seen, where a
	// checkpoint with every write still in flight would be.
	if err != nil || !slices.Equal(void, []uint64{2, 3, 4}) {
		t.Fatalf("VoidInFlight(1) = %v, %v; want [2 3 4]", void, err)
	}
	if next, err := st.NextID(ctx); err != nil || next != 5 {
		t.Fatalf("NextID = %d, %v; want 5, past the void ids", next, err)
	}
	// Again: a writer may have taken 5 since, so the two ids past the
	// newest void one are made void, and nothing else.
	if again, err := st.VoidInFlight(ctx, 1); err != nil || !slices.Equal(again, []uint64{5, 6}) {
		t.Fatalf("VoidInFlight again = %v, %v; want [5 6]", again, err)
	}
	// Its manifest lands late.
	m2 := partManifest(2, part, 9)
	if err := late.Write(ctx, m2); err != nil {
		t.Fatal(err)
	}
	got, skipped, err := st.Latest(ctx)
	if err != nil || got == nil || got.ID != 1 || len(skipped) != 1 || !strings.Contains(skipped[0].Error(), "void") {
		t.Fatalf("Latest = %v, %v, %v; want checkpoint 1, checkpoint 2 skipped as void", got, skipped, err)
	}
	// The next checkpoint's prune retains 3 checkpoints, but not the void
	// one: 2's manifest and part go, 1 stays.
	writeCheckpoint(t, st, bs, 7, 1)
	for _, n := range names(t, bs) {
		if strings.HasPrefix(n, "checkpoints/00000000000000000002/") {
			t.Errorf("%s of the void checkpoint 2 survived the prune", n)
		}
	}
}

// noVoidMarkers fails every Put of a void marker, as a full disk would.
// Over a file store it is a blob.Locker, as the file store is.
type noVoidMarkers struct{ *file.Store }

// noVoidMarkersUnlocked is noVoidMarkers on a store without a lock, as an
// object store is.
type noVoidMarkersUnlocked struct{ blob.Store }

func (s noVoidMarkersUnlocked) Put(ctx context.Context, name string, data []byte) error {
	return failVoid(name, func() error { return s.Store.Put(ctx, name, data) })
}

func (s noVoidMarkers) Put(ctx context.Context, name string, data []byte) error {
	return failVoid(name, func() error { return s.Store.Put(ctx, name, data) })
}

// failVoid fails the Put of a void marker, and runs put for other names.
func failVoid(name string, put func() error) error {
	if strings.HasPrefix(name, "void/") {
		return errors.New("no space left on device")
	}
	return put()
}

// TestVoidInFlightWithoutRoom: where no marker can be written, the
// in-flight checkpoint's objects are deleted instead, so its manifest
// landing late is passed over as one whose files are missing.
func TestVoidInFlightWithoutRoom(t *testing.T) {
	fs := newFileStore(t)
	bs := noVoidMarkers{fs}
	st := checkpoint.NewStorage(bs, 3)
	writeCheckpoint(t, st, bs, 1, 1)
	part := st.StateBlobName(2, "agg", 0)
	if err := bs.Put(ctx, part, []byte("state 2/0")); err != nil {
		t.Fatal(err)
	}
	if void, err := st.VoidInFlight(ctx, 1); err != nil || !slices.Equal(void, []uint64{2}) {
		t.Fatalf("VoidInFlight(1) = %v, %v; want [2]", void, err)
	}
	if _, err := fs.Get(ctx, part); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("the in-flight part after voiding without room: %v, want it deleted", err)
	}
	m2 := partManifest(2, part, 9)
	if err := checkpoint.NewStorage(bs, 3).Write(ctx, m2); err != nil {
		t.Fatal(err)
	}
	if got, _, err := st.Latest(ctx); err != nil || got == nil || got.ID != 1 {
		t.Fatalf("Latest = %v, %v; want checkpoint 1", got, err)
	}
}

// TestVoidAheadFailsLoudlyWithoutALock: on a store without a lock (an
// object store, where a stopped writer's manifest may land late), a void
// marker ahead of the newest checkpoint that cannot be written fails
// VoidInFlight, naming the id, rather than leave a checkpoint a restore
// could later take while its output is aborted.
func TestVoidAheadFailsLoudlyWithoutALock(t *testing.T) {
	fs := newFileStore(t)
	bs := noVoidMarkersUnlocked{fs}
	st := checkpoint.NewStorage(bs, 3)
	writeCheckpoint(t, st, bs, 1, 1)
	_, err := st.VoidInFlight(ctx, 1)
	if err == nil || !strings.Contains(err.Error(), "make checkpoint 2 void (a writer may have taken it") || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("VoidInFlight = %v, want an error naming checkpoint 2 and the cause", err)
	}
}

// TestVoidAheadOfNewest: a checkpoint whose every write was still in
// flight when a restore chose the newest one (nothing of it listed) is void
// too, and the restore's run takes ids past it.
func TestVoidAheadOfNewest(t *testing.T) {
	bs := newFileStore(t)
	st := checkpoint.NewStorage(bs, 3)
	writeCheckpoint(t, st, bs, 1, 1)
	if _, err := st.VoidInFlight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Checkpoint 2's part and manifest land now, from a writer that
	// stopped before either was visible.
	late := checkpoint.NewStorage(bs, 3)
	part := st.StateBlobName(2, "agg", 0)
	if err := bs.Put(ctx, part, []byte("state 2/0")); err != nil {
		t.Fatal(err)
	}
	m2 := partManifest(2, part, 9)
	if err := late.Write(ctx, m2); err != nil {
		t.Fatal(err)
	}
	got, _, err := st.Latest(ctx)
	if err != nil || got == nil || got.ID != 1 {
		t.Fatalf("Latest = %v, %v; want checkpoint 1, the late 2 void", got, err)
	}
	if next, err := st.NextID(ctx); err != nil || next != 4 {
		t.Fatalf("NextID = %d, %v; want 4", next, err)
	}
}

// TestVoidAheadOfVoidIDs: the ids ahead of the newest are counted from
// void markers too. A run restored with void ids above every object takes
// its ids past them (NextID); when every write of its first checkpoint
// trails its stop, nothing of that id is listed, and the next restore
// must still make it void. (The changelog crash test on S3 lost committed
// output this way: such a manifest landed after the next run had aborted
// its pending output, and the run after restored it.)
func TestVoidAheadOfVoidIDs(t *testing.T) {
	bs := newFileStore(t)
	st := checkpoint.NewStorage(bs, 3)
	writeCheckpoint(t, st, bs, 1, 1)
	// A first writer restored 1 and stopped with nothing listed: 2 and 3
	// are void, its successor takes 4.
	if void, err := st.VoidInFlight(ctx, 1); err != nil || !slices.Equal(void, []uint64{2, 3}) {
		t.Fatalf("VoidInFlight(1) = %v, %v; want [2 3]", void, err)
	}
	next, err := st.NextID(ctx)
	if err != nil || next != 4 {
		t.Fatalf("NextID = %d, %v; want 4", next, err)
	}
	// That successor stops too, every write of checkpoint 4 in flight.
	void, err := st.VoidInFlight(ctx, 1)
	if err != nil || !slices.Equal(void, []uint64{4, 5}) {
		t.Fatalf("VoidInFlight(1) after a stop at 4 = %v, %v; want [4 5]", void, err)
	}
	// Checkpoint 4's part and manifest land now.
	part := st.StateBlobName(4, "agg", 0)
	if err := bs.Put(ctx, part, []byte("state 4/0")); err != nil {
		t.Fatal(err)
	}
	m4 := partManifest(4, part, 9)
	if err := checkpoint.NewStorage(bs, 3).Write(ctx, m4); err != nil {
		t.Fatal(err)
	}
	if got, _, err := st.Latest(ctx); err != nil || got == nil || got.ID != 1 {
		t.Fatalf("Latest = %v, %v; want checkpoint 1, the late 4 void", got, err)
	}
}

// TestReservedIDsAreVoid: a writer reserves its ids before it uses them;
// a restore makes every reserved id void, so a checkpoint several ids
// past anything listed (checkpoints that failed without objects before
// it) is void too when its manifest lands late.
func TestReservedIDsAreVoid(t *testing.T) {
	var c blob.Counter
	fs := newFileStore(t)
	bs := blob.Count(fs, &c)
	st := checkpoint.NewStorage(bs, 3)
	m1 := writeCheckpoint(t, st, bs, 1, 1)
	last, err := st.Reserve(ctx, 2)
	if err != nil || last != 1+checkpoint.ReserveBlock {
		t.Fatalf("Reserve(2) = %d, %v; want %d", last, err, 1+checkpoint.ReserveBlock)
	}
	last, err = st.Reserve(ctx, last+1)
	if err != nil || last != 1+2*checkpoint.ReserveBlock {
		t.Fatalf("Reserve again = %d, %v; want %d", last, err, 1+2*checkpoint.ReserveBlock)
	}
	reservations := func() (r []string) {
		for _, n := range names(t, fs) {
			if strings.HasPrefix(n, "reserved/") {
				r = append(r, n)
			}
		}
		return r
	}
	if r := reservations(); len(r) != 2 {
		t.Errorf("reservation markers %v, want both (a reservation deletes nothing)", r)
	}
	// A prune deletes the older one in the background of the run.
	if err := st.Prune(ctx, m1); err != nil {
		t.Fatal(err)
	}
	if r := reservations(); len(r) != 1 || !strings.HasSuffix(r[0], fmt.Sprintf("%020d", last)) {
		t.Errorf("reservation markers after a prune %v, want only the newest", r)
	}
	puts := c.Requests().Put
	void, err := st.VoidInFlight(ctx, 1)
	if err != nil || len(void) != int(last)+checkpoint.VoidAhead-1 || void[0] != 2 || void[len(void)-1] != last+checkpoint.VoidAhead {
		t.Fatalf("VoidInFlight(1) = %v, %v; want 2..%d", void, err, last+checkpoint.VoidAhead)
	}
	if n := c.Requests().Put - puts; n != 1 {
		t.Errorf("VoidInFlight made %d PUTs, want 1 (one marker for the range)", n)
	}
	if r := reservations(); len(r) != 0 {
		t.Errorf("reservation markers %v left after VoidInFlight covered them", r)
	}
	if next, err := st.NextID(ctx); err != nil || next != last+checkpoint.VoidAhead+1 {
		t.Fatalf("NextID = %d, %v; want %d", next, err, last+checkpoint.VoidAhead+1)
	}
	// The writer's checkpoint 100 lands late, part and manifest.
	part := st.StateBlobName(100, "agg", 0)
	if err := bs.Put(ctx, part, []byte("state 100/0")); err != nil {
		t.Fatal(err)
	}
	m := partManifest(100, part, 11)
	if err := checkpoint.NewStorage(bs, 3).Write(ctx, m); err != nil {
		t.Fatal(err)
	}
	got, skipped, err := st.Latest(ctx)
	if err != nil || got == nil || got.ID != 1 || len(skipped) != 1 || !strings.Contains(skipped[0].Error(), "void") {
		t.Fatalf("Latest = %v, %v, %v; want checkpoint 1, the late 100 skipped as void", got, skipped, err)
	}
	// The next checkpoint's prune deletes the void checkpoint's objects.
	writeCheckpoint(t, st, bs, 200, 1)
	for _, n := range names(t, fs) {
		if strings.HasPrefix(n, "checkpoints/00000000000000000100/") {
			t.Errorf("%s of the void checkpoint 100 survived the prune", n)
		}
	}
}

// TestVoidNearNewestWithoutObjects: an id just below the newest with no
// objects and no manifest (a checkpoint with nothing to upload, whose
// manifest write trails the next checkpoint's parts) is void too.
func TestVoidNearNewestWithoutObjects(t *testing.T) {
	bs := newFileStore(t)
	st := checkpoint.NewStorage(bs, 3)
	writeCheckpoint(t, st, bs, 1, 1)
	if err := bs.Put(ctx, st.StateBlobName(3, "agg", 0), []byte("state 3/0")); err != nil {
		t.Fatal(err)
	}
	void, err := st.VoidInFlight(ctx, 1)
	slices.Sort(void)
	if err != nil || !slices.Equal(void, []uint64{2, 3, 4, 5}) {
		t.Fatalf("VoidInFlight(1) = %v, %v; want [2 3 4 5]", void, err)
	}
}

// partManifest is the manifest of checkpoint id whose one operator has
// the one part part of size bytes.
func partManifest(id uint64, part string, size int64) *checkpoint.Manifest {
	return &checkpoint.Manifest{ID: id, Job: "job", CreatedAt: int64(id) * 1e9, Files: []string{part},
		Operators: []checkpoint.OperatorState{{Name: "agg", MaxParallelism: 128, Parallelism: 1,
			Parts: []checkpoint.StatePart{{KeyGroupEnd: 128, Blob: part, Size: size}}}}}
}

// TestPruneListsTheStoreOnce: a prune takes the checkpoints and the void,
// savepoint and quarantine markers from one listing (a LIST is a billed
// request on an object store) and still honours all three: a savepoint
// and a quarantined checkpoint keep their objects, a void one is deleted.
func TestPruneListsTheStoreOnce(t *testing.T) {
	var c blob.Counter
	fs := newFileStore(t)
	bs := blob.Count(fs, &c)
	st := checkpoint.NewStorage(bs, 1)
	sp := writeCheckpoint(t, st, bs, 1, 1)
	if err := st.Retain(ctx, 1); err != nil {
		t.Fatal(err)
	}
	q := writeCheckpoint(t, st, bs, 2, 1)
	if err := st.Quarantine(ctx, 2, "test"); err != nil {
		t.Fatal(err)
	}
	// A checkpoint in flight when its writer stopped: made void.
	inflight := st.StateBlobName(3, "agg", 0)
	if err := bs.Put(ctx, inflight, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.VoidInFlight(ctx, 2); err != nil {
		t.Fatal(err)
	}
	m := writeCheckpoint(t, st, bs, 4, 1)
	before := c.Requests()
	if err := st.Prune(ctx, m); err != nil {
		t.Fatal(err)
	}
	if n := c.Requests().Sub(before).List; n != 1 {
		t.Errorf("prune made %d LISTs, want 1", n)
	}
	got := names(t, fs)
	for _, f := range append(append(sp.Files, q.Files...), st.ManifestName(1), st.ManifestName(2)) {
		if !slices.Contains(got, f) {
			t.Errorf("%s of a savepoint or a quarantined checkpoint was deleted", f)
		}
	}
	if slices.Contains(got, inflight) {
		t.Errorf("the void checkpoint's %s was kept", inflight)
	}
}
