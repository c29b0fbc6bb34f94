package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/internal/align"
	"github.com/eddyflow/eddy/internal/bufpool"
	"github.com/eddyflow/eddy/internal/errs"
	"github.com/eddyflow/eddy/internal/inbox"
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
	msgWatermark                // event time has reached id (an int64); to an outWriter only: it rides in batches
	msgIdle                     // the sender is idle (batch true) or active again (false)
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
	ts     []int64
	recs   []T
	// Watermarks in the batch, in order: each holds for the records after
	// those before it, as if it had travelled between them.
	marks []mark
}

// mark is a watermark inside a batch: event time reaches wm before record
// at.
type mark struct {
	at int32
	wm int64
}

func (b *keyedBatch[K, T]) key(i int) []byte {
	start := int32(0)
	if i > 0 {
		start = b.keyEnd[i-1]
	}
	return b.keyBuf[start:b.keyEnd[i]]
}

func (b *keyedBatch[K, T]) reset() {
	b.keys, b.kgs, b.keyBuf, b.keyEnd, b.ts, b.recs = b.keys[:0], b.kgs[:0], b.keyBuf[:0], b.keyEnd[:0], b.ts[:0], b.recs[:0]
	b.marks = b.marks[:0]
}

// outWriter is the shuffle output of a stage.
type outWriter interface {
	flush() error
	control(m msg) error
	watermark(wm int64) error
}

// shuffleWriter partitions records by key group over the next stage's
// subtasks. A watermark travels inside the batches, at its place among the
// records (a mark), so it neither is a message of its own nor flushes a
// partial batch, and the receiver sees records and event time in the order
// they were sent; a newer watermark with no record in between replaces
// one, and an output already told as much is not told again. A batch that
// holds a mark is sent once full, at a flush, or once staleAfter records
// have passed since its mark (so an output that gets few records still
// sees event time advance).
type shuffleWriter[K comparable, T any] struct {
	sc         *Subtask
	e          *Edge
	outs       []*inbox.Inbox[msg]
	batches    []*keyedBatch[K, T]
	sent       []int64 // per output, the last watermark marked
	marked     int     // outputs whose batch holds a mark
	waiting    int     // records pushed since the oldest unsent mark; -1: none
	staleAfter int
	key        func(*T) K
	enc        func([]byte, *K) []byte
	scratch    []byte
	cur        K // the current key; a field so encoding it does not allocate
	maxPar     int
	par        int
	batchSize  int
}

func newShuffleWriter[K comparable, T any](sc *Subtask, e *Edge, key func(*T) K, enc func([]byte, *K) []byte) *shuffleWriter[K, T] {
	outs := sc.job.inboxes[e.to]
	w := &shuffleWriter[K, T]{sc: sc, e: e, outs: outs, batches: make([]*keyedBatch[K, T], len(outs)),
		sent: make([]int64, len(outs)), waiting: -1,
		key: key, enc: enc, maxPar: sc.job.env.cfg.MaxParallelism, par: len(outs), batchSize: sc.job.env.cfg.BatchSize}
	for j := range outs {
		w.sent[j] = NoTimestamp
	}
	w.staleAfter = w.batchSize * len(outs)
	return w
}

// batch returns output j's open batch, taking a recycled one.
func (w *shuffleWriter[K, T]) batch(j int) *keyedBatch[K, T] {
	b := w.batches[j]
	if b == nil {
		b = w.e.getBatch().(*keyedBatch[K, T])
		w.batches[j] = b
	}
	return b
}

func (w *shuffleWriter[K, T]) push(ts int64, rec *T) error {
	w.cur = w.key(rec)
	w.scratch = w.enc(w.scratch[:0], &w.cur)
	kg := state.KeyGroupFor(w.scratch, w.maxPar)
	j := state.SubtaskFor(kg, w.maxPar, w.par)
	b := w.batch(j)
	b.keys = append(b.keys, w.cur)
	b.kgs = append(b.kgs, int32(kg))
	b.keyBuf = append(b.keyBuf, w.scratch...)
	b.keyEnd = append(b.keyEnd, int32(len(b.keyBuf)))
	b.ts = append(b.ts, ts)
	b.recs = append(b.recs, *rec)
	if len(b.recs) >= w.batchSize {
		if err := w.sendBatch(j); err != nil {
			return err
		}
	}
	if w.waiting >= 0 {
		if w.waiting++; w.waiting >= w.staleAfter {
			return w.flushMarked()
		}
	}
	return nil
}

