package shuffle

import "github.com/eddyflow/eddy/internal/cacheline"

// KeyedBatch carries records with their keys across a shuffle. Key bytes
// share one buffer, so a batch costs no allocation once pooled.
type KeyedBatch[K comparable, T any] struct {
	_      cacheline.Pad // written per record by the sender (package cacheline)
	Keys   []K
	KGs    []int32
	KeyBuf []byte
	KeyEnd []int32 // where each record's key ends in KeyBuf
	TS     []int64
	Recs   []T
	// Watermarks in the batch, in order: each holds for the records after
	// those before it, as if it had travelled between them.
	Marks []Mark
	_     cacheline.Pad
}

// Mark is a watermark inside a batch: event time reaches WM before record
// At.
type Mark struct {
	At int32
	WM int64
}

// Key is the serialized key of record i.
func (b *KeyedBatch[K, T]) Key(i int) []byte {
	start := int32(0)
	if i > 0 {
		start = b.KeyEnd[i-1]
	}
	return b.KeyBuf[start:b.KeyEnd[i]]
}

// add appends a record with key k (serialized kb) of key group kg and
// event time ts.
func (b *KeyedBatch[K, T]) add(k K, kg int32, kb []byte, ts int64, rec *T) {
	b.Keys = append(b.Keys, k)
	b.KGs = append(b.KGs, kg)
	b.KeyBuf = append(b.KeyBuf, kb...)
	b.KeyEnd = append(b.KeyEnd, int32(len(b.KeyBuf)))
	b.TS = append(b.TS, ts)
	b.Recs = append(b.Recs, *rec)
}

// Len is the number of records in the batch.
func (b *KeyedBatch[K, T]) Len() int { return len(b.Recs) }

// Reset empties the batch, keeping its memory.
func (b *KeyedBatch[K, T]) Reset() {
	b.Keys, b.KGs, b.KeyBuf, b.KeyEnd, b.TS, b.Recs = b.Keys[:0], b.KGs[:0], b.KeyBuf[:0], b.KeyEnd[:0], b.TS[:0], b.Recs[:0]
	b.Marks = b.Marks[:0]
}

// Pool recycles the batches of one edge. It is a bounded channel, not a
// sync.Pool, whose contents each GC drops: every batch would then grow its
// slices anew.
type Pool struct {
	free     chan any
	newBatch func() any
}

// NewPool returns the pool of an edge carrying records of type T with keys
// of type K in batches of batchSize, holding at most capacity free batches.
func NewPool[K comparable, T any](capacity, batchSize int) *Pool {
	return &Pool{free: make(chan any, capacity), newBatch: func() any {
		return &KeyedBatch[K, T]{Keys: make([]K, 0, batchSize), KGs: make([]int32, 0, batchSize), KeyBuf: make([]byte, 0, 16*batchSize),
			KeyEnd: make([]int32, 0, batchSize), TS: make([]int64, 0, batchSize), Recs: make([]T, 0, batchSize), Marks: make([]Mark, 0, 4)}
	}}
}

// Get returns a recycled batch, or a new one.
func (p *Pool) Get() any {
	select {
	case b := <-p.free:
		return b
	default:
		return p.newBatch()
	}
}

// Put recycles a batch that has been reset.
func (p *Pool) Put(b any) {
	select {
	case p.free <- b:
	default:
	}
}

// Deliver hands the records of batch b (a *KeyedBatch[K, T] from pool) to
// push, and each watermark in it to mark at its place among the records;
// then it resets the batch and gives it back to pool. It returns how many
// records the batch held. Consecutive records with equal keys get the same
// key slice, valid until Deliver returns.
func Deliver[K comparable, T any](pool *Pool, b any, push KeyedPush[K, T], mark func(wm int64) error) (int, error) {
	kb := b.(*KeyedBatch[K, T])
	n := len(kb.Recs)
	m := 0
	var prev []byte
	for i := range kb.Recs {
		for ; m < len(kb.Marks) && int(kb.Marks[m].At) == i; m++ {
			if err := mark(kb.Marks[m].WM); err != nil {
				return n, err
			}
		}
		// A record with the key of the one before it gets the very
		// slice that one got: a receiver can tell it is the same key
		// without comparing bytes (state.Backend.EnsureKey), and keep
		// the key's state entries at hand.
		key := kb.Key(i)
		if string(key) == string(prev) {
			key = prev
		}
		prev = key
		if err := push(&kb.Keys[i], key, int(kb.KGs[i]), kb.TS[i], &kb.Recs[i]); err != nil {
			return n, err
		}
	}
	for ; m < len(kb.Marks); m++ {
		if err := mark(kb.Marks[m].WM); err != nil {
			return n, err
		}
	}
	kb.Reset()
	pool.Put(kb)
	return n, nil
}
