package runtime

import (
	"fmt"
	"math"
	"time"

	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/connector"
)

// trigger asks a source subtask to take a checkpoint.
type trigger struct {
	id    uint64
	final bool
}

// runSource is the loop of a source subtask: read its splits round-robin,
// push records into the chain, emit watermarks when a strategy is set, and
// inject barriers when the coordinator triggers a checkpoint.
func RunSource[T any](sc *Subtask, entry *SourceEntry, src connector.Source[T], push Push[T], wm *WatermarkSpec[T]) error {
	defer sc.closeSinks()
	type split struct {
		id     int
		r      connector.SplitReader[T]
		pos    []byte
		done   bool
		reader bool
		clock  splitClock
	}
	restored := map[int]checkpoint.SplitState{}
	if m := sc.job.restored; m != nil {
		for _, s := range m.Sources {
			if s.Name == entry.name {
				for _, sp := range s.Splits {
					restored[int(sp.Split)] = sp
				}
			}
		}
	}
	var splits []*split
	// Registered before opening, so readers opened before a failing
	// OpenSplit are closed too.
	defer func() {
		for _, sp := range splits {
			if sp.reader {
				_ = sp.r.Close()
			}
		}
	}()
	for s := sc.subtask; s < entry.splits; s += sc.par {
		sp := &split{id: s, clock: newSplitClock()}
		if r, ok := restored[s]; ok {
			sp.pos, sp.done = r.Pos, r.Done
		}
		if !sp.done {
			r, err := src.OpenSplit(sc.ctx, s, sp.pos)
			if err != nil {
				return fmt.Errorf("eddy: source %s split %d: %w", entry.name, s, err)
			}
			sp.r, sp.reader = r, true
		}
		splits = append(splits, sp)
	}
	sc.running()
	// Source lag, for the metrics: published between passes, summed over
	// the splits whose readers know theirs (connector.Lagger).
	var laggers []connector.Lagger
	for _, sp := range splits {
		if l, ok := sp.r.(connector.Lagger); ok && sp.reader {
			laggers = append(laggers, l)
		}
	}
	publishLag := func() {
		if len(laggers) == 0 || sc.m == nil {
			return
		}
		total, known := int64(0), false
		for _, l := range laggers {
			if n, ok := l.Lag(); ok {
				total, known = total+n, true
			}
		}
		if known {
			sc.m.SourceLag.Store(total)
		}
	}
	triggers := sc.job.triggers[entry.index][sc.subtask]
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
	// Watermarks: the minimum over splits that are neither done nor idle.
	lastWM, idleSent := int64(math.MinInt64), false
	slots := sc.job.wmSlots[entry.index]
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
			slots[sc.subtask].Store(excluded)
			if !idleSent {
				idleSent = true
				return sc.controlOut(msg{kind: msgIdle, batch: true})
			}
			return nil
		}
		if idleSent {
			idleSent = false
			if err := sc.controlOut(msg{kind: msgIdle, batch: false}); err != nil {
				return err
			}
		}
		if combined > lastWM && combined != math.MinInt64 {
			lastWM = combined
			sc.m.Watermark.Store(combined)
			slots[sc.subtask].Store(combined)
			return sc.controlOut(msg{kind: msgWatermark, id: uint64(combined)})
		}
		if progress && slots[sc.subtask].Load() == excluded {
			// Excluded while idle or while it had nothing to read.
			slots[sc.subtask].Store(lastWM)
		}
		return nil
	}
	defer slots[sc.subtask].Store(excluded)
	var rec, zero T
	finished := false
	// pause is the wait of a pass that read nothing: one timer, reset per
	// wait (time.After would allocate one each time).
	pause := time.NewTimer(time.Hour)
	defer pause.Stop()
	// A trigger taken while waiting is handled at the top of the loop.
	var got *trigger
	passes := 0 // passes over the splits that read something, to flush counters every few
	for {
		if got == nil {
			select {
			case t := <-triggers:
				got = &t
			case <-sc.ctx.Done():
				return sc.ctx.Err()
			default:
			}
		}
		if got != nil {
			t := *got
			got = nil
			if err := sc.checkpoint(t.id, t.final, positions()); err != nil {
				return err
			}
			if t.final {
				if err := sc.controlOut(msg{kind: msgTerminate}); err != nil {
					return err
				}
				sc.flushCounters()
				return nil
			}
			continue
		}
		if finished {
			sc.flushCounters()
			waited := time.Now()
			select {
			case t := <-triggers:
				got = &t
			case <-sc.ctx.Done():
				return sc.ctx.Err()
			}
			sc.clk.idle += int64(time.Since(waited))
			continue
		}
		progress, active := false, false
		paused := wm != nil && wm.Align > 0 && !aligned(slots, sc.subtask, lastWM, wm.Align)
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
				// reader must not reuse the memory of one it returned.
				rec = zero
				st, err := sp.r.Next(&rec)
				if err != nil {
					return fmt.Errorf("eddy: source %s split %d: %w", entry.name, sp.id, err)
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
				sc.recordsIn++
				ts := int64(NoTimestamp)
				if wm != nil {
					ts = wm.TS(&rec).UnixNano()
					if ts > sp.clock.maxTs {
						sp.clock.maxTs = ts
					}
				}
				if err := push(ts, &rec); err != nil {
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
			slots[sc.subtask].Store(excluded)
			if err := sc.controlOut(msg{kind: msgEndOfData}); err != nil {
				return err
			}
			sc.flushCounters()
			if err := sc.job.sourceFinished(sc.ctx); err != nil {
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
				slots[sc.subtask].Store(excluded)
			}
			if err := sc.flushOut(); err != nil {
				return err
			}
			sc.flushCounters()
			publishLag()
			pause.Reset(time.Millisecond)
			waited := time.Now()
			select {
			case t := <-triggers:
				got = &t
			case <-sc.ctx.Done():
				return sc.ctx.Err()
			case <-pause.C:
			}
			sc.clk.idle += int64(time.Since(waited))
		} else if passes++; passes%4 == 0 {
			sc.flushCounters()
			if passes%64 == 0 {
				publishLag()
			}
		}
	}
}
