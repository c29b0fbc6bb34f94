package dstl

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddyflow/eddy/blob"
)

// ErrClosed is returned by the methods of a closed Log and its Writers,
// and of a closed Writer.
var ErrClosed = errors.New("dstl: log closed")

// BatchError reports a batch whose upload failed after all attempts. The
// log has failed with it: Persist and Append return it from then on, and
// the job must fail over (restart from its last checkpoint).
type BatchError struct {
	Batch    uint64 // the batch's number, from 1
	Object   string // the name of its first attempt
	Attempts int    // attempts made
	Err      error  // the attempts' errors, joined
}

// Error names the batch, its object and the cause.
func (e *BatchError) Error() string {
	return fmt.Sprintf("dstl: upload of batch %d (object %q) failed after %d attempt(s): %v", e.Batch, e.Object, e.Attempts, e.Err)
}

// Unwrap returns the attempts' errors.
func (e *BatchError) Unwrap() error { return e.Err }

// Log is the durable short-term log of one process. Writers append state
// changes to it; it batches the changes of all writers and uploads each
// batch as one object. It is safe for concurrent use.
type Log struct {
	store blob.Store
	opts  Options
	seed  maphash.Seed

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	wmu     sync.Mutex
	writers []*Writer // open writers, in creation order
	byName  map[string]*Writer

	sealMu   sync.Mutex  // serializes seal
	sealing  atomic.Bool // a seal is taking the writers' parts: Appends wait
	batchSeq uint64      // batches sealed, under sealMu
	scratch  []*Writer   // under sealMu

	pending  atomic.Bool   // the current batch has a change and the flusher was told
	started  chan struct{} // the current batch got its first change
	cutWait  atomic.Bool   // a writer's Cut waits for the others' (PersistDelay)
	cutCh    chan struct{} // a Cut began waiting: arm the persist delay
	genMu    sync.Mutex
	gen      chan struct{} // closed by the next seal, then replaced
	kickCh   chan struct{} // seal now (size thresholds, blocked Appends)
	quit     chan struct{} // closed by Close
	queued   atomic.Int64  // bytes in writers' unsealed parts
	inflight atomic.Int64  // bytes queued or uploading

	arena arena

	parter  blob.Parter // the store, if it builds objects from parts and Options.NoParts is not set
	minPart int         // its least part size
	open    *stream     // the stream early batches join, under sealMu

	bpMu   sync.Mutex // guards bpCond waits
	bpCond *sync.Cond

	failed      atomic.Pointer[error] // the first BatchError, sticky
	closed      atomic.Bool
	closeOnce   sync.Once
	flusher     sync.WaitGroup
	uploads     sync.WaitGroup // upload goroutines and their stragglers
	completions sync.WaitGroup // completeLater goroutines
	hedger      *blob.Hedger   // learns from the successful uploads when to hedge
	small       *blob.Hedger   // the same for the small requests of streamed objects (create, complete)

	m struct {
		changes, dropped, batches, uploads, failedBatches   atomic.Int64
		attempts, hedged, retries, failedAttempts           atomic.Int64
		loserDeletes, deleteErrors, bytesRaw, bytesUploaded atomic.Int64
		blocked, blockedNanos, persists                     atomic.Int64
		localWrites, localErrors, localDeletes              atomic.Int64
		uploadNanos, objects, parts                         atomic.Int64
		completions, completionNanos, failedCompletions     atomic.Int64
		uploadBuckets                                       [len(UploadLatencyBuckets)]atomic.Int64
	}
}

