package runtime

import (
	"context"
	"math"

	"github.com/eddyflow/eddy/internal/inbox"
)

// Subtask is one subtask of a stage in one run attempt.
type Subtask struct {
	// acked is closed once the subtask's last ack has been sent, nil if
	// it was sent at its barrier: the next ack waits for it.
	acked       chan struct{}
	ctx         context.Context
	job         *Job
	st          *Stage
	subtask     int
	par         int
	outs        []outWriter
	keyed       []*Keyed
	sinks       []sinkHandle
	watermark   int64 // the stage's event-time watermark
	recordsIn   int64
	recordsOut  int64
	lateRecords int64
}

// flushOut sends every partly filled output batch.
func (sc *Subtask) flushOut() error {
	for _, o := range sc.outs {
		if err := o.flush(); err != nil {
			return err
		}
	}
	return nil
}

// controlOut sends a control message to every output, after its records;
// a watermark waits to ride on the next batch (shuffleWriter.watermark).
func (sc *Subtask) controlOut(m msg) error {
	for _, o := range sc.outs {
		var err error
		if m.kind == msgWatermark {
			err = o.watermark(int64(m.id))
		} else {
			err = o.control(m)
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
	for _, rt := range sc.keyed {
		if wm <= rt.watermark {
			continue
		}
		rt.watermark = wm
		fire := rt.fireEvent
		if fire == nil {
			fire = func([]byte, int, int64) error { return nil }
		}
		if err := rt.eventTimers.FireDue(wm, fire); err != nil {
			return err
		}
	}
	return sc.controlOut(msg{kind: msgWatermark, id: uint64(wm)})
}

// endOfInput runs when every input has ended: event time jumps to the end,
// firing every event-time timer, then keyed functions see EndOfInput.
func (sc *Subtask) endOfInput() error {
	if err := sc.advanceWatermark(math.MaxInt64); err != nil {
		return err
	}
	for _, rt := range sc.keyed {
		if rt.end != nil {
			if err := rt.end(); err != nil {
				return UserError(rt.uid, sc.subtask, "EndOfInput", err, false)
			}
		}
	}
	return sc.controlOut(msg{kind: msgEndOfData})
}

type sinkHandle struct {
	entry *SinkEntry
	w     interface {
		PreCommit(uint64) ([]byte, error)
		Close() error
	}
}

// sendTo hands m to a downstream subtask's inbox, as this subtask's input
// there, waiting while that input has its credits out (backpressure).
func (sc *Subtask) sendTo(ib *inbox.Inbox[msg], m msg) error {
	if ib.Send(sc.ctx.Done(), sc.subtask, m) {
		return nil
	}
	return sc.ctx.Err()
}

func (sc *Subtask) flushCounters() {
	s := sc.job.env.stats
	if sc.recordsIn != 0 {
		s.recordsIn.Add(sc.recordsIn)
		sc.recordsIn = 0
	}
	if sc.recordsOut != 0 {
		s.recordsOut.Add(sc.recordsOut)
		sc.recordsOut = 0
	}
	if sc.lateRecords != 0 {
		s.lateRecords.Add(sc.lateRecords)
		sc.lateRecords = 0
	}
}
