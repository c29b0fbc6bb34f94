package eddy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"
	"unsafe"

	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/state"
)

type contextT = context.Context

func anyPtr[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }

// msgKind is what travels on a shuffle channel besides records.
type msgKind uint8

const (
	msgData      msgKind = iota // a batch of records
	msgBarrier                  // checkpoint barrier
	msgEndOfData                // the sender's inputs are exhausted; more barriers follow
	msgTerminate                // the sender is done; nothing follows
)

type msg struct {
	kind  msgKind
	id    uint64
	batch any
}

// keyedBatch carries records with their keys across a shuffle. Key bytes
// share one buffer, so a batch costs no allocation once pooled.
type keyedBatch[K comparable, T any] struct {
	keys   []K
	kgs    []int32
	keyBuf []byte
	keyEnd []int32
	recs   []T
}

func (b *keyedBatch[K, T]) key(i int) []byte {
	start := int32(0)
	if i > 0 {
		start = b.keyEnd[i-1]
	}
	return b.keyBuf[start:b.keyEnd[i]]
}

func (b *keyedBatch[K, T]) reset() {
	b.keys, b.kgs, b.keyBuf, b.keyEnd, b.recs = b.keys[:0], b.kgs[:0], b.keyBuf[:0], b.keyEnd[:0], b.recs[:0]
}

// outWriter is the shuffle output of a stage.
type outWriter interface {
	flush() error
	control(m msg) error
}

// shuffleWriter partitions records by key group over the next stage's
// subtasks.
type shuffleWriter[K comparable, T any] struct {
	sc        *subtaskCtx
	e         *edge
	outs      []chan msg
	batches   []*keyedBatch[K, T]
	key       func(*T) K
	enc       func([]byte, *K) []byte
	scratch   []byte
	maxPar    int
	par       int
	batchSize int
}

func newShuffleWriter[K comparable, T any](sc *subtaskCtx, e *edge, key func(*T) K, enc func([]byte, *K) []byte) *shuffleWriter[K, T] {
	outs := sc.job.chans[e][sc.subtask]
	return &shuffleWriter[K, T]{sc: sc, e: e, outs: outs, batches: make([]*keyedBatch[K, T], len(outs)),
		key: key, enc: enc, maxPar: sc.job.env.cfg.maxParallelism, par: len(outs), batchSize: sc.job.env.cfg.batchSize}
}

func (w *shuffleWriter[K, T]) push(rec *T) error {
	k := w.key(rec)
	w.scratch = w.enc(w.scratch[:0], &k)
	kg := state.KeyGroupFor(w.scratch, w.maxPar)
	j := state.SubtaskFor(kg, w.maxPar, w.par)
	b := w.batches[j]
	if b == nil {
		b = w.e.pool.Get().(*keyedBatch[K, T])
		w.batches[j] = b
	}
	b.keys = append(b.keys, k)
	b.kgs = append(b.kgs, int32(kg))
	b.keyBuf = append(b.keyBuf, w.scratch...)
	b.keyEnd = append(b.keyEnd, int32(len(b.keyBuf)))
	b.recs = append(b.recs, *rec)
	if len(b.recs) >= w.batchSize {
		w.batches[j] = nil
		return w.sc.send(w.outs[j], msg{kind: msgData, batch: b})
	}
	return nil
}