// Open returns a log uploading to store. Zero fields of opts take their
// defaults. Close it to stop its goroutines.
func Open(store blob.Store, opts Options) (*Log, error) {
	if store == nil {
		return nil, errors.New("dstl: Open with a nil store")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Log{
		store:   store,
		opts:    o,
		seed:    maphash.MakeSeed(),
		ctx:     ctx,
		cancel:  cancel,
		byName:  map[string]*Writer{},
		started: make(chan struct{}, 1),
		cutCh:   make(chan struct{}, 1),
		gen:     make(chan struct{}),
		kickCh:  make(chan struct{}, 1),
		quit:    make(chan struct{}),
		hedger:  blob.NewHedger(o.HedgeAfterP90, o.UploadTimeout),
		small:   blob.NewHedger(o.HedgeAfterP90, o.UploadTimeout),
	}
	if p, min, ok := blob.PartsOf(store); ok && !o.NoParts && o.MaxInFlight >= 4*min {
		// (Pending frames wait for a part's worth: with less in flight
		// allowed, blocked Appends could never add the rest.)
		l.parter, l.minPart = p, min
	}
	l.bpCond = sync.NewCond(&l.bpMu)
	l.flusher.Add(1)
	go l.flushLoop()
	return l, nil
}

// Close stops the log: changes not yet sealed into a batch are dropped,
// uploads in progress are cancelled (Persist calls waiting for them return
// ErrClosed), blocked Appends return ErrClosed, and Close waits for the
// log's goroutines, including best-effort deletions of losing attempts'
// objects and the completions of streamed objects already durable (see
// Options.NoParts; one whose attempt fails then is left to a reader, which
// completes it from the handle). Local copies are kept, for local recovery. Close returns the
// error the log failed with, if any.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		close(l.quit)
		l.cancel()
		l.broadcast()
		l.flusher.Wait()
		l.closeOpenStream()
		l.uploads.Wait()
		l.completions.Wait()
	})
	return l.err()
}

// err returns the error the log failed with, or nil.
func (l *Log) err() error {
	if p := l.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// usable returns why the log cannot take changes, or nil.
func (l *Log) usable() error {
	if err := l.err(); err != nil {
		return err
	}
	if l.closed.Load() {
		return ErrClosed
	}
	return nil
}

// fail makes err the log's failure, unless it already failed.
func (l *Log) fail(err error) {
	l.failed.CompareAndSwap(nil, &err)
	l.broadcast()
}

// Writer returns a new writer named name whose first change gets sequence
// number 1. It is WriterFrom(name, 0).
func (l *Log) Writer(name string) *Writer { return l.WriterFrom(name, 0) }

// WriterFrom returns a new writer named name whose first change gets
// sequence number after+1. A restored subtask passes the Upto of its
// restored Handle, so that its numbering continues and the handles of
// both runs replay in order. The name identifies the writer in objects
// and Handles; it must be unique within the log and stable across
// restarts (e.g. "distance-3"). A writer of the same name that is still
// open is closed.
func (l *Log) WriterFrom(name string, after uint64) *Writer {
	w := &Writer{log: l, name: name, seq: after}
	w.cur = &part{owner: w}
	l.wmu.Lock()
	old := l.byName[name]
	l.byName[name] = w
	l.writers = append(l.writers, w)
	l.wmu.Unlock()
	if old != nil {
		old.Close()
	}
	return w
}

// removeWriter unregisters w.
func (l *Log) removeWriter(w *Writer) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.byName[w.name] == w {
		delete(l.byName, w.name)
	}
	for i, x := range l.writers {
		if x == w {
			l.writers = append(l.writers[:i], l.writers[i+1:]...)
			break
		}
	}
}

// Options returns the options the log runs with, defaults filled in.
func (l *Log) Options() Options { return l.opts }

// Metrics returns the log's counters and gauges.
func (l *Log) Metrics() Metrics {
	return Metrics{
		Changes:        l.m.changes.Load(),
		DroppedChanges: l.m.dropped.Load(),
		Batches:        l.m.batches.Load(),
		Uploads:        l.m.uploads.Load(),
		FailedBatches:  l.m.failedBatches.Load(),
		Attempts:       l.m.attempts.Load(),
		HedgedUploads:  l.m.hedged.Load(),
		Retries:        l.m.retries.Load(),
		FailedAttempts: l.m.failedAttempts.Load(),
		LoserDeletes:   l.m.loserDeletes.Load(),
		DeleteErrors:   l.m.deleteErrors.Load(),
		BytesRaw:       l.m.bytesRaw.Load(),
		BytesUploaded:  l.m.bytesUploaded.Load(),
		BytesInFlight:  l.inflight.Load(),
		BlockedAppends: l.m.blocked.Load(),
		BlockedTime:    time.Duration(l.m.blockedNanos.Load()),
		Persists:       l.m.persists.Load(),
		LocalWrites:    l.m.localWrites.Load(),
		LocalErrors:    l.m.localErrors.Load(),
		LocalDeletes:   l.m.localDeletes.Load(),
		UploadLatency:  l.uploadLatency(),
		Objects:        l.m.objects.Load(),
		Parts:          l.m.parts.Load(),

		Completions:       l.m.completions.Load(),
		CompletionTime:    time.Duration(l.m.completionNanos.Load()),
		FailedCompletions: l.m.failedCompletions.Load(),
	}
}

