package align

import (
	"fmt"
	"math"
)

// Aligner tracks the inputs of one receiving subtask.
type Aligner struct {
	n         int
	blocked   []bool  // the input delivered the barrier being aligned
	ended     []bool  // the input terminated: nothing more comes from it
	eod       []bool  // the input's data ended (barriers may follow)
	idle      []bool  // the input said it is idle
	wms       []int64 // the input's latest watermark
	live      int     // inputs not terminated
	eods      int     // inputs whose data ended
	barriers  int     // inputs blocked on the barrier being aligned
	barrierID uint64
	final     bool
	watermark int64 // the combined watermark last returned
	idleOut   bool  // whether the subtask last said it is idle
	taken     uint64
	// Abandoned counts the alignments given up for a newer barrier.
	Abandoned int
}

// New returns the aligner of n inputs whose event time starts at floor
// (a restored watermark, or math.MinInt64).
func New(n int, floor int64) *Aligner {
	a := &Aligner{n: n, blocked: make([]bool, n), ended: make([]bool, n), eod: make([]bool, n), idle: make([]bool, n),
		wms: make([]int64, n), live: n, watermark: floor}
	for i := range a.wms {
		a.wms[i] = math.MinInt64
	}
	return a
}

// Blocked reports whether input i has delivered the barrier being aligned:
// what arrives from it after the barrier belongs to the next checkpoint and
// waits until this one is taken.
func (a *Aligner) Blocked(i int) bool { return a.blocked[i] }

// Live is the number of inputs that have not terminated.
func (a *Aligner) Live() int { return a.live }

// Barrier records the barrier of checkpoint id on input i. It returns true
// once every live input has delivered it: take the checkpoint, then call
// Release. A newer barrier while one is being aligned means the older
// checkpoint was given up (a source that missed its trigger injects the
// next one): the alignment starts over on the newer id, and the inputs held
// for the older one flow again. A barrier older than the one being aligned,
// or than the last checkpoint taken, belongs to a checkpoint given up and
// is ignored.
func (a *Aligner) Barrier(i int, id uint64, final bool) (bool, error) {
	if a.ended[i] {
		return false, fmt.Errorf("input %d delivered barrier %d after it terminated", i, id)
	}
	if a.blocked[i] {
		return false, fmt.Errorf("input %d delivered barrier %d while held at barrier %d", i, id, a.barrierID)
	}
	switch {
	case id <= a.taken || (a.barriers > 0 && id < a.barrierID):
		return false, nil
	case a.barriers > 0 && id > a.barrierID:
		a.Release()
		a.Abandoned++
	}
	if a.barriers == 0 {
		a.barrierID, a.final = id, final
	}
	a.blocked[i] = true
	a.barriers++
	if a.barriers == a.live {
		a.taken = id
		return true, nil
	}
	return false, nil
}

// Checkpoint is the id of the barrier being aligned and whether it is the
// final checkpoint of a bounded job.
func (a *Aligner) Checkpoint() (id uint64, final bool) { return a.barrierID, a.final }

// Release ends the alignment once the checkpoint is taken: every input
// flows again.
func (a *Aligner) Release() {
	clear(a.blocked)
	a.barriers = 0
}

// Event is what the subtask does after a watermark or an idleness change.
type Event struct {
	// Advance: event time moves to Watermark (fire timers, forward it).
	Advance   bool
	Watermark int64
	// Idle: tell downstream the subtask is idle (every input is), or
	// Active: that it is active again.
	Idle, Active bool
}

// Watermark records watermark wm on input i (a smaller one than it sent
// before is ignored) and makes it active.
func (a *Aligner) Watermark(i int, wm int64) Event {
	if wm > a.wms[i] {
		a.wms[i] = wm
	}
	a.idle[i] = false
	return a.combine()
}

// Idle records that input i is idle (or active again, with idle false).
func (a *Aligner) Idle(i int, idle bool) Event {
	a.idle[i] = idle
	return a.combine()
}

// EndOfData records that input i's data ended: it no longer holds event
// time back (the Event says how far that lets it move, or that every input
// left is idle). all is true once every input's data has ended: the
// subtask's input is exhausted (fire every event-time timer, then tell
// downstream).
func (a *Aligner) EndOfData(i int) (ev Event, all bool) {
	if !a.eod[i] {
		a.eod[i] = true
		a.eods++
	}
	a.wms[i] = math.MaxInt64
	return a.combine(), a.eods == a.n
}

// Terminate records that input i is done; the Event says what that does
// to event time. complete is true when the barrier being aligned was
// waiting for input i only: take the checkpoint, then call Release.
// Terminating while held at a barrier is an error: the checkpoint could
// never complete.
func (a *Aligner) Terminate(i int) (ev Event, complete bool, err error) {
	if a.blocked[i] {
		return Event{}, false, fmt.Errorf("input %d terminated while held at barrier %d", i, a.barrierID)
	}
	if !a.ended[i] {
		a.ended[i] = true
		a.live--
	}
	if a.barriers > 0 && a.barriers == a.live && a.barrierID > a.taken {
		a.taken = a.barrierID
		complete = true
	}
	return a.combine(), complete, nil
}

// combine computes the subtask's watermark: the least over inputs that are
// neither idle nor finished (data ended or terminated); idle when every
// such input is idle. Event time only moves forward, and not past the end
// of data of every input (that is the subtask's own end of input).
func (a *Aligner) combine() Event {
	combined, active := int64(math.MaxInt64), 0
	for i := range a.n {
		if a.ended[i] || a.eod[i] || a.idle[i] {
			continue
		}
		active++
		combined = min(combined, a.wms[i])
	}
	var ev Event
	if active == 0 {
		if !a.idleOut && a.eods < a.n {
			a.idleOut = true
			ev.Idle = true
		}
		return ev
	}
	if a.idleOut {
		a.idleOut = false
		ev.Active = true
	}
	if combined != math.MaxInt64 && combined > a.watermark && a.eods < a.n {
		a.watermark = combined
		ev.Advance, ev.Watermark = true, combined
	}
	return ev
}

// Advanced tells the aligner event time moved to wm by other means (the
// end of input): it returns no smaller watermark after it.
func (a *Aligner) Advanced(wm int64) {
	if wm > a.watermark {
		a.watermark = wm
	}
}
