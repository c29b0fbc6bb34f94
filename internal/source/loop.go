package source

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/internal/cacheline"
	"github.com/eddyflow/eddy/internal/shuffle"
)

// Trigger asks a source subtask to take checkpoint ID (the job's last one
// when Final).
type Trigger struct {
	ID    uint64
	Final bool
}

// Host is what the loop needs of the subtask that runs it.
type Host interface {
	// Context is the attempt's: the loop returns its error once it is done.
	Context() context.Context
	// Running says the subtask's splits are open: it is restored.
	Running()
	// Checkpoint takes checkpoint id at this point of the input, with the
	// splits' positions, and sends its barrier downstream.
	Checkpoint(id uint64, final bool, splits []checkpoint.SplitState) error
	// Control sends m to every output of the subtask, after its records.
	Control(m shuffle.Msg) error
	// FlushOut sends every partly filled output batch.
	FlushOut() error
	// FlushCounters publishes the subtask's counters (RecordsIn, Idle).
	FlushCounters()
	// Finished tells the coordinator that the subtask's input is exhausted.
	Finished() error
}

// Loop is one subtask of a source: the splits it reads and where their
// records, watermarks and counts go.
type Loop[T any] struct {
	Name        string // the source's id, for errors
	Splits      int    // the source's number of splits; the subtask reads every Parallelism-th from Subtask
	Subtask     int
	Parallelism int
	Source      connector.Source[T]
	// Restored are the source's splits in the restored checkpoint (any
	// subtask's), nil without one.
	Restored []checkpoint.SplitState
	Push     shuffle.Push[T]
	// Watermarks is the watermark strategy, nil for none.
	Watermarks *WatermarkSpec[T]
	// Reuse hands the readers the previous record to fill (its memory
	// reused) instead of a zeroed one: Push must not keep the record past
	// its return.
	Reuse    bool
	Triggers <-chan Trigger
	// Slots are the watermarks of every subtask of the source, for
	// alignment (NewSlots).
	Slots []atomic.Int64
	// Counters of the subtask, published by Host.FlushCounters: records
	// read and time spent waiting (ns).
	RecordsIn, Idle *int64
	// Gauges of the subtask: its watermark and its splits' lag
	// (connector.Lagger).
	Watermark, Lag *atomic.Int64
}

type split[T any] struct {
	id     int
	r      connector.SplitReader[T]
	pos    []byte
	done   bool
	reader bool
	clock  splitClock
}

