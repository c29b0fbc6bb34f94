package runtime

import (
	"github.com/eddyflow/eddy/internal/inbox"
	"github.com/eddyflow/eddy/state"
)

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
	w.sc.shuffled += int64(len(b.recs))
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
