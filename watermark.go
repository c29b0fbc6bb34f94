package eddy

import (
	"math"
	"sync/atomic"
	"time"
)

// watermarkSpec is a source's bounded-out-of-orderness watermark strategy.
type watermarkSpec[T any] struct {
	ts      func(*T) time.Time
	delay   int64 // max out-of-orderness, ns
	idleAft time.Duration
	align   int64 // max drift in ns between source subtasks; 0: none
}

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
	spec := &watermarkSpec[T]{ts: ts, delay: int64(maxOutOfOrderness), idleAft: o.idle, align: int64(o.align)}
	return watermarksOption{spec}
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

// Watermark slots of source subtasks shared for alignment: noWatermark until
// a subtask has one, excluded when it is finished or idle.
const (
	noWatermark = math.MinInt64
	excluded    = math.MaxInt64
)

// aligned reports whether a subtask with watermark own may read on: its
// watermark is at most maxDrift ahead of every other subtask's.
func aligned(slots []atomic.Int64, self int, own, maxDrift int64) bool {
	for i := range slots {
		if i == self {
			continue
		}
		w := slots[i].Load()
		if w == excluded {
			continue
		}
		if w == noWatermark || (own != noWatermark && own-w > maxDrift) {
			return own == noWatermark // nothing read yet: read the first batch
		}
	}
	return true
}

// watermarksOption is Watermarks.
type watermarksOption struct{ spec any }

func (o watermarksOption) applySource(c *sourceConfig) { c.watermarks = o.spec }