// Run reads the subtask's splits round-robin, pushes records into the
// chain, emits watermarks when a strategy is set, and injects barriers
// when the coordinator triggers a checkpoint, until the final checkpoint
// after the end of its input, or an error.
func (l *Loop[T]) Run(h Host) error {
	ctx := h.Context()
	restored := map[int]checkpoint.SplitState{}
	for _, sp := range l.Restored {
		restored[int(sp.Split)] = sp
	}
	var splits []*split[T]
	// Registered before opening, so readers opened before a failing
	// OpenSplit are closed too.
	defer func() {
		for _, sp := range splits {
			if sp.reader {
				_ = sp.r.Close()
			}
		}
	}()
	for s := l.Subtask; s < l.Splits; s += l.Parallelism {
		sp := cacheline.New[split[T]]() // its clock is written per record
		sp.id, sp.clock = s, newSplitClock()
		if r, ok := restored[s]; ok {
			sp.pos, sp.done = r.Pos, r.Done
		}
		if !sp.done {
			r, err := l.Source.OpenSplit(ctx, s, sp.pos)
			if err != nil {
				return fmt.Errorf("eddy: source %s split %d: %w", l.Name, s, err)
			}
			sp.r, sp.reader = r, true
		}
		splits = append(splits, sp)
	}
	h.Running()
	// Source lag, for the metrics: published between passes, summed over
	// the splits whose readers know theirs (connector.Lagger).
	var laggers []connector.Lagger
	for _, sp := range splits {
		if lg, ok := sp.r.(connector.Lagger); ok && sp.reader {
			laggers = append(laggers, lg)
		}
	}
	publishLag := func() {
		if len(laggers) == 0 || l.Lag == nil {
			return
		}
		total, known := int64(0), false
		for _, lg := range laggers {
			if n, ok := lg.Lag(); ok {
				total, known = total+n, true
			}
		}
		if known {
			l.Lag.Store(total)
		}
	}
	positions := func() []checkpoint.SplitState {
		out := make([]checkpoint.SplitState, len(splits))
		for i, sp := range splits {
			pos := sp.pos
			if sp.reader {
				pos = sp.r.Position()
			}
			out[i] = checkpoint.SplitState{Split: uint32(sp.id), Pos: append([]byte(nil), pos...), Done: sp.done}
		}
		return out
	}
	wm := l.Watermarks
	slot := &l.Slots[l.Subtask]
	// Watermarks: the minimum over splits that are neither done nor idle.
	lastWM, idleSent := int64(math.MinInt64), false
	emitWatermark := func(now time.Time, progress bool) error {
		if wm == nil {
			return nil
		}
		combined, active, open := int64(math.MaxInt64), 0, 0
		for _, sp := range splits {
			if sp.done {
				continue
			}
			open++
			if wm.IdleAfter > 0 && now.Sub(sp.clock.lastSeen) > wm.IdleAfter {
				continue
			}
			active++
			combined = min(combined, sp.clock.watermark(wm.Delay))
		}
		if open == 0 {
			return nil // end of data carries the final watermark
		}
		if active == 0 {
			slot.Store(Excluded)
			if !idleSent {
				idleSent = true
				return h.Control(shuffle.Msg{Kind: shuffle.Idle, Batch: true})
			}
			return nil
		}
		if idleSent {
			idleSent = false
			if err := h.Control(shuffle.Msg{Kind: shuffle.Idle, Batch: false}); err != nil {
				return err
			}
		}
		if combined > lastWM && combined != math.MinInt64 {
			lastWM = combined
			if l.Watermark != nil {
				l.Watermark.Store(combined)
			}
			slot.Store(combined)
			return h.Control(shuffle.Msg{Kind: shuffle.Watermark, ID: uint64(combined)})
		}
		if progress && slot.Load() == Excluded {
			// Excluded while idle or while it had nothing to read.
			slot.Store(lastWM)
		}
		return nil
	}
	defer slot.Store(Excluded)
	// The record the readers fill is written per record: on cache lines
	// of its own (package cacheline).
	rec := cacheline.New[T]()
	var zero T
	finished := false
	// pause is the wait of a pass that read nothing: one timer, reset per
	// wait (time.After would allocate one each time).
	pause := time.NewTimer(time.Hour)
	defer pause.Stop()
	// A trigger taken while waiting is handled at the top of the loop.
	var got *Trigger
	passes := 0 // passes over the splits that read something, to flush counters every few
	for {
		if got == nil {
			select {
			case t := <-l.Triggers:
				got = &t
			case <-ctx.Done():
				return ctx.Err()
			default:
			}
		}
		if got != nil {
			t := *got
			got = nil
			if err := h.Checkpoint(t.ID, t.Final, positions()); err != nil {
				return err
			}
			if t.Final {
				if err := h.Control(shuffle.Msg{Kind: shuffle.Terminate}); err != nil {
					return err
				}
				h.FlushCounters()
				return nil
			}
			continue
		}
		if finished {
			h.FlushCounters()
			waited := time.Now()
			select {
			case t := <-l.Triggers:
				got = &t
			case <-ctx.Done():
				return ctx.Err()
			}
			*l.Idle += int64(time.Since(waited))
			continue
		}
		progress, active := false, false
		paused := wm != nil && wm.Align > 0 && !aligned(l.Slots, l.Subtask, lastWM, wm.Align)
		for _, sp := range splits {
			if sp.done {
				continue
			}
			active = true
			if paused {
				break
			}
			got := false
			for n := 0; n < 256; n++ {
				// Records are copied shallowly into shuffle batches, so a
				// reader must not reuse the memory of one it returned,
				// unless nothing downstream keeps records (Reuse).
				if !l.Reuse {
					*rec = zero
				}
				st, err := sp.r.Next(rec)
				if err != nil {
					return fmt.Errorf("eddy: source %s split %d: %w", l.Name, sp.id, err)
				}
				if st == connector.Idle {
					break
				}
				if st == connector.End {
					sp.done = true
					sp.pos = sp.r.Position()
					break
				}
				got = true
				*l.RecordsIn++
				ts := int64(shuffle.NoTimestamp)
				if wm != nil {
					ts = wm.TS(rec).UnixNano()
					if ts > sp.clock.maxTs {
						sp.clock.maxTs = ts
					}
				}
				if err := l.Push(ts, rec); err != nil {
					return err
				}
			}
			if got {
				progress = true
				if wm != nil && wm.IdleAfter > 0 {
					sp.clock.lastSeen = time.Now()
				}
			}
		}
		if wm != nil {
			if err := emitWatermark(time.Now(), progress); err != nil {
				return err
			}
		}
		if !active {
			// Every split is exhausted: end of data (which carries the
			// final watermark), then wait for the final checkpoint.
			finished = true
			slot.Store(Excluded)
			if err := h.Control(shuffle.Msg{Kind: shuffle.EndOfData}); err != nil {
				return err
			}
			h.FlushCounters()
			if err := h.Finished(); err != nil {
				return err
			}
			continue
		}
		if !progress {
			if !paused && wm != nil && wm.Align > 0 && !wm.AlignHold {
				// Nothing to read now: this subtask must not hold the
				// others back while it waits (a Kafka partition with no
				// new records). Its next records put its watermark back
				// (emitWatermark).
				slot.Store(Excluded)
			}
			if err := h.FlushOut(); err != nil {
				return err
			}
			h.FlushCounters()
			publishLag()
			pause.Reset(time.Millisecond)
			waited := time.Now()
			select {
			case t := <-l.Triggers:
				got = &t
			case <-ctx.Done():
				return ctx.Err()
			case <-pause.C:
			}
			*l.Idle += int64(time.Since(waited))
		} else if passes++; passes%4 == 0 {
			h.FlushCounters()
			if passes%64 == 0 {
				publishLag()
			}
		}
	}
}