// UploadLatencyBuckets are the upper bounds of Metrics.UploadLatency's
// buckets: 5 ms to about 10 s, doubling.
var UploadLatencyBuckets = [...]time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond,
	80 * time.Millisecond, 160 * time.Millisecond, 320 * time.Millisecond, 640 * time.Millisecond, 1280 * time.Millisecond,
	2560 * time.Millisecond, 5120 * time.Millisecond, 10240 * time.Millisecond}

// Latency is a histogram of durations: Count observations summing to Sum,
// Buckets[i] of them at most UploadLatencyBuckets[i] (cumulative, as
// Prometheus histograms count).
type Latency struct {
	Count   int64
	Sum     time.Duration
	Buckets [len(UploadLatencyBuckets)]int64
}

// observeUpload records how long a batch took to become durable, from its
// first attempt to the winning one's end.
func (l *Log) observeUpload(d time.Duration) {
	l.m.uploadNanos.Add(int64(d))
	for i, b := range UploadLatencyBuckets {
		if d <= b {
			l.m.uploadBuckets[i].Add(1)
			return
		}
	}
}

func (l *Log) uploadLatency() Latency {
	var lat Latency
	lat.Sum = time.Duration(l.m.uploadNanos.Load())
	var cum int64
	for i := range UploadLatencyBuckets {
		cum += l.m.uploadBuckets[i].Load()
		lat.Buckets[i] = cum
	}
	// Uploads beyond the last bucket count only in Count (one per object);
	// read after the buckets, which an upload fills first, it is never
	// below them.
	lat.Count = max(l.m.objects.Load(), cum)
	return lat
}

// kick asks the flusher to seal the current batch now.
func (l *Log) kick() {
	select {
	case l.kickCh <- struct{}{}:
	default:
	}
}

// flushLoop seals the current batch FlushInterval after its first change
// (if set), PersistDelay after a Cut that waits for the other writers',
// and whenever kicked.
func (l *Log) flushLoop() {
	defer l.flusher.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	cut := time.NewTimer(time.Hour)
	cut.Stop()
	armed, cutArmed := false, false
	for {
		select {
		case <-l.quit:
			t.Stop()
			cut.Stop()
			return
		case <-l.started:
			if !armed && l.opts.FlushInterval > 0 {
				t.Reset(l.opts.FlushInterval)
				armed = true
			}
		case <-l.cutCh:
			if !cutArmed {
				cut.Reset(l.opts.PersistDelay)
				cutArmed = true
			}
		case <-cut.C:
			cutArmed = false
			if l.cutWait.Load() {
				l.seal(false)
			}
		case <-t.C:
			armed = false
			l.seal(true)
		case <-l.kickCh:
			l.seal(true)
		}
	}
}

// sealSignal returns a channel the next seal closes.
func (l *Log) sealSignal() chan struct{} {
	l.genMu.Lock()
	defer l.genMu.Unlock()
	return l.gen
}

// anyCut reports whether a writer's Cut waits for its batch.
func (l *Log) anyCut() bool {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	for _, w := range l.writers {
		w.mu.Lock()
		cut := w.cut != nil
		w.mu.Unlock()
		if cut {
			return true
		}
	}
	return false
}

// allCut reports whether a Cut waits and every writer holding unsealed
// changes has cut: the batch of a checkpoint barrier is complete.
func (l *Log) allCut() bool {
	l.wmu.Lock()
	ws := append([]*Writer(nil), l.writers...)
	l.wmu.Unlock()
	any := false
	for _, w := range ws {
		w.mu.Lock()
		cut, open := w.cut != nil, !w.closed && w.cur.n > 0
		w.mu.Unlock()
		if cut {
			any = true
		} else if open {
			return false
		}
	}
	return any
}

// broadcast wakes the Appends waiting for room.
func (l *Log) broadcast() {
	l.bpMu.Lock()
	l.bpCond.Broadcast()
	l.bpMu.Unlock()
}

