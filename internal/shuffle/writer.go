package shuffle

import (
	"github.com/eddyflow/eddy/internal/cacheline"
	"github.com/eddyflow/eddy/internal/inbox"
	"github.com/eddyflow/eddy/state"
)

// Output is one output of a stage: a shuffle Writer, as the subtask's
// control messages and flushes see it.
type Output interface {
	// Flush sends every partly filled batch.
	Flush() error
	// Control sends m to every receiver, after the records pushed so far.
	Control(m Msg) error
	// Watermark marks event time wm after the records pushed so far.
	Watermark(wm int64) error
}

// Sender hands a message to one receiver's inbox, as the given input
// there, waiting while that input has its credits out (backpressure).
type Sender interface {
	SendTo(ib *inbox.Inbox[Msg], input int, m Msg) error
}

// Writer partitions records by key group over the next stage's subtasks.
// A watermark travels inside the batches, at its place among the records
// (a Mark), so it neither is a message of its own nor flushes a partial
// batch, and the receiver sees records and event time in the order they
// were sent; a newer watermark with no record in between replaces one, and
// an output already told as much is not told again. A batch that holds a
// mark is sent once full, at a flush, or once staleAfter records have
// passed since its mark (so an output that gets few records still sees
// event time advance).
type Writer[K comparable, T any] struct {
	_          cacheline.Pad // written per record (package cacheline)
	send       Sender
	input      int // the receivers' inbox input this writer sends as
	pool       *Pool
	outs       []*inbox.Inbox[Msg]
	batches    []*KeyedBatch[K, T]
	sent       []int64 // per output, the last watermark marked
	marked     int     // outputs whose batch holds a mark
	waiting    int     // records pushed since the oldest unsent mark; -1: none
	staleAfter int
	key        func(*T) K
	enc        func([]byte, *K) []byte
	scratch    []byte
	cur        K      // the current key; a field so encoding it does not allocate
	shuffled   *int64 // the sending subtask's counter of records sent
	maxPar     int
	par        int
	batchSize  int
	// Of a writer with an age limit (LimitAge): the sending subtask's
	// count of records pushed to any of its writers, and per output the
	// count when its open batch got its first record.
	clock  *int64
	born   []int64
	maxAge int64
	_      cacheline.Pad
}

// LimitAge makes the writer send a batch once maxAge records have been
// pushed since its first one, counted by clock, which every writer of the
// sending subtask advances per record. A subtask feeding several edges
// then keeps their records in about the order it read them: a batch of
// an edge that gets few records (Nexmark's auctions, 6% of the events)
// no longer waits for the ten thousand records that fill it while the
// busy edge's batches (their bids) go out, which a join downstream would
// have to hold in state (bids of auctions it has not seen yet).
func (w *Writer[K, T]) LimitAge(clock *int64, maxAge int) {
	w.clock, w.maxAge, w.born = clock, int64(maxAge), make([]int64, len(w.outs))
}

// NewWriter returns the writer of one sending subtask, which is input
// input of outs, the inboxes of the receiving stage's subtasks: key extracts a record's key,
// enc serializes it to choose its key group of maxPar, batches of
// batchSize come from pool, and every record sent is added to *shuffled.
func NewWriter[K comparable, T any](send Sender, input int, outs []*inbox.Inbox[Msg], pool *Pool, key func(*T) K, enc func([]byte, *K) []byte, maxPar, batchSize int, shuffled *int64) *Writer[K, T] {
	w := &Writer[K, T]{send: send, input: input, pool: pool, outs: outs, batches: make([]*KeyedBatch[K, T], len(outs)),
		sent: make([]int64, len(outs)), waiting: -1, shuffled: shuffled, scratch: cacheline.Bytes(16),
		key: key, enc: enc, maxPar: maxPar, par: len(outs), batchSize: batchSize}
	for j := range outs {
		w.sent[j] = NoTimestamp
	}
	w.staleAfter = w.batchSize * len(outs)
	return w
}

// batch returns output j's open batch, taking a recycled one.
func (w *Writer[K, T]) batch(j int) *KeyedBatch[K, T] {
	b := w.batches[j]
	if b == nil {
		b = w.pool.Get().(*KeyedBatch[K, T])
		w.batches[j] = b
	}
	return b
}