// sendBatch hands output j its open batch.
func (w *shuffleWriter[K, T]) sendBatch(j int) error {
	b := w.batches[j]
	w.batches[j] = nil
	if len(b.marks) > 0 {
		if w.marked--; w.marked == 0 {
			w.waiting = -1
		}
	}
	return w.sc.sendTo(w.outs[j], msg{kind: msgData, batch: b})
}

// flush sends every batch that holds records or marks.
func (w *shuffleWriter[K, T]) flush() error {
	for j, b := range w.batches {
		if b != nil && (len(b.recs) > 0 || len(b.marks) > 0) {
			if err := w.sendBatch(j); err != nil {
				return err
			}
		}
	}
	return nil
}

// flushMarked sends the batches that hold marks.
func (w *shuffleWriter[K, T]) flushMarked() error {
	for j, b := range w.batches {
		if b != nil && len(b.marks) > 0 {
			if err := w.sendBatch(j); err != nil {
				return err
			}
		}
	}
	w.waiting = -1
	return nil
}

// watermark marks event time wm in every output's batch, after the records
// pushed so far.
func (w *shuffleWriter[K, T]) watermark(wm int64) error {
	for j := range w.outs {
		if wm <= w.sent[j] {
			continue
		}
		w.sent[j] = wm
		b := w.batch(j)
		at := int32(len(b.recs))
		if n := len(b.marks); n > 0 && b.marks[n-1].at == at {
			b.marks[n-1].wm = wm // no record since: replace it
			continue
		}
		if len(b.marks) == 0 {
			w.marked++
		}
		b.marks = append(b.marks, mark{at: at, wm: wm})
		if w.waiting < 0 {
			w.waiting = 0
		}
	}
	return nil
}

func (w *shuffleWriter[K, T]) control(m msg) error {
	if err := w.flush(); err != nil {
		return err
	}
	for _, ib := range w.outs {
		if err := w.sc.sendTo(ib, m); err != nil {
			return err
		}
	}
	return nil
}

