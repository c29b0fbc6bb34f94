package eddy_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/state/pebble"
)

// TestProcessingTimeWindows counts records without event time in
// processing-time tumbling windows: every record is counted once, in a
// window of the right length, and the windows are the wall clock's.
func TestProcessingTimeWindows(t *testing.T) {
	const n = 20_000
	dir := t.TempDir()
	began := time.Now()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}), eddy.Checkpoints("file://"+t.TempDir(), 20*time.Millisecond))
	pts := eddy.FromSource(env, datagen.GPS(datagen.Seed(7), datagen.Events(n), datagen.Drivers(4), datagen.Rate(50_000)))
	keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
	w := eddy.Tumbling(50 * time.Millisecond).InProcessingTime()
	counts := eddy.AggregateWindows(keyed, w, eddy.Aggregator[string, datagen.GPSPoint, int64, winOut]{
		Add: func(n int64, _ *datagen.GPSPoint) int64 { return n + 1 },
		Result: func(k string, w eddy.Window, n int64) winOut {
			return winOut{Key: k, Start: w.Start.UnixNano(), End: w.End.UnixNano(), Count: n}
		},
	})
	eddy.ToSink(counts.Results, file.JSONLines[winOut](dir))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	total, windows := int64(0), 0
	for _, l := range readLines(t, dir) {
		var o winOut
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatal(err)
		}
		if o.End-o.Start != int64(50*time.Millisecond) || o.Start%int64(50*time.Millisecond) != 0 {
			t.Fatalf("window %+v is not an aligned 50 ms window", o)
		}
		if o.End < began.UnixNano() || o.Start > ended.UnixNano() {
			t.Fatalf("window %+v is outside the run's wall-clock time [%v, %v]", o, began, ended)
		}
		total += o.Count
		windows++
	}
	if total != n {
		t.Fatalf("windows counted %d records, want %d", total, n)
	}
	if windows < 4 {
		t.Fatalf("%d windows for a run paced over 400 ms", windows)
	}
}

// TestProcessingTimeWindowsAcrossRestore stops a job with open
// processing-time windows after a few checkpoints and resumes it, several
// times, with another parallelism each time: at the end of the input every
// record has been counted exactly once in each of its windows. The windows
// are hours long, so those of the checkpoints are still open when the job
// resumes, and fire only if they are found again from the restored state
// (the windows register no timers) — at the end of the input at the latest.
func TestProcessingTimeWindowsAcrossRestore(t *testing.T) {
	for _, c := range []struct {
		name   string
		w      eddy.Windows
		cover  int64 // windows per record
		intKey bool
		pebble bool // state in Pebble
		// The first run keeps a timer per window, as binaries before
		// the index of open windows did (eddy.WindowIndexOff).
		timersFirst bool
	}{
		{"tumbling", eddy.Tumbling(time.Hour).InProcessingTime(), 1, false, false, false},
		{"sliding-int-key", eddy.Sliding(2*time.Hour, time.Hour).InProcessingTime(), 2, true, false, false},
		{"tumbling-pebble", eddy.Tumbling(time.Hour).InProcessingTime(), 1, true, true, false},
		{"sliding-from-timer-checkpoints", eddy.Sliding(2*time.Hour, time.Hour).InProcessingTime(), 2, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := outOfOrder(9, 6000)
			var opts []eddy.Option
			stopAfter := int64(3)
			if c.pebble {
				opts = append(opts, eddy.StateBackend(eddy.Pebble(filepath.Join(t.TempDir(), "pebble"), pebble.Memory(64<<20))))
				stopAfter = 1 // its checkpoints take longer
			}
			dir := t.TempDir()
			data, results := filepath.Join(dir, "data"), filepath.Join(dir, "results")
			run := func(par int, stopAfter int64, timers bool) (*eddy.Env, error) {
				if timers {
					defer eddy.WindowIndexOff()()
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var seen int64
				env := eddy.New(append([]eddy.Option{eddy.Parallelism(par), eddy.Checkpoints(data, 10*time.Millisecond), eddy.LogOutput(&logBuf{}),
					eddy.OnCheckpoint(func(eddy.CheckpointStats) {
						if seen++; stopAfter > 0 && seen >= stopAfter {
							cancel()
						}
					})}, opts...)...)
				src := eddy.FromSource[ev](env, slowSlice{sliceSource{evs}})
				out := sumWindows(src, c.w, c.intKey, eddy.WindowOp(eddy.Named("windows")))
				eddy.ToSink(out.Results, file.JSONLines[winOut](results))
				return env, env.Run(ctx)
			}
			restores := 0
			finished := false
			for i, par := range []int{2, 1, 3, 2} {
				first := c.timersFirst && i == 0
				env, err := run(par, stopAfter, first)
				if env.Stats().RestoredFrom != 0 {
					restores++
				}
				if err == nil {
					if first {
						t.Fatal("the run keeping a timer per window finished before its checkpoints: nothing to restore")
					}
					finished = true
					break
				}
			}
			if !finished {
				env, err := run(2, 0, false)
				if err != nil {
					t.Fatal(err)
				}
				if env.Stats().RestoredFrom != 0 {
					restores++
				}
			}
			if restores == 0 {
				t.Fatal("no run restored from a checkpoint; the test did not exercise restore")
			}
			var wantCount, wantSum int64
			for _, e := range evs {
				wantCount += c.cover
				wantSum += c.cover * e.V
			}
			var count, sum int64
			for _, l := range readLines(t, results) {
				var o winOut
				if err := json.Unmarshal([]byte(l), &o); err != nil {
					t.Fatal(err)
				}
				count += o.Count
				sum += o.Sum
			}
			if count != wantCount || sum != wantSum {
				t.Fatalf("windows counted %d records summing to %d, want %d summing to %d", count, sum, wantCount, wantSum)
			}
		})
	}
}