// Push adds a record with event time ts to the batch of the subtask that
// owns its key group, sending the batch once full.
func (w *Writer[K, T]) Push(ts int64, rec *T) error {
	w.cur = w.key(rec)
	w.scratch = w.enc(w.scratch[:0], &w.cur)
	kg := state.KeyGroupFor(w.scratch, w.maxPar)
	j := state.SubtaskFor(kg, w.maxPar, w.par)
	b := w.batch(j)
	b.add(w.cur, int32(kg), w.scratch, ts, rec)
	full := w.full(j, len(b.Recs))
	if w.clock != nil {
		full = w.aged(j, len(b.Recs)) || full
	}
	if full {
		if err := w.sendBatch(j); err != nil {
			return err
		}
	}
	if w.waiting >= 0 {
		return w.counted()
	}
	return nil
}

// full reports whether output j's batch, holding n records, goes: at the
// writer's batch size, or at the receiver's lower limit while it drains
// slowly (inbox.Inbox.BatchLimit).
func (w *Writer[K, T]) full(j, n int) bool {
	return n >= w.batchSize || n >= w.outs[j].BatchLimit()
}

// aged counts a record pushed to output j, whose batch now holds n, and
// reports whether the batch's first record has waited maxAge records.
func (w *Writer[K, T]) aged(j, n int) bool {
	*w.clock++
	if n == 1 {
		w.born[j] = *w.clock
		return false
	}
	return *w.clock-w.born[j] >= w.maxAge
}

// counted counts a pushed record against the oldest unsent mark (there is
// one): once staleAfter records have passed it, the batches holding marks
// go.
func (w *Writer[K, T]) counted() error {
	if w.waiting++; w.waiting >= w.staleAfter {
		return w.flushMarked()
	}
	return nil
}

// Broadcast adds a record with event time ts to every output's batch (a
// broadcast edge: every receiver sees every record). The record carries no
// key: its key bytes are empty and its key group 0.
func (w *Writer[K, T]) Broadcast(ts int64, rec *T) error {
	var zero K
	for j := range w.outs {
		b := w.batch(j)
		b.add(zero, 0, nil, ts, rec)
		if w.full(j, len(b.Recs)) {
			if err := w.sendBatch(j); err != nil {
				return err
			}
		}
	}
	if w.waiting >= 0 {
		return w.counted()
	}
	return nil
}

// sendBatch hands output j its open batch.
func (w *Writer[K, T]) sendBatch(j int) error {
	b := w.batches[j]
	w.batches[j] = nil
	*w.shuffled += int64(len(b.Recs))
	if len(b.Marks) > 0 {
		if w.marked--; w.marked == 0 {
			w.waiting = -1
		}
	}
	return w.send.SendTo(w.outs[j], w.input, Msg{Kind: Data, Batch: b})
}

// Flush sends every batch that holds records or marks.
func (w *Writer[K, T]) Flush() error {
	for j, b := range w.batches {
		if b != nil && (len(b.Recs) > 0 || len(b.Marks) > 0) {
			if err := w.sendBatch(j); err != nil {
				return err
			}
		}
	}
	return nil
}

// flushMarked sends the batches that hold marks.
func (w *Writer[K, T]) flushMarked() error {
	for j, b := range w.batches {
		if b != nil && len(b.Marks) > 0 {
			if err := w.sendBatch(j); err != nil {
				return err
			}
		}
	}
	w.waiting = -1
	return nil
}

// Watermark marks event time wm in every output's batch, after the records
// pushed so far.
func (w *Writer[K, T]) Watermark(wm int64) error {
	for j := range w.outs {
		if wm <= w.sent[j] {
			continue
		}
		w.sent[j] = wm
		b := w.batch(j)
		at := int32(len(b.Recs))
		if n := len(b.Marks); n > 0 && b.Marks[n-1].At == at {
			b.Marks[n-1].WM = wm // no record since: replace it
			continue
		}
		if len(b.Marks) == 0 {
			w.marked++
		}
		b.Marks = append(b.Marks, Mark{At: at, WM: wm})
		if w.waiting < 0 {
			w.waiting = 0
		}
	}
	return nil
}

// Control flushes every batch, then sends m to every receiver.
func (w *Writer[K, T]) Control(m Msg) error {
	if err := w.Flush(); err != nil {
		return err
	}
	for _, ib := range w.outs {
		if err := w.send.SendTo(ib, w.input, m); err != nil {
			return err
		}
	}
	return nil
}