// Subtask is one subtask of a stage in one run attempt.
type Subtask struct {
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
		if err := rt.eventTimers.fireDue(wm, fire); err != nil {
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

// restoreKeyed loads the keyed state of operator uid from the restored
// checkpoint, reading every part whose key groups overlap this subtask's.
func (sc *Subtask) restoreKeyed(uid string, b *state.Backend) ([]checkpoint.StatePart, []checkpoint.LogPart, error) {
	m := sc.job.restored
	if m == nil {
		return nil, nil, nil
	}
	start, end := b.KeyGroups()
	var usedParts []checkpoint.StatePart
	var usedLogs []checkpoint.LogPart
	for _, op := range m.Operators {
		if op.Name != uid {
			continue
		}
		if int(op.MaxParallelism) != b.MaxParallelism() {
			return nil, nil, errs.Kind(errs.IncompatibleState, fmt.Errorf("eddy: operator %s: checkpoint %d has %d key groups, the job %d; the max parallelism of a job cannot change", uid, m.ID, op.MaxParallelism, b.MaxParallelism()), true)
		}
		// The log's objects are fetched while the snapshot parts load.
		var opLogs []checkpoint.LogPart
		for _, l := range op.Changelog {
			if int(l.KeyGroupEnd) <= start || int(l.KeyGroupStart) >= end {
				continue
			}
			opLogs = append(opLogs, l)
		}
		prefetch := sc.prefetchChangelog(opLogs)
		var opParts []checkpoint.StatePart
		for _, p := range op.Parts {
			if int(p.KeyGroupEnd) <= start || int(p.KeyGroupStart) >= end {
				continue
			}
			usedParts = append(usedParts, p)
			if p.Blob != "" {
				opParts = append(opParts, p)
			}
		}
		if err := sc.loadParts(uid, b, opParts); err != nil {
			var re *state.RestoreError
			if errors.As(err, &re) {
				return nil, nil, errs.Kind(errs.IncompatibleState, fmt.Errorf("eddy: cannot restore operator %s from checkpoint %d (the checkpoint is left as it is): %w", uid, m.ID, err), true)
			}
			return nil, nil, restoreFailure(m.ID, fmt.Errorf("operator %s: %w", uid, err))
		}
		usedLogs = append(usedLogs, opLogs...)
		objs, err := prefetch()
		if err != nil {
			return nil, nil, restoreFailure(m.ID, fmt.Errorf("operator %s: reading the changelog: %w", uid, err))
		}
		err = sc.replayChangelog(uid, b, opLogs, objs)
		sc.job.logShared.Release(objs)
		if err != nil {
			return nil, nil, restoreFailure(m.ID, fmt.Errorf("operator %s: replaying the changelog: %w", uid, err))
		}
		// The watermark at the checkpoint, not the parts' older one: the
		// least of the subtasks whose key groups this one takes.
		if wm, ok := checkpointWatermark(op.Watermarks, start, end); ok {
			b.SetWatermark(wm)
		}
	}
	return usedParts, usedLogs, nil
}

// partFetches is how many state parts a subtask fetches at once while
// restoring: a changelog checkpoint has many parts of a few MiB, and object
// storage serves them in parallel far faster than one after another.
const partFetches = 8

// loadParts fetches parts, up to partFetches at a time, and loads each into
// b as it arrives. A part counts only for the key groups it is listed for
// (a changelog subtask may carry a wider old part for its own range); the
// parts of a checkpoint list disjoint key groups, so the order they load in
// does not matter. Each fetcher reuses its buffer once its part is loaded,
// so a restore of many parts holds partFetches of them, not all.
func (sc *Subtask) loadParts(uid string, b *state.Backend, parts []checkpoint.StatePart) error {
	if len(parts) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(sc.ctx)
	defer cancel()
	type fetched struct {
		i      int
		data   []byte
		err    error
		loaded chan struct{} // receives when data may be overwritten
	}
	todo := make(chan int, len(parts))
	for i := range parts {
		todo <- i
	}
	close(todo)
	out := make(chan fetched)
	var wg sync.WaitGroup
	for range min(partFetches, len(parts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			loaded := make(chan struct{})
			for i := range todo {
				if ctx.Err() != nil {
					return
				}
				var data []byte
				var err error
				if parts[i].Size <= maxHedgedPart {
					data, err = sc.job.partReader.GetInto(ctx, sc.job.blobs, parts[i].Blob, &buf, 3)
				} else {
					data, err = blob.GetInto(ctx, sc.job.blobs, parts[i].Blob, &buf)
				}
				select {
				case out <- fetched{i: i, data: data, err: err, loaded: loaded}:
				case <-ctx.Done():
					return
				}
				<-loaded
			}
		}()
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	var first error
	for f := range out {
		if first == nil {
			p, err := parts[f.i], f.err
			if err == nil {
				err = b.RestorePart(f.data, int(p.KeyGroupStart), int(p.KeyGroupEnd))
			}
			if err != nil {
				first = fmt.Errorf("state part %s: %w", p.Blob, err)
				cancel() // the fetchers stop; out closes once they have
			}
		}
		f.loaded <- struct{}{}
	}
	if first == nil && sc.ctx.Err() != nil {
		return sc.ctx.Err()
	}
	return first
}

// maxHedgedPart is the largest state part whose read is hedged: a
// materialized part (a few MiB) waits on the store's latency, a whole
// subtask's snapshot on its bandwidth, which a second read would only
// share.
const maxHedgedPart = 16 << 20

// restoreError is a checkpoint that turned out unreadable while restoring;
// the job falls back to the one before it.
type restoreError struct {
	id  uint64
	err error
}

func (e *restoreError) Error() string {
	return fmt.Sprintf("restoring checkpoint %d: %v", e.id, e.err)
}

func (e *restoreError) Unwrap() error { return e.err }

// Is makes errors.Is(err, ErrCorruptCheckpoint) hold.
func (e *restoreError) Is(target error) bool { return target == errs.CorruptCheckpoint }

// checkpointWatermark returns the least watermark of those recorded for
// key groups overlapping [start, end), and whether there is one.
func checkpointWatermark(wms []checkpoint.Watermark, start, end int) (int64, bool) {
	wm, ok := int64(0), false
	for _, w := range wms {
		if int(w.KeyGroupEnd) <= start || int(w.KeyGroupStart) >= end {
			continue
		}
		if !ok || w.Nanos < wm {
			wm, ok = w.Nanos, true
		}
	}
	return wm, ok
}

// restoreFailure classifies an error reading checkpoint id: a corrupt or
// missing object makes the checkpoint unusable (fall back to the previous
// one); anything else, such as a network error, may pass, so the attempt
// fails and the restart strategy tries the same checkpoint again. Falling
// back needlessly would repeat output the newer checkpoint committed.
func restoreFailure(id uint64, err error) error {
	var ce *blob.CorruptError
	if errors.As(err, &ce) || errors.Is(err, blob.ErrNotFound) || errors.Is(err, dstl.ErrCorrupt) {
		return &restoreError{id: id, err: err}
	}
	return errs.Kind(errs.Storage, fmt.Errorf("eddy: restoring checkpoint %d: %w", id, err), false)
}

// checkpoint runs at an aligned barrier: snapshot keyed state, pre-commit
// sinks, forward the barrier, and acknowledge to the coordinator. State is
// written to storage in the background; the ack follows the write.
func (sc *Subtask) checkpoint(id uint64, final bool, splits []checkpoint.SplitState) error {
	syncStart := time.Now()
	a := ack{stage: sc.st.id, subtask: sc.subtask, id: id, splits: splits, sinkTxns: map[string][]byte{}, barrier: syncStart}
	type pending struct {
		op   *Keyed
		data *[]byte // from snapshotBufs, returned once uploaded
	}
	var snaps []pending
	var waits []func(context.Context) error
	for _, k := range sc.keyed {
		if err := k.backend.Err(); err != nil {
			return fmt.Errorf("eddy: %s subtask %d: writing the changelog: %w", k.uid, sc.subtask, err)
		}
		if k.watermark != math.MinInt64 {
			k.backend.SetWatermark(k.watermark)
		}
		a.entries += int64(k.backend.Entries())
		if k.cl != nil {
			waits = append(waits, sc.changelogCheckpoint(k, &a))
			continue
		}
		buf := snapshotBufs.Get(0) // AppendSnapshot sizes it
		data, err := k.backend.AppendSnapshot((*buf)[:0])
		if err != nil {
			return fmt.Errorf("eddy: snapshot of %s subtask %d: %w", k.uid, sc.subtask, err)
		}
		*buf = data
		snaps = append(snaps, pending{k, buf})
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
	if err := sc.controlOut(msg{kind: msgBarrier, id: id, batch: final}); err != nil {
		return err
	}
	sc.flushCounters()
	a.syncDur = time.Since(syncStart)
	job := sc.job
	if (len(snaps) == 0 && len(waits) == 0) || job.storage == nil {
		return job.sendAck(sc.ctx, a)
	}
	job.wg.Add(1)
	go func() {
		defer job.wg.Done()
		for _, wait := range waits {
			if err := wait(sc.ctx); err != nil {
				// The log could not be made durable: it is broken, and
				// only a restart from the last checkpoint repairs it.
				a.err, a.fatal = err, true
				_ = job.sendAck(sc.ctx, a)
				return
			}
		}
		defer func() {
			for _, p := range snaps {
				snapshotBufs.Put(p.data)
			}
		}()
		for _, p := range snaps {
			start, end := p.op.backend.KeyGroups()
			name := job.storage.StateBlobName(id, p.op.uid, sc.subtask)
			data := *p.data
			if err := job.blobs.Put(sc.ctx, name, data); err != nil {
				a.err = errs.Kind(errs.Storage, fmt.Errorf("writing state of %s subtask %d to %s: %w", p.op.uid, sc.subtask, name, err), false)
				break
			}
			a.parts = append(a.parts, opPart{uid: p.op.uid, part: checkpoint.StatePart{Subtask: uint32(sc.subtask),
				KeyGroupStart: uint32(start), KeyGroupEnd: uint32(end), Blob: name, Size: int64(len(data))}})
			a.bytes += int64(len(data))
		}
		_ = job.sendAck(sc.ctx, a)
	}()
	return nil
}

// snapshotBufs recycles the buffers that synchronous checkpoints serialize
// state into, whatever their size: one is back once its upload's Put has
// returned, and the next checkpoint would allocate as much again.
var snapshotBufs = &bufpool.Pool{}

// fireTimers runs due processing-time timers.
func (sc *Subtask) fireTimers() error {
	now := time.Now().UnixNano()
	for _, rt := range sc.keyed {
		fire := rt.fireProc
		if fire == nil {
			fire = func([]byte, int, int64) error { return nil }
		}
		if err := rt.procTimers.fireDue(now, fire); err != nil {
			return err
		}
	}
	return nil
}

// nextTimer is the earliest pending processing-time timer, or 0.
func (sc *Subtask) nextTimer() int64 {
	next := int64(0)
	for _, rt := range sc.keyed {
		if n := rt.procTimers.next(); n != 0 && (next == 0 || n < next) {
			next = n
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
func (sc *Subtask) runReceiver(process func(batch any, mark func(wm int64) error) error) error {
	defer sc.closeSinks()
	ib := sc.job.inboxes[sc.st][sc.subtask]
	n := ib.Inputs()
	// The restored watermark is a floor: event time never goes back.
	sc.watermark = math.MinInt64
	for i, rt := range sc.keyed {
		if i == 0 || rt.watermark < sc.watermark {
			sc.watermark = rt.watermark
		}
	}
	al := align.New(n, sc.watermark)
	held := make([][]msg, n) // what blocked inputs sent, in order
	heldHead := make([]int, n)
	heldCount := 0
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	armed := int64(0)
	dirty := false // output batches may be partly filled
	// onTimer fires due processing-time timers and forces re-arming.
	onTimer := func() error {
		armed = -1
		if err := sc.fireTimers(); err != nil {
			return err
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
			return sc.controlOut(msg{kind: msgIdle, batch: true})
		}
		if ev.Active {
			if err := sc.controlOut(msg{kind: msgIdle, batch: false}); err != nil {
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
	handle := func(from int, m msg) error {
		defer ib.Release(from)
		switch m.kind {
		case msgData:
			cur = from
			if err := process(m.batch, onMark); err != nil {
				return err
			}
			dirty = true
		case msgIdle:
			return event(al.Idle(from, m.batch.(bool)))
		case msgBarrier:
			complete, err := al.Barrier(from, m.id, m.batch.(bool))
			if err != nil {
				return fmt.Errorf("eddy: subtask %d of stage %d: %w", sc.subtask, sc.st.id, err)
			}
			if complete {
				return takeCheckpoint()
			}
		case msgEndOfData:
			ev, all := al.EndOfData(from)
			if all {
				if err := sc.endOfInput(); err != nil {
					return err
				}
				al.Advanced(math.MaxInt64)
				return nil
			}
			return event(ev)
		case msgTerminate:
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
					held[i][heldHead[i]] = msg{}
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
		var e inbox.Envelope[msg]
		select {
		case e = <-ib.C():
		case <-sc.ctx.Done():
			return sc.ctx.Err()
		case <-timer.C:
			if err := onTimer(); err != nil {
				return err
			}
			continue
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
	if err := sc.controlOut(msg{kind: msgTerminate}); err != nil {
		return err
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
	emitWatermark := func(now time.Time) error {
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
			slots[sc.subtask].Store(combined)
			return sc.controlOut(msg{kind: msgWatermark, id: uint64(combined)})
		}
		if idleSentBefore := slots[sc.subtask].Load() == excluded; idleSentBefore {
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
			select {
			case t := <-triggers:
				got = &t
			case <-sc.ctx.Done():
				return sc.ctx.Err()
			}
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
			if err := emitWatermark(time.Now()); err != nil {
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
			if err := sc.flushOut(); err != nil {
				return err
			}
			sc.flushCounters()
			pause.Reset(time.Millisecond)
			select {
			case t := <-triggers:
				got = &t
			case <-sc.ctx.Done():
				return sc.ctx.Err()
			case <-pause.C:
			}
		}
	}
}
