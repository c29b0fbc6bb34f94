package dstl

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/eddyflow/eddy/blob"
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
	// CRCs are the checksums of Objects, one each (the CRC-32C each
	// object's header records over its header and body), or empty for a
	// handle written before they were recorded. A read checks them, so an
	// intact object that is not the one written (replaced, or an older
	// object of the same name) is refused.
	CRCs []uint32 `proto:"6,fixed"`
	// Uploads lists the uploads of the objects of Objects built from
	// parts (Options.Parts): their parts are durable when Persist
	// returns, but a store shows the object only once the upload is
	// completed, which the log does in the background afterwards. Read
	// completes an object it finds missing from its Upload. Empty in
	// handles of objects stored whole, and in those written before
	// completions were deferred.
	Uploads []Upload `proto:"7"`
}

// Upload is a log object built from parts whose completion the writer
// deferred: what a reader in any process needs to complete it
// (blob.Parter.CompleteParts) if the writer never did.
type Upload struct {
	Object string `proto:"1"` // one of the handle's Objects
	ID     string `proto:"2"` // the store's id of the upload (blob.PartUpload.ID)
	Parts  uint32 `proto:"3"` // parts 1..Parts make the object
	Size   int64  `proto:"4"` // the object's bytes, its trailer included
}

// checkUploads checks h's Uploads (blob.CheckUpload).
func (h Handle) checkUploads() error {
	for _, u := range h.Uploads {
		if err := blob.CheckUpload("object", u.Object, u.ID, u.Parts, u.Size, h.Objects); err != nil {
			return err
		}
	}
	return nil
}

