package eddy_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/discard"
)

// seqRec is a record numbered in the order its source produced it.
type seqRec struct {
	Key string `proto:"1"`
	Seq int64  `proto:"2"`
}

// seqSource produces n records, numbering them from a counter the test
// reads too: how many records it has produced so far.
type seqSource struct {
	n        int64
	produced *atomic.Int64
}

func (s seqSource) Name() string { return "seq" }
func (s seqSource) Splits() int  { return 1 }
func (s seqSource) OpenSplit(context.Context, int, []byte) (eddy.SplitReader[seqRec], error) {
	return &seqReader{s: s}, nil
}

type seqReader struct{ s seqSource }

func (r *seqReader) Next(rec *seqRec) (eddy.ReadStatus, error) {
	seq := r.s.produced.Load()
	if seq >= r.s.n {
		return eddy.End, nil
	}
	r.s.produced.Add(1)
	*rec = seqRec{Key: "k", Seq: seq}
	return eddy.Record, nil
}
func (r *seqReader) Position() []byte { return []byte{0} }
func (r *seqReader) Close() error     { return nil }

// slowFn takes about perRecord per record (a cold read of state on disk,
// a slow call) and notes how many records its source had produced beyond
// each one: what was queued ahead of it when it arrived, which a
// checkpoint barrier would have waited behind.
type slowFn struct {
	perRecord time.Duration
	produced  *atomic.Int64
	from      int64 // records numbered below are not measured
	// Shared by the operator's copies (one per subtask).
	maxAhead, seen *atomic.Int64
}

func (f *slowFn) Open(*eddy.OpenContext) error { return nil }

func (f *slowFn) Process(_ *eddy.Context[string, seqRec], r *seqRec) error {
	f.seen.Add(1)
	if ahead := f.produced.Load() - r.Seq; r.Seq >= f.from && ahead > f.maxAhead.Load() {
		f.maxAhead.Store(ahead) // one subtask gets every record: no race
	}
	for start := time.Now(); time.Since(start) < f.perRecord; {
		// The operator's work: a spin, as time.Sleep rounds up to the
		// timer's granularity.
	}
	return nil
}

// TestSlowOperatorGetsSmallBatches: a keyed operator that needs 200 µs a
// record while its source could run far ahead gets smaller batches, so
// that what waits in front of it (and in front of a barrier) is about
// 50 ms of its work, not its inbox's four full batches of 512 records
// (half a second here, seconds at a millisecond a record).
func TestSlowOperatorGetsSmallBatches(t *testing.T) {
	const n = 8000
	var produced atomic.Int64
	// Records produced before the operator had measured itself travel in
	// full batches: up to 8 queued (4 per input, two source subtasks), one
	// open and one being handled.
	var maxAhead, seen atomic.Int64
	fn := &slowFn{perRecord: 200 * time.Microsecond, produced: &produced, from: 6000, maxAhead: &maxAhead, seen: &seen}
	// Parallelism 2: the source's one split and the one key each keep
	// one subtask busy, and a shuffle runs between them.
	env := eddy.New(eddy.Parallelism(2), eddy.Checkpoints(filepath.Join(t.TempDir(), "ckpt"), 50*time.Millisecond),
		eddy.Restarts(0, 0), eddy.LogOutput(&logBuf{}))
	src := eddy.FromSource(env, seqSource{n: n, produced: &produced})
	keyed := eddy.KeyBy(src, func(r *seqRec) string { return r.Key })
	eddy.ToSink(eddy.Process[string, seqRec, seqRec](keyed, fn), discard.Sink[seqRec]())
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// At 200 µs or more a record, 50 ms is at most 250 records: 8 queued
	// batches of at most 31, the open one and the one being handled.
	// Whole batches would put up to 5,120 ahead.
	t.Logf("at most %d records were ahead of a record at the slow operator (%d seen, %d produced)", maxAhead.Load(), seen.Load(), produced.Load())
	if seen.Load() != n {
		t.Fatalf("the operator saw %d records, want %d", seen.Load(), n)
	}
	if maxAhead.Load() >= 512 {
		t.Fatalf("%d records were ahead of a record at the slow operator, want under one full batch (512)", maxAhead.Load())
	}
}
