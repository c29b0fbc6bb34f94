package eddy_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/discard"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/state"
)

// failFn fails on its n-th record with err.
type failFn struct {
	n   int
	err error
	c   *state.Value[int64]
}

func (f *failFn) Open(ctx *eddy.OpenContext) error {
	var err error
	f.c, err = state.NewValue[int64](ctx.State, "c")
	return err
}

func (f *failFn) Process(ctx *eddy.Context[string, int64], p *datagen.GPSPoint) error {
	if f.n--; f.n == 0 {
		return f.err
	}
	return nil
}

// TestErrorKinds: what a job's failure was can be told with errors.Is, and
// the message starts from its cause; a permanent error is not retried.
func TestErrorKinds(t *testing.T) {
	run := func(t *testing.T, fnErr error, restarts int) (error, *logBuf) {
		dir := t.TempDir()
		logs := &logBuf{}
		env := eddy.New(eddy.Checkpoints(filepath.Join(dir, "data"), 10*time.Millisecond), eddy.Parallelism(1),
			eddy.Restarts(restarts, time.Millisecond), eddy.LogOutput(logs))
		ks := eddy.KeyBy(eddy.FromSource(env, datagen.GPS(datagen.Events(1000))), func(p *datagen.GPSPoint) string { return p.DriverID })
		eddy.ToSink(eddy.Process[string, datagen.GPSPoint, int64](ks, &failFn{n: 500, err: fnErr}, eddy.Named("f")), file.JSONLines[int64](filepath.Join(dir, "out")))
		return env.Run(context.Background()), logs
	}
	cause := errors.New("bad record")
	t.Run("user function", func(t *testing.T) {
		err, logs := run(t, cause, 2)
		if !errors.Is(err, eddy.ErrUserFunction) || !errors.Is(err, cause) || errors.Is(err, eddy.ErrPermanent) {
			t.Fatalf("Run = %v", err)
		}
		if !strings.Contains(err.Error(), "f subtask 0 Process: bad record") {
			t.Fatalf("message %q", err)
		}
		if n := strings.Count(logs.String(), "job failed (attempt"); n != 2 {
			t.Fatalf("%d restarts logged, want 2:\n%s", n, logs)
		}
	})
	t.Run("permanent", func(t *testing.T) {
		err, logs := run(t, eddy.Permanent(fmt.Errorf("line 3: %w", cause)), 2)
		if !errors.Is(err, eddy.ErrUserFunction) || !errors.Is(err, eddy.ErrPermanent) || !errors.Is(err, cause) {
			t.Fatalf("Run = %v", err)
		}
		if strings.Contains(logs.String(), "job failed (attempt") {
			t.Fatalf("a permanent error was retried:\n%s", logs)
		}
	})
	t.Run("storage", func(t *testing.T) {
		// The checkpoint directory is below a regular file: every write
		// fails with ENOTDIR, also for root.
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		env := eddy.New(eddy.Checkpoints(filepath.Join(dir, "file", "data"), 10*time.Millisecond), eddy.Parallelism(1), eddy.Restarts(0, 0), eddy.LogOutput(&logBuf{}))
		eddy.ToSink(eddy.FromSource(env, datagen.GPS(datagen.Events(100))), file.JSONLines[datagen.GPSPoint](filepath.Join(dir, "out")))
		err := env.Run(context.Background())
		if !errors.Is(err, eddy.ErrStorage) || !errors.Is(err, syscall.ENOTDIR) || !strings.Contains(err.Error(), filepath.Join(dir, "file")) {
			t.Fatalf("Run = %v", err)
		}
	})
}

// fullDisk fails every state upload as a full disk does.
type fullDisk struct{ blob.Store }

func (s fullDisk) Put(ctx context.Context, name string, data []byte) error {
	if strings.HasSuffix(name, ".state") {
		return &fs.PathError{Op: "write", Path: "/data/" + name, Err: syscall.ENOSPC}
	}
	return s.Store.Put(ctx, name, data)
}