// Writer appends the state changes of one subtask to its Log. Its methods
// are safe for concurrent use, but Append and Cut are meant to be called
// by the subtask's goroutine (the sequence numbers they return or assign
// are only meaningful in that order); PersistUpto may run in the
// background. Different Writers of a log do not contend.
type Writer struct {
	log  *Log
	name string

	mu        sync.Mutex
	seq       uint64     // last appended sequence number
	cur       *part      // changes not yet sealed into a batch
	cut       *part      // changes up to a Cut, waiting for the other writers' Cuts (PersistDelay)
	spare     *part      // an empty part to continue with after a seal
	dedup     dedupTable // hash of (kg, state, key) → index of its latest entry in cur
	batches   []sealed   // sealed batches holding changes after truncated
	truncated uint64     // changes up to this seq are no longer tracked
	maxAfter  uint64     // the largest after a Persist was called with
	closed    bool
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

	done     chan struct{} // closed when the upload finished
	dataRefs atomic.Int32  // holders of the object buffer

	mu     sync.Mutex
	refs   int     // writers tracking the batch
	object string  // the winning object, after done
	crc    uint32  // its checksum, after done
	err    error   // after done
	local  string  // path of the local copy, if written
	stream *stream // the object the batch is a frame of, if streamed (set under Log.sealMu)
	upload *Upload // the upload of object, if built from parts (after done)

	// Of a streamed batch: its turn to add its frame comes when turn is
	// closed; it closes next when it has. last: it completes the stream.
	turn, next chan struct{}
	last       bool
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
// now has value, or, if del is set, is deleted (value is ignored). It is
// AppendOp with OpPut or OpDelete.
func (w *Writer) Append(kg uint32, state uint32, key, value []byte, del bool) error {
	if del {
		return w.AppendOp(kg, state, OpDelete, key, nil, nil)
	}
	return w.AppendOp(kg, state, OpPut, key, nil, value)
}

// AppendOp adds a change of the state with id state, in key group kg, to
// key: op with the element key sub (for OpPutElem and OpDeleteElem; nil
// otherwise) and value (ignored by the deletes). It copies its arguments
// and gives the change the next sequence number. It blocks while the log
// has more than MaxInFlight bytes queued or uploading. It fails if the log
// failed (a *BatchError) or was closed, the writer was closed, op is
// unknown, or the change exceeds 64 MB.
func (w *Writer) AppendOp(kg uint32, state uint32, op Op, key, sub, value []byte) error {
	l := w.log
	if err := l.usable(); err != nil {
		return err
	}
	if op >= opCount {
		return fmt.Errorf("dstl: writer %q: unknown operation %v", w.name, op)
	}
	if l.inflight.Load() > int64(l.opts.MaxInFlight) {
		if err := l.waitRoom(); err != nil {
			return err
		}
	}
	if !op.hasValue() {
		value = nil
	}
	if !op.hasSub() {
		sub = nil
	}
	if len(key)+len(sub)+len(value) > maxChange {
		return fmt.Errorf("dstl: writer %q: change of %d bytes exceeds the %d-byte limit", w.name, len(key)+len(sub)+len(value), maxChange)
	}
	// What the change replaces: (kg, state, key) for the whole-value
	// operations, (kg, state, key, sub) for the element ones.
	class := dedupClass(op)
	h := hashChange(l.seed, kg, state, class, key, sub)
	for l.sealing.Load() {
		// Let the seal take the writers' locks: appenders re-taking them
		// in a tight loop would starve it when goroutines outnumber CPUs.
		runtime.Gosched()
	}

	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("dstl: writer %q: %w", w.name, ErrClosed)
	}
	p := w.cur
	w.seq++
	need := 4*binary.MaxVarintLen32 + 3*binary.MaxVarintLen64 + len(key) + len(sub) + len(value)
	ci := len(p.chunks) - 1
	if ci < 0 || cap(p.chunks[ci])-len(p.chunks[ci]) < need {
		p.chunks = append(p.chunks, l.arena.chunk(need))
		ci++
	}
	c := p.chunks[ci]
	off := len(c)
	c = binary.AppendUvarint(c, uint64(kg))
	c = binary.AppendUvarint(c, uint64(state))
	c = binary.AppendUvarint(c, uint64(len(key))<<3|uint64(op))
	keyOff := len(c)
	c = append(c, key...)
	subOff := len(c)
	if op.hasSub() {
		c = binary.AppendUvarint(c, uint64(len(sub)))
		subOff = len(c)
		c = append(c, sub...)
	}
	if op.hasValue() {
		c = binary.AppendUvarint(c, uint64(len(value)))
		c = append(c, value...)
	}
	p.chunks[ci] = c
	n := len(c) - off
	idx := p.n
	if idx == len(p.blocks)*entryBlock {
		p.blocks = append(p.blocks, l.arena.block())
	}
	same := func(i int32) bool {
		e := p.entry(i)
		if e.kg != kg || e.state != state || e.class != class {
			return false
		}
		ch := p.chunks[e.chunk]
		return bytes.Equal(ch[e.keyOff:e.keyOff+e.keyLen], key) && bytes.Equal(ch[e.subOff:e.subOff+e.subLen], sub)
	}
	if j := w.dedup.upsert(h, int32(idx), same, w.rehash); j >= 0 {
		e := p.entry(j)
		e.superseded = true
		p.dropped++
		p.kept -= int(e.end - e.off)
	}
	*p.entry(int32(idx)) = entry{
		seq: w.seq, chunk: uint32(ci), off: uint32(off), end: uint32(len(c)),
		keyOff: uint32(keyOff), keyLen: uint32(len(key)), subOff: uint32(subOff), subLen: uint32(len(sub)),
		kg: kg, state: state, class: class,
	}
	p.n++
	if idx == 0 {
		p.first = w.seq
	}
	p.last = w.seq
	p.kept += n
	p.size += n
	size := p.size
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
		l.sealFull(w)
	}
	return nil
}

// The dedup classes: which earlier changes of a batch a change replaces.
const (
	classWhole uint8 = iota // the last put or delete of a key
	classElem               // the last put or delete of an element of a key
)

func dedupClass(op Op) uint8 {
	if op.hasSub() {
		return classElem
	}
	return classWhole
}

// hashChange hashes what identifies the state entry (or element) a change
// is to.
func hashChange(seed maphash.Seed, kg, state uint32, class uint8, key, sub []byte) uint64 {
	h := maphash.Bytes(seed, key) ^ (uint64(state)<<32|uint64(kg))*0x9e3779b97f4a7c15
	if class == classElem {
		h ^= maphash.Bytes(seed, sub) * 0xbf58476d1ce4e5b9
	}
	return h
}

