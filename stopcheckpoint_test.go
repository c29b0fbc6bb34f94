package eddy_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
)

// TestStopWithCheckpoint: StopWithCheckpoint takes a checkpoint, stops the
// job (Run returns nil) and does not keep the checkpoint as a savepoint;
// a later run resumes from it, and the output of both runs is every point
// exactly once.
func TestStopWithCheckpoint(t *testing.T) {
	dir := t.TempDir()
	data, out := filepath.Join(dir, "data"), filepath.Join(dir, "out")
	const events = 60_000
	job := func() (*eddy.Env, *eddy.Stream[datagen.GPSPoint]) {
		env := eddy.New(eddy.Parallelism(2), eddy.Checkpoints(data, time.Hour), eddy.LogOutput(&logBuf{}), eddy.Restarts(0, 0))
		pts := eddy.FromSource(env, datagen.GPS(datagen.Seed(4), datagen.Events(events), datagen.Drivers(30), datagen.Rate(60_000)))
		eddy.ToSink(pts, file.JSONLines[datagen.GPSPoint](out))
		return env, pts
	}
	env, _ := job()
	done := make(chan error, 1)
	go func() { done <- env.Run(context.Background()) }()
	for env.Stats().RecordsIn < events/4 {
		select {
		case err := <-done:
			t.Fatalf("the job ended before it was stopped: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := env.StopWithCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after StopWithCheckpoint: %v", err)
	}
	if n := env.Stats().RecordsIn; n >= events {
		t.Fatalf("the stopped run read all %d events: nothing left to resume", n)
	}
	bs, err := blob.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	st := checkpoint.NewStorage(bs, 3)
	ids, err := st.List(ctx)
	if err != nil || !slices.Contains(ids, id) {
		t.Fatalf("checkpoints %v (%v): the stop's checkpoint %d is not there", ids, err, id)
	}
	if sps, err := st.Savepoints(ctx); err != nil || len(sps) != 0 {
		t.Fatalf("savepoints %v (%v): the stop's checkpoint was kept as one", sps, err)
	}

	env, _ = job()
	if err := env.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := env.Stats().RestoredFrom; got != id {
		t.Fatalf("the second run restored checkpoint %d, want the stop's %d", got, id)
	}
	lines := readLines(t, out)
	if len(lines) != events {
		t.Fatalf("%d lines after the stop and the resume, want %d", len(lines), events)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l] {
			t.Fatalf("line written twice: %s", l)
		}
		seen[l] = true
	}
}
