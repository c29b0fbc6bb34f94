package runtime

import (
	"fmt"
	"math"
	"time"

	"github.com/eddyflow/eddy/internal/align"
	"github.com/eddyflow/eddy/internal/inbox"
	"github.com/eddyflow/eddy/internal/shuffle"
)

// ttlCleanupPerBatch is how many keys of each state with a TTL a receiver
// looks at for expiry after each batch it handles.
const ttlCleanupPerBatch = 16

// flushEvery is how many messages a busy receiver takes between flushes
// of its counters.
const flushEvery = 16

// fireTimers runs what is due in processing time at now: each keyed
// operator's own index (OnProcessingTime), then its timers.
func (sc *Subtask) fireTimers(now int64) error {
	for _, rt := range sc.keyed {
		if rt.procFire != nil {
			if err := rt.procFire(now); err != nil {
				return err
			}
		}
		fire := rt.fireProc
		if fire == nil {
			fire = func([]byte, int, int64) error { return nil }
		}
		if err := rt.procTimers.FireDue(now, fire); err != nil {
			return err
		}
	}
	return nil
}

// nextTimer is when the earliest pending processing-time timer or index
// entry (OnProcessingTime) is due, or 0.
func (sc *Subtask) nextTimer() int64 {
	next := int64(0)
	for _, rt := range sc.keyed {
		if n := rt.procTimers.Next(); n != 0 && (next == 0 || n < next) {
			next = n
		}
		if rt.procNext != nil {
			if n := rt.procNext(); n != 0 && (next == 0 || n < next) {
				next = n
			}
		}
	}
	return next
}

func (sc *Subtask) closeSinks() {
	for _, s := range sc.sinks {
		_ = s.w.Close()
	}
}

