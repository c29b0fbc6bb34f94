package source

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

// Values of the watermark slots the subtasks of a source share for
// alignment besides watermarks: NoWatermark until a subtask has one,
// Excluded when it is finished or idle.
const (
	NoWatermark = math.MinInt64
	Excluded    = math.MaxInt64
)

// NewSlots returns the watermark slots of a source of par subtasks, each
// at NoWatermark.
func NewSlots(par int) []atomic.Int64 {
	s := make([]atomic.Int64, par)
	for i := range s {
		s[i].Store(NoWatermark)
	}
	return s
}

// aligned reports whether a subtask with watermark own may read on: its
// watermark is at most maxDrift ahead of every other subtask's.
func aligned(slots []atomic.Int64, self int, own, maxDrift int64) bool {
	for i := range slots {
		if i == self {
			continue
		}
		w := slots[i].Load()
		if w == Excluded {
			continue
		}
		if w == NoWatermark || (own != NoWatermark && own-w > maxDrift) {
			return own == NoWatermark // nothing read yet: read the first batch
		}
	}
	return true
}
