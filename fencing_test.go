package eddy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/faulty"
	blobfile "github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
)

// claimedStore is a store that creates conditionally but cannot be locked,
// as an object store: a job on it claims it. Before the job's first
// manifest write of checkpoint 2 or later, a "fenced writer" creates that
// manifest first.
type claimedStore struct {
	blob.Store
	c      blob.Creator
	mu     sync.Mutex
	zombie string // the manifest the fenced writer created
}

func (s *claimedStore) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	s.mu.Lock()
	if s.zombie == "" && strings.HasSuffix(name, "/MANIFEST") && !strings.Contains(name, "/00000000000000000001/") {
		s.zombie = name
		if err := s.c.PutIfAbsent(ctx, name, []byte("a fenced writer's manifest")); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	s.mu.Unlock()
	return s.c.PutIfAbsent(ctx, name, data)
}

// TestFencedWritersManifest: a checkpoint id whose manifest a fenced
// writer created first fails (it is not this job's), is quarantined so no
// fallback restores it, and the job goes on to the next id and commits
// every record once.
func TestFencedWritersManifest(t *testing.T) {
	dir := t.TempDir()
	fs, err := blobfile.New(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	store := &claimedStore{Store: fs, c: fs}
	const events = 30_000
	env := eddy.New(eddy.CheckpointStore(store, 10*time.Millisecond), eddy.Parallelism(2), eddy.Restarts(0, 0), eddy.LogOutput(&logBuf{}))
	src := eddy.FromSource(env, datagen.GPS(datagen.Events(events), datagen.Rate(100_000)))
	eddy.ToSink(src, file.JSONLines[datagen.GPSPoint](filepath.Join(dir, "out")))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if store.zombie == "" {
		t.Fatal("the job wrote no manifest after its first")
	}
	id := strings.TrimSuffix(strings.TrimPrefix(store.zombie, "checkpoints/"), "/MANIFEST")
	if _, err := fs.Get(context.Background(), "quarantine/"+id); err != nil {
		t.Fatalf("checkpoint %s, taken by a fenced writer, is not quarantined: %v", id, err)
	}
	if n := countLines(t, filepath.Join(dir, "out")); n != events {
		t.Fatalf("committed %d lines, want %d", n, events)
	}
	if names, _ := fs.List(context.Background(), blob.ClaimsDir); len(names) != 1 {
		t.Fatalf("claims %q, want the job's one", names)
	}
}

func countLines(t *testing.T, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "part-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += bytes.Count(data, []byte{'\n'})
	}
	return n
}

// plainStore hides every optional interface of the store it wraps.
type plainStore struct{ blob.Store }

// TestCreatorWrapperOverPlainStore: a wrapper that is a blob.Creator over
// a store that is none (blob/faulty over a store without conditional
// writes) neither claims the store nor fails its manifests: the job
// writes them as the inner store allows and completes.
func TestCreatorWrapperOverPlainStore(t *testing.T) {
	dir := t.TempDir()
	fs, err := blobfile.New(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	store := faulty.New(plainStore{fs}, faulty.Options{})
	const events = 5_000
	env := eddy.New(eddy.CheckpointStore(store, 10*time.Millisecond), eddy.Parallelism(2), eddy.Restarts(0, 0), eddy.LogOutput(&logBuf{}))
	src := eddy.FromSource(env, datagen.GPS(datagen.Events(events), datagen.Rate(50_000)))
	eddy.ToSink(src, file.JSONLines[datagen.GPSPoint](filepath.Join(dir, "out")))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := countLines(t, filepath.Join(dir, "out")); n != events {
		t.Fatalf("committed %d lines, want %d", n, events)
	}
	if names, _ := fs.List(context.Background(), "checkpoints/"); len(names) == 0 {
		t.Fatal("no checkpoint written")
	}
}

// TestRestoreCheckpoint: a finished job run again with RestoreCheckpoint
// of an early checkpoint rolls back what later checkpoints committed,
// quarantines them, produces it again from the early one, and ends with
// every record committed once; an id that is no complete checkpoint fails
// Run naming it.
func TestRestoreCheckpoint(t *testing.T) {
	dir := t.TempDir()
	data, out := filepath.Join(dir, "data"), filepath.Join(dir, "out")
	const events = 30_000
	job := func(opts ...eddy.Option) *eddy.Env {
		env := eddy.New(append([]eddy.Option{eddy.Checkpoints(data, 10*time.Millisecond), eddy.RetainCheckpoints(1000), eddy.Parallelism(2),
			eddy.Restarts(0, 0), eddy.LogOutput(&logBuf{})}, opts...)...)
		src := eddy.FromSource(env, datagen.GPS(datagen.Events(events), datagen.Rate(60_000)))
		eddy.ToSink(src, file.JSONLines[datagen.GPSPoint](out))
		return env
	}
	if err := job().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	fs, err := blobfile.New(data)
	if err != nil {
		t.Fatal(err)
	}
	ids := manifestIDs(t, fs)
	if len(ids) < 4 {
		t.Fatalf("only %d checkpoints: %v", len(ids), ids)
	}
	early := ids[len(ids)/3]
	if err := job(eddy.RestoreCheckpoint(early)).Run(context.Background()); err != nil {
		t.Fatalf("restoring checkpoint %d: %v", early, err)
	}
	if n := countLines(t, out); n != events {
		t.Fatalf("after restoring checkpoint %d: %d lines committed, want %d", early, n, events)
	}
	for _, id := range ids {
		_, qerr := fs.Get(context.Background(), fmt.Sprintf("quarantine/%020d", id))
		if quarantined := qerr == nil; quarantined != (id > early) {
			t.Errorf("checkpoint %d (restored %d) quarantined: %v", id, early, quarantined)
		}
	}
	err = job(eddy.RestoreCheckpoint(999_999)).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "restore checkpoint 999999: no such complete checkpoint") {
		t.Fatalf("restoring a checkpoint that does not exist: %v", err)
	}
}

// manifestIDs lists the complete checkpoints of a store.
func manifestIDs(t *testing.T, s blob.Store) []uint64 {
	t.Helper()
	names, err := s.List(context.Background(), "checkpoints/")
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, n := range names {
		var id uint64
		if _, err := fmt.Sscanf(n, "checkpoints/%020d/MANIFEST", &id); err == nil && strings.HasSuffix(n, "/MANIFEST") {
			ids = append(ids, id)
		}
	}
	return ids
}