// runReceiver is the loop of a stage fed by a shuffle: it takes what its
// inputs send from its inbox, in the order it arrives, and lets an Aligner
// decide about barriers and watermarks. What an input sends after its
// barrier is held until every live input has delivered the barrier and the
// checkpoint is taken; the inbox's credits bound what is held. Output
// batches are flushed when the inbox is empty, not after every input batch.
func (sc *Subtask) runReceiver(process func(from int, batch any, mark func(wm int64) error) error) error {
	defer sc.closeSinks()
	ib := sc.job.inboxes[sc.st][sc.subtask]
	n := ib.Inputs()
	pc := newPace(ib, sc.job.env.cfg.BatchSize)
	// The restored watermark is a floor: event time never goes back.
	sc.watermark = math.MinInt64
	for i, rt := range sc.keyed {
		if i == 0 || rt.watermark < sc.watermark {
			sc.watermark = rt.watermark
		}
	}
	al := align.New(n, sc.watermark)
	held := make([][]shuffle.Msg, n) // what blocked inputs sent, in order
	heldHead := make([]int, n)
	heldCount := 0
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	armed := int64(0)
	dirty := false             // output batches may be partly filled
	stores := sc.storeBacked() // state in Pebble: flushed after each batch
	// onTimer fires due processing-time timers and forces re-arming.
	onTimer := func() error {
		armed = -1
		sc.procNow = 0
		if err := sc.fireTimers(sc.processingTime()); err != nil {
			return err
		}
		if stores {
			if err := sc.flushStores(); err != nil {
				return err
			}
		}
		if sc.job.dlog != nil {
			if err := sc.materialize(); err != nil {
				return err
			}
		}
		dirty = false
		return sc.flushOut()
	}
	event := func(ev align.Event) error {
		if ev.Idle {
			return sc.controlOut(shuffle.Msg{Kind: shuffle.Idle, Batch: true})
		}
		if ev.Active {
			if err := sc.controlOut(shuffle.Msg{Kind: shuffle.Idle, Batch: false}); err != nil {
				return err
			}
		}
		if ev.Advance {
			return sc.advanceWatermark(ev.Watermark)
		}
		return nil
	}
	// takeCheckpoint runs once the barrier being aligned is complete.
	takeCheckpoint := func() error {
		id, final := al.Checkpoint()
		if err := sc.checkpoint(id, final, nil); err != nil {
			return err
		}
		dirty = false // checkpoint flushed the outputs before the barrier
		al.Release()
		return nil
	}
	cur := 0 // the input whose batch is being processed
	onMark := func(wm int64) error { return event(al.Watermark(cur, wm)) }
	// handle acts on one message of input from that is not held, then
	// gives the input its credit back.
	handle := func(from int, m shuffle.Msg) error {
		defer ib.Release(from)
		sc.procNow = 0 // the message's records reach the operators now
		switch m.Kind {
		case shuffle.Data:
			cur = from
			start := time.Now()
			// Its length now: process hands the batch back to its pool,
			// and the sender refills it.
			n := 0
			if b, ok := m.Batch.(interface{ Len() int }); ok {
				n = b.Len()
			}
			for _, k := range sc.keyed {
				// Batches are recycled: a key slice of this one may sit
				// where one of the last held another key (EnsureKey).
				k.backend.DropCached()
			}
			if err := process(from, m.Batch, onMark); err != nil {
				return err
			}
			if stores {
				if err := sc.flushStores(); err != nil {
					return err
				}
			}
			if n > 0 {
				pc.observe(n, time.Since(start))
			}
			dirty = true
			for _, k := range sc.keyed {
				// Expired state goes a few keys per batch (state.TTL).
				k.backend.CleanupExpired(ttlCleanupPerBatch)
			}
		case shuffle.Idle:
			return event(al.Idle(from, m.Batch.(bool)))
		case shuffle.Barrier:
			complete, err := al.Barrier(from, m.ID, m.Batch.(bool))
			if err != nil {
				return fmt.Errorf("eddy: subtask %d of stage %d: %w", sc.subtask, sc.st.id, err)
			}
			if complete {
				return takeCheckpoint()
			}
		case shuffle.EndOfData:
			ev, all := al.EndOfData(from)
			if all {
				if err := sc.endOfInput(); err != nil {
					return err
				}
				al.Advanced(math.MaxInt64)
				return nil
			}
			return event(ev)
		case shuffle.Terminate:
			ev, complete, err := al.Terminate(from)
			if err != nil {
				return fmt.Errorf("eddy: subtask %d of stage %d: %w", sc.subtask, sc.st.id, err)
			}
			if err := event(ev); err != nil {
				return err
			}
			if complete {
				return takeCheckpoint()
			}
		}
		return nil
	}
	// drain handles held messages of inputs no longer blocked, until none
	// is left or every input with some is blocked again.
	drain := func() error {
		for progress := true; progress && heldCount > 0; {
			progress = false
			for i := range held {
				for heldHead[i] < len(held[i]) && !al.Blocked(i) {
					m := held[i][heldHead[i]]
					held[i][heldHead[i]] = shuffle.Msg{}
					heldHead[i]++
					heldCount--
					if heldHead[i] == len(held[i]) {
						held[i], heldHead[i] = held[i][:0], 0
					}
					if err := handle(i, m); err != nil {
						return err
					}
					progress = true
				}
			}
		}
		return nil
	}
	defer sc.closeMaterializations()
	sinceFlush := 0 // messages taken since the counters were flushed
	for al.Live() > 0 {
		next := sc.nextTimer()
		if sc.job.dlog != nil {
			// Step a materialization while no record comes, too: a step
			// per record batch alone would take minutes over a large
			// state at a low rate.
			// A timer armed to fire by then is kept: no re-arming per
			// batch while a materialization serializes.
			if d := sc.materializeDue(); d > 0 {
				now := time.Now().UnixNano()
				if armed > now && armed <= now+int64(d) && (next == 0 || armed <= next) {
					next = armed
				} else if soon := now + int64(d); next == 0 || soon < next {
					next = soon
				}
			}
		}
		if next != armed {
			armed = next
			d := time.Hour
			if next != 0 {
				d = max(time.Duration(next-time.Now().UnixNano()), 0)
			}
			timer.Reset(d)
		}
		if dirty && len(ib.C()) == 0 {
			// Nothing more to batch with now: hand on what waits.
			dirty = false
			if err := sc.flushOut(); err != nil {
				return err
			}
		}
		// A message is taken without waiting if one is there; otherwise
		// the counters are flushed and the wait is idle time.
		var e inbox.Envelope[shuffle.Msg]
		got := false
		select {
		case e = <-ib.C():
			got = true
		case <-sc.ctx.Done():
			return sc.ctx.Err()
		case <-timer.C:
			if err := onTimer(); err != nil {
				return err
			}
			continue
		default:
		}
		if got {
			if sinceFlush++; sinceFlush >= flushEvery {
				sinceFlush = 0
				sc.flushCounters()
			}
		} else {
			sinceFlush = 0
			sc.flushCounters()
			waited := time.Now()
			select {
			case e = <-ib.C():
			case <-sc.ctx.Done():
				return sc.ctx.Err()
			case <-timer.C:
				sc.clk.idle += int64(time.Since(waited))
				if err := onTimer(); err != nil {
					return err
				}
				continue
			}
			sc.clk.idle += int64(time.Since(waited))
		}
		if sc.job.dlog != nil {
			if err := sc.materialize(); err != nil {
				return err
			}
		}
		if al.Blocked(e.From) {
			held[e.From] = append(held[e.From], e.Msg)
			heldCount++
			continue
		}
		if err := handle(e.From, e.Msg); err != nil {
			return err
		}
		if heldCount > 0 {
			if err := drain(); err != nil {
				return err
			}
		}
	}
	if err := sc.controlOut(shuffle.Msg{Kind: shuffle.Terminate}); err != nil {
		return err
	}
	sc.flushCounters()
	return nil
}
