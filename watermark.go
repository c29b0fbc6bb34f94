package eddy

import (
	"math"
	"time"

	"github.com/eddyflow/eddy/internal/runtime"
)

// WatermarkOption configures Watermarks.
type WatermarkOption func(*watermarkOpts)

type watermarkOpts struct {
	idle     time.Duration
	align    time.Duration
	alignSet bool // AlignWatermarks was given: align is the user's, 0 turns it off
}

// IdleAfter marks a split idle when it has produced no record for d of wall
// time, so it stops holding the watermark back until it produces again.
// Default: never idle.
func IdleAfter(d time.Duration) WatermarkOption { return func(o *watermarkOpts) { o.idle = d } }

// AlignWatermarks pauses a source subtask whose watermark runs more than
// maxDrift ahead of the slowest active subtask of the same source (also at
// start, until every subtask has a watermark). A subtask that has nothing to
// read holds the others back until IdleAfter marks it idle, so a subtask that
// starts late cannot change which records are late: lateness decided by more
// than maxDrift plus the in-flight data is deterministic.
//
// Without it the source is aligned loosely, within DefaultAlignment: subtasks
// that get unequal shares of the CPU (more subtasks than cores, or a
// catch-up after downtime) would otherwise drift apart in event time, and
// every key would hold the windows of the whole drift. That default bound
// only engages when the drift is far beyond the out-of-orderness the job
// tolerates, and a subtask with nothing to read (a Kafka partition without
// new records) does not hold the others back while it waits.
//
// AlignWatermarks(0) turns alignment off, for a source whose subtasks must
// never wait for each other, such as one whose splits lag each other in
// event time for good.
func AlignWatermarks(maxDrift time.Duration) WatermarkOption {
	return func(o *watermarkOpts) { o.align, o.alignSet = max(maxDrift, 0), true }
}

// DefaultAlignment is the drift between the subtasks of a source that
// Watermarks allows when AlignWatermarks is not given: 10 times its
// maxOutOfOrderness, and at least 30 seconds of event time. See
// AlignWatermarks for how the default alignment differs from an explicit
// one.
func DefaultAlignment(maxOutOfOrderness time.Duration) time.Duration {
	if maxOutOfOrderness > math.MaxInt64/10 {
		return time.Duration(math.MaxInt64)
	}
	return max(10*maxOutOfOrderness, 30*time.Second)
}

// Watermarks gives a source's records their event time with ts and
// generates watermarks that trail the largest time seen, per split, by
// maxOutOfOrderness. A source subtask's watermark is the minimum over its
// active splits; downstream operators take the minimum over their inputs.
// The source's subtasks are kept within DefaultAlignment of each other in
// event time unless AlignWatermarks says otherwise.
func Watermarks[T any](ts func(*T) time.Time, maxOutOfOrderness time.Duration, opts ...WatermarkOption) SourceOption {
	var o watermarkOpts
	for _, f := range opts {
		f(&o)
	}
	if !o.alignSet {
		o.align = DefaultAlignment(maxOutOfOrderness)
	}
	spec := &runtime.WatermarkSpec[T]{TS: ts, Delay: int64(maxOutOfOrderness), IdleAfter: o.idle, Align: int64(o.align),
		AlignHold: o.alignSet}
	return watermarksOption{spec}
}

// watermarksOption is Watermarks.
type watermarksOption struct{ spec any }

func (o watermarksOption) applySource(c *sourceConfig) { c.watermarks = o.spec }
