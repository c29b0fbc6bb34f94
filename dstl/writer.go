package dstl

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"sync"
)

// Handle describes the changes of one writer with sequence numbers in
// (After, Upto]: the objects that hold them. Persist returns it; a
// checkpoint stores it (the proto tags are for serde), and Read replays
// it. An empty Objects means no changes.
type Handle struct {
	Writer  string   `proto:"1"`
	After   uint64   `proto:"2"`
	Upto    uint64   `proto:"3"`
	Objects []string `proto:"4"` // in sequence order
	Size    int64    `proto:"5"` // bytes of this writer's changes in Objects, uncompressed
}

// Writer appends the state changes of one subtask to its Log. Use a
// Writer from one goroutine at a time; different Writers of a log may be
// used concurrently.
type Writer struct {
	log  *Log
	name string

	mu        sync.Mutex
	seq       uint64     // last appended sequence number
	cur       *part      // changes not yet sealed into a batch
	spare     *part      // an empty part to continue with after a seal
	dedup     dedupTable // hash of (kg, state, key) → index of its latest entry in cur
	batches   []sealed   // sealed batches holding changes after truncated
	truncated uint64     // changes up to this seq are no longer tracked
	closed    bool
}

// part is one writer's share of a batch: its changes, pre-encoded.
type part struct {
	owner   *Writer
	buf     []byte  // the changes' encodings after their sequence deltas
	entries []entry // one per change, in sequence order
	first   uint64  // sequence numbers of the first and last change
	last    uint64
	dropped int // entries superseded within the part
	kept    int // bytes of the entries not dropped
}

func (p *part) reset() {
	p.buf, p.entries = p.buf[:0], p.entries[:0]
	p.first, p.last, p.dropped, p.kept = 0, 0, 0, 0
}

// entry locates one change in a part's buf.
type entry struct {
	seq        uint64
	off, end   uint32 // the change's bytes in buf
	keyOff     uint32
	keyLen     uint32
	kg, state  uint32
	superseded bool
}

// sealed is a writer's record of a sealed batch holding its changes
// first..last.
type sealed struct {
	b           *batch
	first, last uint64
	size        int64
}

// batch is the unit of upload: the parts of all writers sealed together.
type batch struct {
	seq    uint64
	name   string  // the first attempt's object name
	parts  []*part // until encoded
	queued int64   // bytes of the parts

	done chan struct{} // closed when the upload finished

	mu     sync.Mutex
	refs   int    // writers tracking the batch
	object string // the winning object, after done
	err    error  // after done
	local  string // path of the local copy, if written
}

// Name returns the writer's name.
func (w *Writer) Name() string { return w.name }

// Seq returns the sequence number of the last appended change (0 if
// none, or the after of WriterFrom).
func (w *Writer) Seq() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq
}

// Append adds a change of the state with id state, in key group kg: key
// now has value, or, if del is set, is deleted (value is ignored). It
// copies key and value and gives the change the next sequence number. It
// blocks while the log has more than MaxInFlight bytes queued or
// uploading. It fails if the log failed (a *BatchError) or was closed,
// the writer was closed, or len(key)+len(value) exceeds 64 MB.
func (w *Writer) Append(kg uint32, state uint32, key, value []byte, del bool) error {
	l := w.log
	if err := l.usable(); err != nil {
		return err
	}
	if l.inflight.Load() > int64(l.opts.MaxInFlight) {
		if err := l.waitRoom(); err != nil {
			return err
		}
	}
	if del {
		value = nil
	}
	if len(key)+len(value) > maxChange {
		return fmt.Errorf("dstl: writer %q: change of %d bytes exceeds the %d-byte limit", w.name, len(key)+len(value), maxChange)
	}
	h := hashChange(l.seed, kg, state, key)

	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("dstl: writer %q: %w", w.name, ErrClosed)
	}
	p := w.cur
	w.seq++
	off := len(p.buf)
	b := binary.AppendUvarint(p.buf, uint64(kg))
	b = binary.AppendUvarint(b, uint64(state))
	kl := uint64(len(key)) << 1
	if del {
		kl |= 1
	}
	b = binary.AppendUvarint(b, kl)
	keyOff := len(b)
	b = append(b, key...)
	if !del {
		b = binary.AppendUvarint(b, uint64(len(value)))
		b = append(b, value...)
	}
	p.buf = b
	n := len(b) - off
	idx := len(p.entries)
	same := func(i int32) bool {
		e := &p.entries[i]
		return e.kg == kg && e.state == state && bytes.Equal(b[e.keyOff:e.keyOff+e.keyLen], key)
	}
	if j := w.dedup.upsert(h, int32(idx), same, w.rehash); j >= 0 {
		e := &p.entries[j]
		e.superseded = true
		p.dropped++
		p.kept -= int(e.end - e.off)
	}
	p.entries = append(p.entries, entry{
		seq: w.seq, off: uint32(off), end: uint32(len(b)),
		keyOff: uint32(keyOff), keyLen: uint32(len(key)), kg: kg, state: state,
	})
	if idx == 0 {
		p.first = w.seq
	}
	p.last = w.seq
	p.kept += n
	size := len(b)
	l.inflight.Add(int64(n))
	queued := l.queued.Add(int64(n))
	w.mu.Unlock()

	if idx == 0 && !l.pending.Load() && l.pending.CompareAndSwap(false, true) {
		select {
		case l.started <- struct{}{}:
		default:
		}
	}
	if queued >= int64(l.opts.FlushBytes) || size >= l.opts.WriterFlushBytes {
		l.kick()
	}
	return nil
}

