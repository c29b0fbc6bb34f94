package eddy_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
)

// splitTimes records the largest event time each split has returned and,
// from split 0, how far it ran ahead of split 1.
type splitTimes struct {
	latest   [2]atomic.Int64 // nanoseconds; 0 until the split returned a record
	maxAhead atomic.Int64
	done0    chan struct{} // closed when split 0 reaches its end
}

func newSplitTimes() *splitTimes { return &splitTimes{done0: make(chan struct{})} }

// trackedSource wraps a two-split source: split 1 is slow (mode "trickle")
// or has nothing to read until split 0 has ended (mode "gated").
type trackedSource struct {
	eddy.Source[datagen.GPSPoint]
	times *splitTimes
	mode  string
}

func (s trackedSource) OpenSplit(ctx context.Context, split int, pos []byte) (eddy.SplitReader[datagen.GPSPoint], error) {
	r, err := s.Source.OpenSplit(ctx, split, pos)
	if err != nil {
		return nil, err
	}
	return &trackedReader{SplitReader: r, split: split, s: s}, nil
}

type trackedReader struct {
	eddy.SplitReader[datagen.GPSPoint]
	split int
	s     trackedSource
}

// burnt keeps burn's loop from being optimized away.
var burnt atomic.Uint64

// burn spends some tens of microseconds of CPU.
func burn() {
	x := burnt.Load()
	for i := range uint64(50_000) {
		x = x*31 + i
	}
	burnt.Store(x)
}

func (r *trackedReader) Next(rec *datagen.GPSPoint) (eddy.ReadStatus, error) {
	t := r.s.times
	if r.split == 1 {
		switch r.s.mode {
		case "gated":
			select {
			case <-t.done0:
			default:
				return eddy.Idle, nil
			}
		case "trickle":
			// Slow but never idle: each record costs CPU time, as a
			// subtask that gets a small share of the cores.
			burn()
		}
	}
	st, err := r.SplitReader.Next(rec)
	if err != nil || st != eddy.Record {
		if st == eddy.End && r.split == 0 {
			close(t.done0)
		}
		return st, err
	}
	ts := rec.Timestamp.UnixNano()
	t.latest[r.split].Store(ts)
	if r.split == 0 {
		other := t.latest[1].Load()
		if other == 0 { // split 1 has returned nothing yet: it is at the start
			other = datagen.DefaultStartTime.UnixNano()
		}
		if ts-other > t.maxAhead.Load() {
			t.maxAhead.Store(ts - other)
		}
	}
	return st, nil
}

// runTracked runs a two-subtask job over the tracked source with the given
// watermark options, and returns how far split 0 ran ahead of split 1.
func runTracked(t *testing.T, mode string, opts ...eddy.WatermarkOption) time.Duration {
	t.Helper()
	times := newSplitTimes()
	src := trackedSource{Source: datagen.GPS(datagen.Events(20_000), datagen.Drivers(10), datagen.Splits(2),
		datagen.Spacing(50*time.Millisecond)), times: times, mode: mode}
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}))
	pts := eddy.FromSource(env, src, eddy.Watermarks(func(p *datagen.GPSPoint) time.Time { return p.Timestamp },
		100*time.Millisecond, opts...))
	keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
	w := eddy.AggregateWindows(keyed, eddy.Tumbling(10*time.Second), eddy.Aggregator[string, datagen.GPSPoint, int64, sumOut]{
		Add:    func(n int64, _ *datagen.GPSPoint) int64 { return n + 1 },
		Result: func(k string, _ eddy.Window, n int64) sumOut { return sumOut{Driver: k, Sum: n} },
	})
	out := filepath.Join(t.TempDir(), "w")
	eddy.ToSink(w.Results, file.JSONLines[sumOut](out))
	// A bound on a hang, not a wait for a result: the job ends on its own.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.Run(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("mode %s: the job did not finish: one split held the other back", mode)
		}
		t.Fatal(err)
	}
	var sum int64
	for _, l := range readLines(t, out) {
		var o sumOut
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatal(err)
		}
		sum += o.Sum
	}
	if sum != 20_000 {
		t.Fatalf("mode %s: windows counted %d of 20000 points", mode, sum)
	}
	return time.Duration(times.maxAhead.Load())
}

// TestDefaultAlignmentBoundsDrift: a source subtask that gets far fewer
// records per pass than the other (as with more subtasks than cores) is
// not left behind by more than the default alignment, plus one pass of the
// fast subtask; with alignment off the fast one runs far ahead.
func TestDefaultAlignmentBoundsDrift(t *testing.T) {
	// The default bound, plus what split 0 reads in the pass after its
	// last check (256 records, 100 ms of event time apart), plus a margin.
	bound := eddy.DefaultAlignment(100*time.Millisecond) + 256*2*50*time.Millisecond + 2*time.Second
	if ahead := runTracked(t, "trickle"); ahead > bound {
		t.Fatalf("with the default alignment split 0 ran %v ahead of split 1; want at most %v", ahead, bound)
	}
	if ahead := runTracked(t, "trickle", eddy.AlignWatermarks(0)); ahead <= bound {
		t.Fatalf("with alignment off split 0 ran only %v ahead of split 1: the test does not exercise drift", ahead)
	}
}

// TestDefaultAlignmentIgnoresSubtaskWithNothingToRead: a subtask whose split
// has nothing to read (an empty Kafka partition) does not hold the others
// back under the default alignment. Here split 1 has nothing until split 0
// has ended, which would never happen if split 0 waited for it.
func TestDefaultAlignmentIgnoresSubtaskWithNothingToRead(t *testing.T) {
	runTracked(t, "gated")
}
