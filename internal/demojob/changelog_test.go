package demojob

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
)

// TestChangelogStopResumeRescale runs the demo with the changelog state
// backend, stopping it after a few checkpoints and resuming with another
// parallelism several times (so restores read materialized parts plus log
// ranges, and rescale them), then demands the reference output.
func TestChangelogStopResumeRescale(t *testing.T) {
	dir := t.TempDir()
	c := Config{Seed: 9, Events: 60_000, Drivers: 200, Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out"),
		CheckpointInterval: 10 * time.Millisecond, LateEvery: 41, EmitEvery: 5, Rate: 60_000,
		Changelog: true, Materialize: 80 * time.Millisecond}
	restored, materialized := 0, int64(0)
	for i, par := range []int{2, 3, 1, 2, 3} {
		c.Parallelism = par
		ctx, cancel := context.WithCancel(context.Background())
		seen := 0
		env := Env(c, eddy.Logger(testWriter{t}), eddy.OnCheckpoint(func(eddy.CheckpointStats) {
			seen++
			if seen == 5+i {
				cancel()
			}
		}))
		err := env.Run(ctx)
		cancel()
		st := env.Stats()
		materialized += st.Materializations
		if st.RestoredFrom != 0 {
			restored++
		}
		if err == nil {
			break
		}
	}
	c.Parallelism = 2
	env := Env(c, eddy.Logger(testWriter{t}))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if restored < 1 || materialized == 0 {
		t.Fatalf("restored %d times, %d materializations: the test did not exercise the changelog", restored, materialized)
	}
	sameLines(t, committed(t, c.Out), expected(c))

	// The final checkpoint is a materialization plus log ranges.
	store, err := blob.Open(c.Data)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := checkpoint.NewStorage(store, 3).Latest(context.Background())
	if err != nil || m == nil {
		t.Fatalf("latest checkpoint: %v", err)
	}
	logs, parts := 0, 0
	for _, op := range m.Operators {
		logs += len(op.Changelog)
		parts += len(op.Parts)
	}
	if logs == 0 {
		t.Fatalf("checkpoint %d has no log ranges (%d parts): the changelog was not used", m.ID, parts)
	}
}