// waitRoom blocks while more than MaxInFlight bytes are queued or
// uploading, and the log is usable.
func (l *Log) waitRoom() error {
	max := int64(l.opts.MaxInFlight)
	if l.inflight.Load() <= max {
		return nil
	}
	l.bpMu.Lock()
	var start time.Time
	for l.inflight.Load() > max && l.usable() == nil {
		if start.IsZero() {
			start = time.Now()
			l.m.blocked.Add(1)
		}
		l.kick() // queued bytes count too: get them uploading
		l.bpCond.Wait()
	}
	l.bpMu.Unlock()
	if !start.IsZero() {
		l.m.blockedNanos.Add(int64(time.Since(start)))
	}
	return l.usable()
}

// seal ends the current batch: it takes the unsealed changes of every
// writer, those up to its Cut for a writer whose Cut waits, and starts
// uploading them as one object. With all, the changes a waiting writer
// appended after its Cut are sealed too, into a second object; without,
// it seals only if a Cut waits (writers racing to end one barrier's
// batch end it once).
func (l *Log) seal(all bool) {
	l.sealMu.Lock()
	defer l.sealMu.Unlock()
	l.sealLocked(all)
}

// sealLocked is seal with sealMu held.
func (l *Log) sealLocked(all bool) {
	if all || l.anyCut() {
		for l.sealBatch() && all {
		}
	}
	l.cutWait.Store(false)
	l.genMu.Lock()
	close(l.gen)
	l.gen = make(chan struct{})
	l.genMu.Unlock()
}

// sealFull seals the current batch early, from the Append of w that
// found it over a size threshold, unless another seal took the changes
// first. Sealing here rather than in the flusher bounds a batch by its
// threshold plus the change that crossed it: a flusher goroutine that a
// busy machine schedules late lets appenders add megabytes meanwhile,
// past what one request uploads (FlushBytes). A seal only moves the
// writers' buffers; the encoding and the upload run in their own
// goroutine.
func (l *Log) sealFull(w *Writer) {
	l.sealMu.Lock()
	defer l.sealMu.Unlock()
	w.mu.Lock()
	full := w.cur.size >= l.opts.WriterFlushBytes
	w.mu.Unlock()
	if full || l.queued.Load() >= int64(l.opts.FlushBytes) {
		l.sealLocked(true)
	}
}

// sealBatch seals one batch: each writer's cut part, or its current part
// if it has none. It reports whether a writer kept changes (appended after
// its Cut). sealMu is held.
func (l *Log) sealBatch() (more bool) {
	l.pending.Store(false)
	l.sealing.Store(true)
	l.wmu.Lock()
	ws := append(l.scratch[:0], l.writers...)
	l.wmu.Unlock()
	var b *batch
	var changes, dropped int64
	barrier := false // a writer's Cut ends in this batch
	for _, w := range ws {
		w.mu.Lock()
		p := w.cut
		if p == nil && w.cur.n > 0 {
			p = w.cur
		}
		if p != nil && !w.closed && p.n > 0 {
			if b == nil {
				b = &batch{done: make(chan struct{})}
			}
			if p == w.cut {
				barrier = true
				w.cut = nil
				more = more || w.cur.n > 0
			} else {
				w.cur = w.nextPart()
				w.dedup.reset()
			}
			w.batches = append(w.batches, sealed{b: b, first: p.first, last: p.last, size: int64(p.kept)})
			b.parts = append(b.parts, p)
			b.mu.Lock() // w may release b as soon as w.mu is unlocked
			b.refs++
			b.mu.Unlock()
			b.queued += int64(p.size)
			l.queued.Add(-int64(p.size))
			changes += int64(p.n)
			dropped += int64(p.dropped)
		}
		w.mu.Unlock()
	}
	l.sealing.Store(false)
	clear(ws)
	l.scratch = ws[:0]
	if more && l.pending.CompareAndSwap(false, true) {
		// Changes after a Cut stay for the next batch: its flush timer.
		select {
		case l.started <- struct{}{}:
		default:
		}
	}
	if b == nil {
		return more
	}
	l.batchSeq++
	b.seq = l.batchSeq
	b.name = l.opts.ObjectName(b.seq)
	l.joinStream(b, barrier)
	l.m.batches.Add(1)
	l.m.changes.Add(changes)
	l.m.dropped.Add(dropped)
	l.uploads.Add(1)
	go l.upload(b)
	return more
}