// rehash returns the hash of the i-th change of w.cur; w.mu is held.
func (w *Writer) rehash(i int32) uint64 {
	e := w.cur.entry(i)
	ch := w.cur.chunks[e.chunk]
	return hashChange(w.log.seed, e.kg, e.state, e.class, ch[e.keyOff:e.keyOff+e.keyLen], ch[e.subOff:e.subOff+e.subLen])
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

// recycle returns the buffers of p, whose changes are encoded, to the
// arena, and keeps p as w's spare part.
func (w *Writer) recycle(p *part) {
	w.log.arena.release(p)
	w.mu.Lock()
	if w.spare == nil && !w.closed {
		w.spare = p
	}
	w.mu.Unlock()
}

// Persist is a checkpoint boundary. It ends the current batch (uploading
// it now rather than when FlushInterval or PersistDelay expires), waits
// until every change of this writer with a sequence number above after is
// durable, and returns the Handle of exactly those changes: (after,
// Seq()].
//
// after is the sequence number up to which the caller no longer needs
// changes (the point of the last materialization). Persist fails if the
// log failed (a *BatchError naming the batch, its object and the cause),
// was closed, or ctx ends first; a batch still uploading when ctx ends
// keeps uploading.
func (w *Writer) Persist(ctx context.Context, after uint64) (Handle, error) {
	if err := w.log.usable(); err != nil {
		return Handle{}, err
	}
	upto := w.Cut()
	w.mu.Lock()
	waiting := w.cut != nil
	w.mu.Unlock()
	if waiting {
		w.log.seal(false)
	}
	return w.PersistUpto(ctx, after, upto)
}

// Cut ends the writer's part of the current batch at a checkpoint barrier
// and returns the sequence number of the writer's last change. Changes
// appended after Cut go to a later batch, so the last-change-per-key
// deduplication inside a batch never replaces a change up to the barrier
// with one after it. The batch itself is sealed once every writer holding
// unsealed changes has cut, or PersistDelay after the first Cut: the
// subtasks of a process passing one barrier share one object. The subtask
// calls Cut at the barrier and may then call PersistUpto with the
// returned number in the background while it keeps appending.
func (w *Writer) Cut() uint64 {
	l := w.log
	w.mu.Lock()
	upto := w.seq
	if w.closed || w.cur.n == 0 {
		waits := w.cut != nil
		w.mu.Unlock()
		if !waits && l.cutWait.Load() && l.allCut() {
			// The last writer of the barrier had nothing to add.
			l.seal(false)
		}
		return upto
	}
	if w.cut != nil {
		// Cut twice before the batch was sealed: the first cut's batch
		// ends now.
		w.mu.Unlock()
		l.seal(false)
		w.mu.Lock()
		if w.closed || w.cur.n == 0 {
			w.mu.Unlock()
			return upto
		}
	}
	w.cut = w.cur
	w.cur = w.nextPart()
	w.dedup.reset()
	w.mu.Unlock()
	l.cutWait.Store(true)
	if l.opts.PersistDelay <= 0 || l.allCut() {
		l.seal(false)
		return upto
	}
	select {
	case l.cutCh <- struct{}{}:
	default:
	}
	return upto
}

// PersistUpto waits until the writer's changes (after, upto] are durable
// and returns their Handle, as Persist does, without ending the current
// batch: upto must be a batch boundary, a number Cut or Persist returned
// (or after itself, or Seq() if that is a boundary yet to be cut). It may
// run concurrently with Append, e.g. in the background after Cut.
//
// Batches holding only changes up to an after are forgotten (and their
// local copies deleted) once a Persist with a larger after arrives: the
// log keeps what the latest two materialization points need, so that the
// checkpoints of the previous one can still be persisted, out of order,
// or restored locally. An after below a forgotten point is an error.
func (w *Writer) PersistUpto(ctx context.Context, after, upto uint64) (Handle, error) {
	l := w.log
	if err := l.usable(); err != nil {
		return Handle{}, err
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return Handle{}, fmt.Errorf("dstl: writer %q: %w", w.name, ErrClosed)
	}
	if after > upto || upto > w.seq {
		seq := w.seq
		w.mu.Unlock()
		return Handle{}, fmt.Errorf("dstl: writer %q: persist (%d,%d] with the last change at %d", w.name, after, upto, seq)
	}
	if upto == w.seq && w.cur.n > 0 {
		// Up to now, not a boundary yet: end the batch here.
		w.mu.Unlock()
		w.Cut()
		l.seal(false)
		w.mu.Lock()
	}
	for w.cut != nil && w.cut.first <= upto && !w.closed {
		// The batch of a Cut waits for the other writers' Cuts.
		w.mu.Unlock()
		sealed := l.sealSignal()
		w.mu.Lock()
		if w.cut == nil || w.cut.first > upto || w.closed {
			break
		}
		w.mu.Unlock()
		select {
		case <-sealed:
		case <-l.quit:
			return Handle{}, ErrClosed
		case <-ctx.Done():
			return Handle{}, fmt.Errorf("dstl: writer %q: persist: waiting for the batch of its cut at %d: %w", w.name, upto, ctx.Err())
		}
		w.mu.Lock()
	}
	if w.closed {
		w.mu.Unlock()
		return Handle{}, fmt.Errorf("dstl: writer %q: %w", w.name, ErrClosed)
	}
	if after < w.truncated {
		t := w.truncated
		w.mu.Unlock()
		return Handle{}, fmt.Errorf("dstl: writer %q: persist after %d, but changes up to %d were released by a Persist with a later materialization point", w.name, after, t)
	}
	var drop []*batch
	if after > w.maxAfter {
		// Release what only the materialization point before the previous
		// one needed.
		i := 0
		for i < len(w.batches) && w.batches[i].last <= w.maxAfter {
			drop = append(drop, w.batches[i].b)
			i++
		}
		w.batches = append(w.batches[:0], w.batches[i:]...)
		w.truncated, w.maxAfter = w.maxAfter, after
	}
	var need []sealed
	boundary := upto == after
	for _, s := range w.batches {
		if s.last <= after {
			continue
		}
		if s.first > upto {
			break
		}
		need = append(need, s)
		boundary = s.last == upto
	}
	w.mu.Unlock()
	for _, b := range drop {
		l.release(b)
	}
	if !boundary {
		return Handle{}, fmt.Errorf("dstl: writer %q: persist up to %d, which is not a batch boundary (use a number Cut returned)", w.name, upto)
	}

	h := Handle{Writer: w.name, After: after, Upto: upto}
	for _, s := range need {
		select {
		case <-s.b.done:
		default:
			// A batch sealed early is complete when its stream is.
			l.finishStreamOf(s.b)
		}
		select {
		case <-s.b.done:
		case <-ctx.Done():
			return Handle{}, fmt.Errorf("dstl: writer %q: persist: waiting for batch %d: %w", w.name, s.b.seq, ctx.Err())
		}
		if s.b.err != nil {
			return Handle{}, s.b.err
		}
		if n := len(h.Objects); n == 0 || h.Objects[n-1] != s.b.object {
			// Batches of one streamed object are listed once.
			h.Objects = append(h.Objects, s.b.object)
			h.CRCs = append(h.CRCs, s.b.crc)
			if up := s.b.upload; up != nil {
				h.Uploads = append(h.Uploads, *up)
			}
		}
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
	p, c := w.cur, w.cut
	w.cur, w.cut = &part{owner: w}, nil
	w.spare = nil
	w.dedup = dedupTable{}
	batches := w.batches
	w.batches = nil
	for _, x := range []*part{p, c} {
		if x != nil {
			w.log.inflight.Add(-int64(x.size))
			w.log.queued.Add(-int64(x.size))
		}
	}
	w.mu.Unlock()
	w.log.removeWriter(w)
	w.log.arena.release(p)
	if c != nil {
		w.log.arena.release(c)
	}
	for _, s := range batches {
		w.log.release(s.b)
	}
	w.log.broadcast()
	return nil
}
