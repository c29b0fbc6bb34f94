package runtime

import (
	"math"
	"sync/atomic"
	"time"
)

// WatermarkSpec is a source's bounded-out-of-orderness watermark strategy.
type WatermarkSpec[T any] struct {
	TS        func(*T) time.Time
	Delay     int64 // max out-of-orderness, ns
	IdleAfter time.Duration
	Align     int64 // max drift in ns between source subtasks; 0: none
	// AlignHold: a subtask with nothing to read still holds the others
	// back (until IdleAfter marks it idle); without it, it stops holding
	// them back until it reads again.
	AlignHold bool
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
