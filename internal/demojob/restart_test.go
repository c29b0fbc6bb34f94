package demojob

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
)

var errInjected = errors.New("injected failure")

// The failure failOnceFn injects: on the failAt-th record processed (over all
// subtasks and attempts), or the first after it once a checkpoint has
// completed if the test waits for one (so that a loaded machine, slow to
// complete the first checkpoint, does not fail first), once per test.
var (
	failAt         atomic.Int64
	processed      atomic.Int64
	failed         atomic.Bool
	needCheckpoint atomic.Bool
	checkpointed   atomic.Bool
)

func resetFailure(at int64, afterCheckpoint bool) {
	failAt.Store(at)
	processed.Store(0)
	failed.Store(false)
	needCheckpoint.Store(afterCheckpoint)
	checkpointed.Store(false)
}

// noteCheckpoint is the OnCheckpoint option that lets failOnceFn fail.
func noteCheckpoint() eddy.Option {
	return eddy.OnCheckpoint(func(eddy.CheckpointStats) { checkpointed.Store(true) })
}

// failOnceFn is the demo's distanceFn, failing once.
type failOnceFn struct {
	distanceFn
}

func (f *failOnceFn) Process(ctx *eddy.Context[string, DriverTotal], p *datagen.GPSPoint) error {
	if n := processed.Add(1); n >= failAt.Load() && (!needCheckpoint.Load() || checkpointed.Load()) && failed.CompareAndSwap(false, true) {
		return fmt.Errorf("record %d of %s: %w", n, p.DriverID, errInjected)
	}
	return f.distanceFn.Process(ctx, p)
}

// failingEnv is the demo job with failOnceFn in place of distanceFn.
func failingEnv(c Config, opts ...eddy.Option) *eddy.Env {
	base := []eddy.Option{eddy.JobName("fail-once"), eddy.Parallelism(c.Parallelism)}
	if c.Data != "" {
		base = append(base, eddy.Checkpoints(c.Data, c.CheckpointInterval))
	}
	env := eddy.New(append(base, opts...)...)
	points := eddy.FromSource(env, datagen.GPS(c.GPSOptions()...), eddy.Named("gps"))
	byDriver := eddy.KeyBy(points, func(p *datagen.GPSPoint) string { return p.DriverID })
	totals := eddy.Process[string, datagen.GPSPoint, DriverTotal](byDriver, &failOnceFn{}, eddy.Named("distance"))
	eddy.ToSink(totals, file.JSONLines[DriverTotal](c.Out))
	return env
}

// noRepeats checks that got (sorted) holds only reference lines, each once.
func noRepeats(t *testing.T, got, want []string) {
	t.Helper()
	ref := make(map[string]bool, len(want))
	for _, l := range want {
		ref[l] = true
	}
	for i, l := range got {
		if !ref[l] {
			t.Fatalf("committed line not in the reference: %s", l)
		}
		if i > 0 && got[i-1] == l {
			t.Fatalf("line committed twice: %s", l)
		}
	}
}

// TestKeyedFunctionFailureRestarts makes the keyed function fail once, in the
// middle of the job: the restart strategy restarts the job from its last
// checkpoint (or from the beginning without checkpoints) and the output is
// still exactly the reference. Without restarts the error is Run's, and the
// next Run resumes from the checkpoint.
func TestKeyedFunctionFailureRestarts(t *testing.T) {
	base := Config{Seed: 9, Events: 40_000, Drivers: 200, Parallelism: 2, Rate: 80_000} // about 0.5 s
	want := onlyTotals(expected(base))
	const at = 20_000

	for _, withCheckpoints := range []bool{true, false} {
		t.Run(fmt.Sprintf("restarts/checkpoints=%v", withCheckpoints), func(t *testing.T) {
			dir := t.TempDir()
			c := base
			c.Out = filepath.Join(dir, "out")
			if withCheckpoints {
				c.Data, c.CheckpointInterval = filepath.Join(dir, "data"), 10*time.Millisecond
			}
			resetFailure(at, withCheckpoints)
			logs := &logBuffer{t: t}
			env := failingEnv(c, eddy.Restarts(2, 10*time.Millisecond), eddy.LogOutput(logs), noteCheckpoint())
			if err := env.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !failed.Load() {
				t.Fatal("the failure was not injected")
			}
			st := env.Stats()
			if st.Restarts != 1 {
				t.Fatalf("%d restarts, want 1", st.Restarts)
			}
			if withCheckpoints && st.RestoredFrom == 0 {
				t.Fatal("the restart did not restore a checkpoint")
			}
			if !withCheckpoints && st.RestoredFrom != 0 {
				t.Fatalf("restored checkpoint %d without checkpoint storage", st.RestoredFrom)
			}
			if out := logs.String(); !strings.Contains(out, "job failed (attempt 1 of 3)") || !strings.Contains(out, errInjected.Error()) {
				t.Fatalf("the log does not report the failure and restart:\n%s", out)
			}
			sameLines(t, onlyTotals(committed(t, c.Out)), want)
			noPending(t, c.Out)
		})
	}

	t.Run("no-restarts", func(t *testing.T) {
		dir := t.TempDir()
		c := base
		c.Data, c.Out, c.CheckpointInterval = filepath.Join(dir, "data"), filepath.Join(dir, "out"), 10*time.Millisecond
		resetFailure(at, true)
		env := failingEnv(c, eddy.Restarts(0, 10*time.Millisecond), eddy.LogOutput(testWriter{t}), noteCheckpoint())
		err := env.Run(context.Background())
		if !errors.Is(err, errInjected) {
			t.Fatalf("Run returned %v, want the injected failure", err)
		}
		if st := env.Stats(); st.Restarts != 0 {
			t.Fatalf("%d restarts with Restarts(0)", st.Restarts)
		}
		// What the failed run committed is part of the reference, once.
		partial := onlyTotals(committed(t, c.Out))
		noRepeats(t, partial, want)
		if len(manifestIDs(c.Data)) == 0 {
			t.Fatal("no checkpoint before the failure")
		}
		// The next Run (the function no longer fails) resumes from the last
		// checkpoint and completes exactly.
		env = failingEnv(c, eddy.Restarts(0, 10*time.Millisecond), eddy.LogOutput(testWriter{t}))
		if err := env.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if env.Stats().RestoredFrom == 0 {
			t.Fatal("the second run did not restore a checkpoint")
		}
		t.Logf("%d lines committed before the failure", len(partial))
		sameLines(t, onlyTotals(committed(t, c.Out)), want)
		noPending(t, c.Out)
	})
}
