package eddy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
)

// mountTmpfs mounts a tmpfs of size bytes at dir, or skips the test where
// it cannot (not root, no mount permission): TestCheckpointsFailingForever
// covers the same with an injected ENOSPC.
func mountTmpfs(t *testing.T, dir string, size string, flags uintptr) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v); the injected-ENOSPC test covers a full disk", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// TestCheckpointsOnFullTmpfs: checkpoints to a real file system that is
// full (a 64 KiB tmpfs, smaller than one checkpoint of 20,000 drivers)
// fail with ENOSPC naming the file once the state outgrows it, the job
// stops after the tolerated failures with that cause, no pending output is
// left, and once there is room again the same job resumes from its last good
// checkpoint and runs to the end with every record committed once.
func TestCheckpointsOnFullTmpfs(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, data, "64k", 0)
	out := filepath.Join(dir, "out")
	const events = 40_000
	build := func(rate float64) *eddy.Env {
		env := eddy.New(eddy.Checkpoints(data, 10*time.Millisecond), eddy.Parallelism(2), eddy.Restarts(0, 0),
			eddy.TolerableCheckpointFailures(2), eddy.LogOutput(&logBuf{}))
		src := eddy.FromSource(env, datagen.GPS(datagen.Events(events), datagen.Drivers(20_000), datagen.Rate(rate)))
		ks := eddy.KeyBy(src, func(p *datagen.GPSPoint) string { return p.DriverID })
		eddy.ToSink(eddy.Reduce(ks, func(a, b datagen.GPSPoint) datagen.GPSPoint { return b }), file.JSONLines[datagen.GPSPoint](out))
		return env
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := build(20_000).Run(ctx)
	if !errors.Is(err, eddy.ErrStorage) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), data) ||
		!strings.Contains(err.Error(), "checkpoints in a row failed") {
		t.Fatalf("Run on a full disk = %v", err)
	}
	if pending, _ := filepath.Glob(filepath.Join(out, ".*")); len(pending) != 0 {
		t.Fatalf("pending files left: %v", pending)
	}
	before := len(readLines(t, out)) // committed by the checkpoints that fit while the state was small
	// Room again: the job resumes from its last good checkpoint (or
	// starts over if none fit) and commits each record once.
	if err := syscall.Mount("tmpfs", data, "tmpfs", syscall.MS_REMOUNT, "size=64m"); err != nil {
		t.Fatal(err)
	}
	env := build(0)
	if err := env.Run(ctx); err != nil {
		t.Fatalf("Run with room: %v", err)
	}
	if before > 0 && env.Stats().RestoredFrom == 0 {
		t.Fatalf("%d lines were committed, but the second run did not restore a checkpoint", before)
	}
	t.Logf("committed before the disk filled: %d lines; restored from checkpoint %d", before, env.Stats().RestoredFrom)
	lines := readLines(t, out)
	seen := make(map[string]bool, len(lines))
	for _, l := range lines {
		if seen[l] {
			t.Fatalf("line committed twice: %s", l)
		}
		seen[l] = true
	}
	if len(lines) != events {
		t.Fatalf("%d lines committed, want %d", len(lines), events)
	}
}

// TestReadOnlyCheckpointDirectory: a checkpoint directory on a read-only
// file system fails the job at start with EROFS naming the directory, as a
// storage error and not as "context canceled".
func TestReadOnlyCheckpointDirectory(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, data, "1m", syscall.MS_RDONLY)
	env := eddy.New(eddy.Checkpoints(data, 10*time.Millisecond), eddy.Parallelism(2), eddy.Restarts(0, 0), eddy.LogOutput(&logBuf{}))
	src := eddy.FromSource(env, datagen.GPS(datagen.Events(1000)))
	eddy.ToSink(src, file.JSONLines[datagen.GPSPoint](filepath.Join(dir, "out")))
	err := env.Run(context.Background())
	if !errors.Is(err, eddy.ErrStorage) || !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), data) ||
		strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("Run with a read-only checkpoint directory = %v", err)
	}
	t.Log(err)
}

// fillFS writes a file under dir that takes all of its file system's free
// space, and returns its path.
func fillFS(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	return path
}

// TestPebbleDiskFull fills the file system of a running Pebble job's
// databases: the job fails naming the state directory and that the disk
// is full, its committed output holds nothing it will repeat, and once
// there is room again it resumes from its last checkpoint to the
// uninterrupted run's output.
func TestPebbleDiskFull(t *testing.T) {
	want := probeReference(t)
	dir := t.TempDir()
	j := probeJob{data: filepath.Join(dir, "data"), out: filepath.Join(dir, "out"), pebbleDir: filepath.Join(dir, "pebble"), par: 2,
		gate: 30_000, blocked: new(atomic.Int64), lift: new(atomic.Bool)}
	if err := os.MkdirAll(j.pebbleDir, 0o755); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, j.pebbleDir, "32m", 0)
	splits := int64(datagen.GPS().Splits())
	n := 0
	var filler string
	logs := &logBuf{}
	env := j.env(eddy.LogOutput(logs), eddy.OnCheckpoint(func(eddy.CheckpointStats) {
		if j.lift.Load() || j.blocked.Load() < splits {
			return
		}
		if n++; n < 2 {
			return
		}
		// No room left for the next flush; then the records flow again.
		filler = fillFS(t, j.pebbleDir)
		j.lift.Store(true)
	}))
	err := env.Run(context.Background())
	if err == nil {
		t.Fatal("the job finished on a full disk")
	}
	if !strings.Contains(err.Error(), j.pebbleDir) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("Run = %v: does not name the state directory (%s) and the full disk", err, j.pebbleDir)
	}
	t.Logf("Run = %v", err)
	if got := readLines(t, j.out); len(got) >= len(want) {
		t.Fatalf("%d lines committed before the failure, want fewer than the %d of the whole run", len(got), len(want))
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	j.gate = 0
	if !j.runUntil(t, 0) {
		t.Fatal("the resumed run did not finish")
	}
	sameOutput(t, readLines(t, j.out), want)
	fds, _ := filepath.Glob("/proc/self/fd/*")
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, j.pebbleDir) {
			t.Errorf("open after the runs: %s", l)
		}
	}
}
