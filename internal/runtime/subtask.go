package runtime

import (
	"context"
	"math"
	"time"

	"github.com/eddyflow/eddy/internal/cacheline"
	"github.com/eddyflow/eddy/internal/inbox"
	"github.com/eddyflow/eddy/internal/shuffle"
	"github.com/eddyflow/eddy/internal/snapshot"
)

// Subtask is one subtask of a stage in one run attempt.
type Subtask struct {
	_         cacheline.Pad   // its counters are written per record (package cacheline)
	acker     *snapshot.Acker // sends its acks in barrier order
	memo      map[any]any     // what Memo built for the subtask
	ctx       context.Context
	job       *Job
	st        *Stage
	subtask   int
	par       int
	outs      []shuffle.Output
	keyed     []*Keyed
	sinks     []sinkHandle
	watermark int64 // the stage's event-time watermark
	// Local counters, flushed by flushCounters once per batch or wait,
	// never per record: the records a source read, the records a sink
	// wrote, the records received from and sent to shuffles, late and
	// dropped records, and where the time went.
	recordsIn   int64
	recordsOut  int64
	received    int64
	shuffled    int64
	lateRecords int64
	dropped     int64
	clk         clock
	m           *SubtaskMetrics // this subtask's, resolved once at its start
	// procNow is the wall clock (ns) as read once per message a receiver
	// handles, 0 until read: see processingTime.
	procNow int64
	pushed  int64 // records pushed to any shuffle writer: their age clock (shuffle.Writer.LimitAge)
	_       cacheline.Pad
}

// processingTime is the subtask's processing time: the wall clock when the
// message being handled (a batch of records, a timer) was taken, read once
// per message. Every record of a batch reaches the operator at that
// moment; reading the clock per record cost processing-time windows a
// fifth of their CPU.
func (sc *Subtask) processingTime() int64 {
	if sc.procNow == 0 {
		sc.procNow = time.Now().UnixNano()
	}
	return sc.procNow
}

// flushOut sends every partly filled output batch.
func (sc *Subtask) flushOut() error {
	for _, o := range sc.outs {
		if err := o.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// controlOut sends a control message to every output, after its records;
// a watermark waits to ride on the next batch (shuffle.Writer.Watermark).
func (sc *Subtask) controlOut(m shuffle.Msg) error {
	for _, o := range sc.outs {
		var err error
		if m.Kind == shuffle.Watermark {
			err = o.Watermark(int64(m.ID))
		} else {
			err = o.Control(m)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// advanceWatermark moves the stage's event time to wm: keyed operators fire
// their due event-time timers, then the watermark goes downstream.
func (sc *Subtask) advanceWatermark(wm int64) error {
	if wm <= sc.watermark {
		return nil
	}
	sc.watermark = wm
	sc.m.Watermark.Store(wm)
	for _, rt := range sc.keyed {
		if wm <= rt.watermark {
			continue
		}
		rt.watermark = wm
		rt.backend.SetEventTime(wm)
		if rt.onWatermark != nil {
			if err := rt.onWatermark(wm); err != nil {
				return err
			}
		}
		fire := rt.fireEvent
		if fire == nil {
			fire = func([]byte, int, int64) error { return nil }
		}
		if err := rt.eventTimers.FireDue(wm, fire); err != nil {
			return err
		}
	}
	return sc.controlOut(shuffle.Msg{Kind: shuffle.Watermark, ID: uint64(wm)})
}

// endOfInput runs when every input has ended: event time jumps to the end,
// firing every event-time timer, then every pending processing-time timer
// and index entry fires (the input is drained: a processing-time window still open holds
// records that would otherwise never be emitted), then keyed functions see
// EndOfInput.
func (sc *Subtask) endOfInput() error {
	if err := sc.advanceWatermark(math.MaxInt64); err != nil {
		return err
	}
	if err := sc.fireTimers(math.MaxInt64); err != nil {
		return err
	}
	for _, rt := range sc.keyed {
		if rt.end != nil {
			if err := rt.end(); err != nil {
				return UserError(rt.uid, sc.subtask, "EndOfInput", err, false)
			}
		}
	}
	return sc.controlOut(shuffle.Msg{Kind: shuffle.EndOfData})
}

type sinkHandle struct {
	entry *SinkEntry
	w     interface {
		PreCommit(uint64) ([]byte, error)
		Close() error
	}
}

// SendTo implements shuffle.Sender: it hands m to a downstream subtask's
// inbox, as input there, waiting while that input has its credits out (backpressure).
// The time it waits is back-pressured time.
func (sc *Subtask) SendTo(ib *inbox.Inbox[shuffle.Msg], input int, m shuffle.Msg) error {
	if ib.TrySend(input, m) {
		return nil
	}
	waited := time.Now()
	ok := ib.Send(sc.ctx.Done(), input, m)
	sc.clk.pressed += int64(time.Since(waited))
	if ok {
		return nil
	}
	return sc.ctx.Err()
}

// startClock starts the subtask's account of its time and resolves its
// metrics.
func (sc *Subtask) startClock() {
	sc.m = sc.job.env.metrics.Subtask(sc.st.id, sc.subtask)
	sc.clk = clock{last: time.Now()}
}

// flushCounters adds the subtask's local counters to the job's and to its
// own metrics, and accounts the time since the last flush: what the waits
// did not take was busy.
func (sc *Subtask) flushCounters() {
	s, m := sc.job.env.stats, sc.m
	if sc.recordsIn != 0 || sc.received != 0 {
		m.RecordsIn.Add(sc.recordsIn + sc.received)
		s.recordsIn.Add(sc.recordsIn)
		sc.recordsIn, sc.received = 0, 0
	}
	if sc.recordsOut != 0 || sc.shuffled != 0 {
		m.RecordsOut.Add(sc.recordsOut + sc.shuffled)
		s.recordsOut.Add(sc.recordsOut)
		sc.recordsOut, sc.shuffled = 0, 0
	}
	if sc.lateRecords != 0 {
		s.lateRecords.Add(sc.lateRecords)
		m.LateRecords.Add(sc.lateRecords)
		sc.lateRecords = 0
	}
	if sc.dropped != 0 {
		m.DroppedRecords.Add(sc.dropped)
		sc.dropped = 0
	}
	now := time.Now()
	busy := int64(now.Sub(sc.clk.last)) - sc.clk.idle - sc.clk.pressed
	if busy > 0 {
		m.BusyNs.Add(busy)
	}
	if sc.clk.idle > 0 {
		m.IdleNs.Add(sc.clk.idle)
	}
	if sc.clk.pressed > 0 {
		m.BackPressuredNs.Add(sc.clk.pressed)
	}
	sc.clk = clock{last: now}
}