func (w *shuffleWriter[K, T]) flush() error {
	for j, b := range w.batches {
		if b != nil && len(b.recs) > 0 {
			w.batches[j] = nil
			if err := w.sc.send(w.outs[j], msg{kind: msgData, batch: b}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *shuffleWriter[K, T]) control(m msg) error {
	if err := w.flush(); err != nil {
		return err
	}
	for _, ch := range w.outs {
		if err := w.sc.send(ch, m); err != nil {
			return err
		}
	}
	return nil
}

// subtaskCtx is one subtask of a stage in one run attempt.
type subtaskCtx struct {
	ctx        context.Context
	job        *jobRun
	st         *stage
	subtask    int
	par        int
	out        outWriter
	keyed      []keyedOp
	sinks      []sinkWriter
	timers     []timerHook
	recordsIn  int64
	recordsOut int64
}

type keyedOp struct {
	uid     string
	backend *state.Backend
}

type sinkWriter struct {
	entry *sinkEntry
	w     interface {
		PreCommit(uint64) ([]byte, error)
		Close() error
	}
}

type timerHook struct {
	ts   *timerService
	fire func(kb []byte, kg int, at int64) error
}

func (sc *subtaskCtx) send(ch chan msg, m msg) error {
	select {
	case ch <- m:
		return nil
	case <-sc.ctx.Done():
		return sc.ctx.Err()
	}
}

func (sc *subtaskCtx) flushCounters() {
	s := &sc.job.env.stats
	if sc.recordsIn != 0 {
		s.recordsIn.Add(sc.recordsIn)
		sc.recordsIn = 0
	}
	if sc.recordsOut != 0 {
		s.recordsOut.Add(sc.recordsOut)
		sc.recordsOut = 0
	}
}

// restoreKeyed loads the keyed state of operator uid from the restored
// checkpoint, reading every part whose key groups overlap this subtask's.
func (sc *subtaskCtx) restoreKeyed(uid string, b *state.Backend) error {
	m := sc.job.restored
	if m == nil {
		return nil
	}
	start, end := b.KeyGroups()
	for _, op := range m.Operators {
		if op.Name != uid {
			continue
		}
		if int(op.MaxParallelism) != b.MaxParallelism() {
			return &permanentError{fmt.Errorf("eddy: operator %s: checkpoint %d has %d key groups, the job %d; the max parallelism of a job cannot change", uid, m.ID, op.MaxParallelism, b.MaxParallelism())}
		}
		var parts [][]byte
		for _, p := range op.Parts {
			if int(p.KeyGroupEnd) <= start || int(p.KeyGroupStart) >= end {
				continue
			}
			data, err := sc.job.blobs.Get(sc.ctx, p.Blob)
			if err != nil {
				return &restoreError{id: m.ID, err: fmt.Errorf("operator %s: state part %s: %w", uid, p.Blob, err)}
			}
			parts = append(parts, data)
		}
		if err := b.Restore(parts); err != nil {
			var re *state.RestoreError
			if errors.As(err, &re) {
				return &permanentError{fmt.Errorf("eddy: cannot restore operator %s from checkpoint %d (the checkpoint is left as it is): %w", uid, m.ID, err)}
			}
			return err
		}
	}
	return nil
}

// restoreError is a checkpoint that turned out unreadable while restoring;
// the job falls back to the one before it.
type restoreError struct {
	id  uint64
	err error
}

func (e *restoreError) Error() string {
	return fmt.Sprintf("restoring checkpoint %d: %v", e.id, e.err)
}

// checkpoint runs at an aligned barrier: snapshot keyed state, pre-commit
// sinks, forward the barrier, and acknowledge to the coordinator. State is
// written to storage in the background; the ack follows the write.
func (sc *subtaskCtx) checkpoint(id uint64, final bool, splits []checkpoint.SplitState) error {
	a := ack{stage: sc.st.id, subtask: sc.subtask, id: id, splits: splits, sinkTxns: map[string][]byte{}}
	type pending struct {
		op   keyedOp
		data []byte
	}
	var snaps []pending
	for _, k := range sc.keyed {
		data, err := k.backend.Snapshot()
		if err != nil {
			return fmt.Errorf("eddy: snapshot of %s subtask %d: %w", k.uid, sc.subtask, err)
		}
		a.entries += int64(k.backend.Entries())
		snaps = append(snaps, pending{k, data})
	}
	for _, s := range sc.sinks {
		txn, err := s.w.PreCommit(id)
		if err != nil {
			return fmt.Errorf("eddy: sink %s subtask %d pre-commit of checkpoint %d: %w", s.entry.name, sc.subtask, id, err)
		}
		if txn != nil {
			a.sinkTxns[s.entry.name] = txn
		}
	}
	kind := msgBarrier
	if sc.out != nil {
		if err := sc.out.control(msg{kind: kind, id: id, batch: final}); err != nil {
			return err
		}
	}
	sc.flushCounters()
	job := sc.job
	if len(snaps) == 0 || job.storage == nil {
		return job.sendAck(sc.ctx, a)
	}
	job.wg.Add(1)
	go func() {
		defer job.wg.Done()
		for _, p := range snaps {
			start, end := p.op.backend.KeyGroups()
			name := job.storage.StateBlobName(id, p.op.uid, sc.subtask)
			if err := job.blobs.Put(sc.ctx, name, p.data); err != nil {
				a.err = fmt.Errorf("writing state of %s subtask %d: %w", p.op.uid, sc.subtask, err)
				break
			}
			a.parts = append(a.parts, opPart{uid: p.op.uid, part: checkpoint.StatePart{Subtask: uint32(sc.subtask),
				KeyGroupStart: uint32(start), KeyGroupEnd: uint32(end), Blob: name, Size: int64(len(p.data))}})
			a.bytes += int64(len(p.data))
		}
		_ = job.sendAck(sc.ctx, a)
	}()
	return nil
}

// fireTimers runs due processing-time timers.
func (sc *subtaskCtx) fireTimers() error {
	if len(sc.timers) == 0 {
		return nil
	}
	now := time.Now().UnixNano()
	for _, t := range sc.timers {
		if err := t.ts.fireDue(now, t.fire); err != nil {
			return err
		}
	}
	return nil
}

// nextTimer is the earliest pending timer, or 0.
func (sc *subtaskCtx) nextTimer() int64 {
	next := int64(0)
	for _, t := range sc.timers {
		if n := t.ts.next(); n != 0 && (next == 0 || n < next) {
			next = n
		}
	}
	return next
}

func (sc *subtaskCtx) closeSinks() {
	for _, s := range sc.sinks {
		_ = s.w.Close()
	}
}

// runReceiver is the loop of a stage fed by a shuffle: it aligns barriers
// across its inputs, snapshots at each aligned barrier, and ends when every
// input has terminated.
func (sc *subtaskCtx) runReceiver(process func(any) error) error {
	defer sc.closeSinks()
	inputs := make([]chan msg, sc.st.input.from.parallelism)
	for i := range inputs {
		inputs[i] = sc.job.chans[sc.st.input][i][sc.subtask]
	}
	n := len(inputs)
	cases := make([]reflect.SelectCase, n+2)
	for i, ch := range inputs {
		cases[i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)}
	}
	cases[n] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(sc.ctx.Done())}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	cases[n+1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)}
	blocked := make([]bool, n)
	ended := make([]bool, n)
	eod := make([]bool, n)
	var barrierID uint64
	var barrierFinal bool
	barriers, eods, live := 0, 0, n
	armed := int64(0)
	for live > 0 {
		if next := sc.nextTimer(); next != armed {
			armed = next
			d := time.Hour
			if next != 0 {
				d = max(time.Duration(next-time.Now().UnixNano()), 0)
			}
			timer.Reset(d)
		}
		var m msg
		var from int
		if n == 1 && !blocked[0] && len(sc.timers) == 0 {
			select {
			case m = <-inputs[0]:
			case <-sc.ctx.Done():
				return sc.ctx.Err()
			}
		} else {
			for i := range inputs {
				if blocked[i] || ended[i] {
					cases[i].Chan = reflect.Value{}
				} else {
					cases[i].Chan = reflect.ValueOf(inputs[i])
				}
			}
			chosen, v, _ := reflect.Select(cases)
			switch chosen {
			case n:
				return sc.ctx.Err()
			case n + 1:
				armed = -1
				if err := sc.fireTimers(); err != nil {
					return err
				}
				continue
			}
			m, from = v.Interface().(msg), chosen
		}
		switch m.kind {
		case msgData:
			if err := process(m.batch); err != nil {
				return err
			}
			if sc.out != nil {
				if err := sc.out.flush(); err != nil {
					return err
				}
			}
		case msgBarrier:
			if barriers == 0 {
				barrierID, barrierFinal = m.id, m.batch.(bool)
			} else if m.id != barrierID {
				return fmt.Errorf("eddy: subtask %d of stage %d got barrier %d while aligning %d", sc.subtask, sc.st.id, m.id, barrierID)
			}
			blocked[from] = true
			barriers++
			if barriers == live {
				if err := sc.checkpoint(barrierID, barrierFinal, nil); err != nil {
					return err
				}
				clear(blocked)
				barriers = 0
			}
		case msgEndOfData:
			eod[from] = true
			eods++
			if eods == n {
				if sc.out != nil {
					if err := sc.out.control(msg{kind: msgEndOfData}); err != nil {
						return err
					}
				}
			}
		case msgTerminate:
			if blocked[from] {
				return fmt.Errorf("eddy: input %d of stage %d terminated during barrier alignment", from, sc.st.id)
			}
			ended[from] = true
			live--
		}
	}
	if sc.out != nil {
		if err := sc.out.control(msg{kind: msgTerminate}); err != nil {
			return err
		}
	}
	sc.flushCounters()
	return nil
}