// TestCheckpointsFailingForever: with every checkpoint failing (a full
// disk), the job fails once more than the tolerated number have failed in
// a row, with the cause, instead of running on.
func TestCheckpointsFailingForever(t *testing.T) {
	dir := t.TempDir()
	inner, err := blob.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuf{}
	env := eddy.New(eddy.CheckpointStore(fullDisk{inner}, 10*time.Millisecond), eddy.Parallelism(1), eddy.Restarts(0, 0),
		eddy.TolerableCheckpointFailures(2), eddy.LogOutput(logs))
	ks := eddy.KeyBy(eddy.FromSource(env, datagen.GPS(datagen.Events(1<<40), datagen.Rate(10_000))), func(p *datagen.GPSPoint) string { return p.DriverID })
	eddy.ToSink(eddy.Reduce(ks, func(a, b datagen.GPSPoint) datagen.GPSPoint { return b }), file.JSONLines[datagen.GPSPoint](filepath.Join(dir, "out")))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = env.Run(ctx)
	if !errors.Is(err, eddy.ErrStorage) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "3 checkpoints in a row failed (2 tolerated)") {
		t.Fatalf("Run = %v", err)
	}
	if n := strings.Count(logs.String(), "checkpoint failed"); n != 3 {
		t.Fatalf("%d failed checkpoints logged, want 3:\n%s", n, logs)
	}
	// The failed checkpoints' pending output is gone.
	if pending, _ := filepath.Glob(filepath.Join(dir, "out", ".*")); len(pending) != 0 {
		t.Fatalf("pending files left: %v", pending)
	}
}

// readOnly fails every write as a read-only file system does.
type readOnly struct{ blob.Store }

func (s readOnly) Put(ctx context.Context, name string, data []byte) error {
	return &fs.PathError{Op: "open", Path: "/data/" + name, Err: syscall.EROFS}
}

// TestReadOnlyStorage: a checkpoint store that refuses writes fails the job
// with that cause (EROFS, ErrStorage), not "context canceled".
func TestReadOnlyStorage(t *testing.T) {
	dir := t.TempDir()
	inner, err := blob.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	env := eddy.New(eddy.CheckpointStore(readOnly{inner}, 10*time.Millisecond), eddy.Parallelism(2), eddy.Restarts(0, 0),
		eddy.TolerableCheckpointFailures(0), eddy.LogOutput(&logBuf{}))
	ks := eddy.KeyBy(eddy.FromSource(env, datagen.GPS(datagen.Events(1<<40), datagen.Rate(10_000))), func(p *datagen.GPSPoint) string { return p.DriverID })
	eddy.ToSink(eddy.Reduce(ks, func(a, b datagen.GPSPoint) datagen.GPSPoint { return b }), discard.Sink[datagen.GPSPoint]())
	err = env.Run(context.Background())
	if !errors.Is(err, eddy.ErrStorage) || !errors.Is(err, syscall.EROFS) || errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("Run = %v", err)
	}
}

// TestLostLockStops: a job whose storage lock is removed while it runs
// (another process could now take the storage) stops before its next
// manifest, with ErrFenced, instead of committing.
func TestLostLockStops(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	var once sync.Once
	env := eddy.New(eddy.Checkpoints(data, 10*time.Millisecond), eddy.Parallelism(1), eddy.Restarts(3, time.Millisecond), eddy.LogOutput(&logBuf{}),
		eddy.OnCheckpoint(func(eddy.CheckpointStats) {
			once.Do(func() {
				if err := os.Remove(filepath.Join(data, ".lock")); err != nil {
					t.Error(err)
				}
			})
		}))
	eddy.ToSink(eddy.FromSource(env, datagen.GPS(datagen.Events(1<<40), datagen.Rate(10_000))), discard.Sink[datagen.GPSPoint]())
	err := env.Run(context.Background())
	if !errors.Is(err, eddy.ErrFenced) || !errors.Is(err, eddy.ErrPermanent) || !strings.Contains(err.Error(), "was removed or replaced") {
		t.Fatalf("Run = %v", err)
	}
	if st := env.Stats(); st.Checkpoints != 1 || st.Restarts != 0 {
		t.Fatalf("%d checkpoints, %d restarts after losing the lock", st.Checkpoints, st.Restarts)
	}
}
