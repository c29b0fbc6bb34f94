package eddy

import (
	"time"

	"github.com/eddyflow/eddy/internal/runtime"
)

// WatermarkOption configures Watermarks.
type WatermarkOption func(*watermarkOpts)

type watermarkOpts struct {
	idle  time.Duration
	align time.Duration
}

// IdleAfter marks a split idle when it has produced no record for d of wall
// time, so it stops holding the watermark back until it produces again.
// Default: never idle.
func IdleAfter(d time.Duration) WatermarkOption { return func(o *watermarkOpts) { o.idle = d } }

// AlignWatermarks pauses a source subtask whose watermark runs more than
// maxDrift ahead of the slowest active subtask of the same source (also at
// start, until every subtask has a watermark). Without it a subtask that
// starts late holds the watermark back while others race ahead, and whether
// a late record counts as late can differ from run to run; with it,
// lateness decided by more than maxDrift plus the in-flight data is
// deterministic.
func AlignWatermarks(maxDrift time.Duration) WatermarkOption {
	return func(o *watermarkOpts) { o.align = maxDrift }
}

// Watermarks gives a source's records their event time with ts and
// generates watermarks that trail the largest time seen, per split, by
// maxOutOfOrderness. A source subtask's watermark is the minimum over its
// active splits; downstream operators take the minimum over their inputs.
func Watermarks[T any](ts func(*T) time.Time, maxOutOfOrderness time.Duration, opts ...WatermarkOption) SourceOption {
	var o watermarkOpts
	for _, f := range opts {
		f(&o)
	}
	spec := &runtime.WatermarkSpec[T]{TS: ts, Delay: int64(maxOutOfOrderness), IdleAfter: o.idle, Align: int64(o.align)}
	return watermarksOption{spec}
}

// watermarksOption is Watermarks.
type watermarksOption struct{ spec any }

func (o watermarksOption) applySource(c *sourceConfig) { c.watermarks = o.spec }