// trigger asks a source subtask to take a checkpoint.
type trigger struct {
	id    uint64
	final bool
}

// runSource is the loop of a source subtask: read its splits round-robin,
// push records into the chain, and inject barriers when the coordinator
// triggers a checkpoint.
func runSource[T any](sc *subtaskCtx, entry *sourceEntry, src Source[T], push func(*T) error) error {
	defer sc.closeSinks()
	type split struct {
		id     int
		r      SplitReader[T]
		pos    []byte
		done   bool
		reader bool
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
	for s := sc.subtask; s < entry.splits; s += sc.par {
		sp := &split{id: s}
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
	defer func() {
		for _, sp := range splits {
			if sp.reader {
				_ = sp.r.Close()
			}
		}
	}()
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
	var rec, zero T
	finished := false
	for {
		select {
		case t := <-triggers:
			if err := sc.checkpoint(t.id, t.final, positions()); err != nil {
				return err
			}
			if t.final {
				if sc.out != nil {
					if err := sc.out.control(msg{kind: msgTerminate}); err != nil {
						return err
					}
				}
				sc.flushCounters()
				return nil
			}
			continue
		case <-sc.ctx.Done():
			return sc.ctx.Err()
		default:
		}
		if finished {
			select {
			case t := <-triggers:
				triggers <- t // handled at the top of the loop
			case <-sc.ctx.Done():
				return sc.ctx.Err()
			}
			continue
		}
		progress, active := false, false
		for _, sp := range splits {
			if sp.done {
				continue
			}
			active = true
			for n := 0; n < 256; n++ {
				// Records are copied shallowly into shuffle batches, so a
				// reader must not reuse the memory of one it returned.
				rec = zero
				st, err := sp.r.Next(&rec)
				if err != nil {
					return fmt.Errorf("eddy: source %s split %d: %w", entry.name, sp.id, err)
				}
				if st == Idle {
					break
				}
				if st == End {
					sp.done = true
					sp.pos = sp.r.Position()
					break
				}
				progress = true
				sc.recordsIn++
				if err := push(&rec); err != nil {
					return err
				}
			}
		}
		if !active {
			// Every split is exhausted: end of data, then wait for the
			// final checkpoint.
			finished = true
			if sc.out != nil {
				if err := sc.out.control(msg{kind: msgEndOfData}); err != nil {
					return err
				}
			}
			sc.flushCounters()
			if err := sc.job.sourceFinished(sc.ctx); err != nil {
				return err
			}
			continue
		}
		if !progress {
			if sc.out != nil {
				if err := sc.out.flush(); err != nil {
					return err
				}
			}
			sc.flushCounters()
			select {
			case t := <-triggers:
				triggers <- t
			case <-sc.ctx.Done():
				return sc.ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
}
