package eddy

import (
	"math"
	"time"
)

// watermarkSpec is a source's bounded-out-of-orderness watermark strategy.
type watermarkSpec[T any] struct {
	ts      func(*T) time.Time
	delay   int64 // max out-of-orderness, ns
	idleAft time.Duration
}

// WatermarkOption configures Watermarks.
type WatermarkOption func(*watermarkOpts)

type watermarkOpts struct{ idle time.Duration }

// IdleAfter marks a split idle when it has produced no record for d of wall
// time, so it stops holding the watermark back until it produces again.
// Default: never idle.
func IdleAfter(d time.Duration) WatermarkOption { return func(o *watermarkOpts) { o.idle = d } }

// Watermarks gives a source's records their event time with ts and
// generates watermarks that trail the largest time seen, per split, by
// maxOutOfOrderness. A source subtask's watermark is the minimum over its
// active splits; downstream operators take the minimum over their inputs.
func Watermarks[T any](ts func(*T) time.Time, maxOutOfOrderness time.Duration, opts ...WatermarkOption) OpOption {
	var o watermarkOpts
	for _, f := range opts {
		f(&o)
	}
	spec := &watermarkSpec[T]{ts: ts, delay: int64(maxOutOfOrderness), idleAft: o.idle}
	return func(c *opConfig) { c.watermarks = spec }
}

// splitClock tracks one split's event time for watermarks.
type splitClock struct {
	maxTs    int64
	lastSeen time.Time
}

func newSplitClock() splitClock { return splitClock{maxTs: math.MinInt64, lastSeen: time.Now()} }

// watermark of the split: the largest timestamp seen minus the delay.
func (c *splitClock) watermark(delay int64) int64 {
	if c.maxTs == math.MinInt64 {
		return math.MinInt64
	}
	return c.maxTs - delay
}