// hashChange hashes what identifies the state entry a change is to.
func hashChange(seed maphash.Seed, kg, state uint32, key []byte) uint64 {
	return maphash.Bytes(seed, key) ^ (uint64(state)<<32|uint64(kg))*0x9e3779b97f4a7c15
}

// rehash returns the hash of the i-th change of w.cur; w.mu is held.
func (w *Writer) rehash(i int32) uint64 {
	e := &w.cur.entries[i]
	return hashChange(w.log.seed, e.kg, e.state, w.cur.buf[e.keyOff:e.keyOff+e.keyLen])
}

// nextPart returns the part to continue with after a seal; w.mu is held.
func (w *Writer) nextPart() *part {
	p := w.spare
	w.spare = nil
	if p == nil {
		p = &part{owner: w}
	}
	return p
}

// recycle makes p, whose changes are encoded, w's spare part, unless w
// has one or p's buffers are much larger than its last use needed.
func (w *Writer) recycle(p *part) {
	if cap(p.buf) > 2*len(p.buf)+64<<10 || cap(p.entries) > 2*len(p.entries)+1<<10 {
		return
	}
	p.reset()
	w.mu.Lock()
	if w.spare == nil && !w.closed {
		w.spare = p
	}
	w.mu.Unlock()
}

// Persist is a checkpoint boundary. It ends the current batch (uploading
// it now rather than when FlushInterval expires), waits until every change
// of this writer with a sequence number above after is durable, and
// returns the Handle of exactly those changes: (after, Seq()].
//
// after is the sequence number up to which the caller no longer needs
// changes (the point of the last materialization); it must not decrease
// from one call to the next, because Persist forgets the batches holding
// only changes up to after, and deletes local copies no writer needs any
// more. Persist fails if the log failed (a *BatchError naming the batch,
// its object and the cause), was closed, or ctx ends first; a batch
// still uploading when ctx ends keeps uploading.
func (w *Writer) Persist(ctx context.Context, after uint64) (Handle, error) {
	l := w.log
	if err := l.usable(); err != nil {
		return Handle{}, err
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return Handle{}, fmt.Errorf("dstl: writer %q: %w", w.name, ErrClosed)
	}
	upto := w.seq
	unsealed := len(w.cur.entries) > 0
	w.mu.Unlock()
	if unsealed {
		upto = l.seal(w)
	}

	w.mu.Lock()
	if after > upto {
		w.mu.Unlock()
		return Handle{}, fmt.Errorf("dstl: writer %q: Persist after %d, beyond its last change %d", w.name, after, upto)
	}
	if after < w.truncated {
		t := w.truncated
		w.mu.Unlock()
		return Handle{}, fmt.Errorf("dstl: writer %q: Persist after %d, but changes up to %d were released by an earlier Persist", w.name, after, t)
	}
	var drop []*batch
	i := 0
	for i < len(w.batches) && w.batches[i].last <= after {
		drop = append(drop, w.batches[i].b)
		i++
	}
	w.batches = append(w.batches[:0], w.batches[i:]...)
	w.truncated = after
	var need []sealed
	for _, s := range w.batches {
		if s.first > upto {
			break
		}
		need = append(need, s)
	}
	w.mu.Unlock()
	for _, b := range drop {
		l.release(b)
	}

	h := Handle{Writer: w.name, After: after, Upto: upto}
	for _, s := range need {
		select {
		case <-s.b.done:
		case <-ctx.Done():
			return Handle{}, fmt.Errorf("dstl: writer %q: Persist: waiting for batch %d: %w", w.name, s.b.seq, ctx.Err())
		}
		if s.b.err != nil {
			return Handle{}, s.b.err
		}
		h.Objects = append(h.Objects, s.b.object)
		h.Size += s.size
	}
	if err := l.usable(); err != nil {
		return Handle{}, err
	}
	l.m.persists.Add(1)
	return h, nil
}

// Close detaches the writer from its log: its unsealed changes are
// dropped, and it stops tracking its batches. Its methods then return
// ErrClosed. Closing twice is a no-op.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	p := w.cur
	w.cur = &part{owner: w}
	w.spare = nil
	w.dedup = dedupTable{}
	batches := w.batches
	w.batches = nil
	w.log.inflight.Add(-int64(len(p.buf)))
	w.log.queued.Add(-int64(len(p.buf)))
	w.mu.Unlock()
	w.log.removeWriter(w)
	for _, s := range batches {
		w.log.release(s.b)
	}
	w.log.broadcast()
	return nil
}
