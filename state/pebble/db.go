package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eddyflow/eddy/state"
)

// DB is the Pebble database of one keyed subtask: the key groups
// [start, end) of maxParallelism. It is a state.Store; the subtask's
// goroutine uses it through a state.Backend (NewStoreBackend), and the
// checkpoint and health methods may be called from another goroutine.
type DB struct {
	pool                 *Pool
	dir                  string
	db                   *pebble.DB
	maxPar, start, end   int
	batch                *pebble.Batch
	iter                 *pebble.Iterator // for Load of elements, reopened after each Commit
	point                *pebble.Iterator // for Load of a whole value, reopened after each Commit
	key, lo, hi, scanKey []byte           // scratch for record keys and bounds

	mu       sync.Mutex  // guards failure and closed
	failure  *DirError   // the first failure of the directory (fail)
	broken   atomic.Bool // set with failure
	restored *Checkpoint // the part Restore opened, if any
	closed   bool
	failed   chan struct{} // closed with the failure
	fs       *trackingFS
	opts     *pebble.Options // the options the DB was opened with, for the tables SetSorted writes
	ingests  int             // names SetSorted's table files

	// The writes that may wait for Pebble's background work run on the
	// writer goroutine (see write).
	writeMu sync.Mutex        // one write at a time; guards stuck
	work    chan func() error // to the writer; closed by Close
	result  chan error        // from it; holds a result nobody waited for
	stuck   bool              // a write given up on has not returned
	apply   func() error      // commits applying: d.applyBatch, bound once
	// applying is the batch the writer commits (see applyBatch).
	applying *pebble.Batch

	// Read iterators are closed on the closer goroutine (see closeIters),
	// all of them before the DB closes.
	toClose    chan *pebble.Iterator
	closerDone chan struct{}

	restoreStats RestoreStats
}

// DirError reports a failure of the DB in a local directory: the disk is
// full, the directory was deleted, or a file of it is damaged. The job
// fails and restores from its last checkpoint; it does not read state from
// the directory again.
type DirError struct {
	Dir string // the DB's directory
	Op  string // what failed
	Err error
}

func (e *DirError) Error() string {
	return fmt.Sprintf("pebble: state directory %s: %s: %v", e.Dir, e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *DirError) Unwrap() error { return e.Err }

// Open opens (creating it if needed) the DB in dir for the key groups
// [start, end) of maxParallelism.
func (p *Pool) Open(dir string, maxParallelism, start, end int) (*DB, error) {
	return p.open(dir, maxParallelism, start, end, false)
}

func (p *Pool) open(dir string, maxParallelism, start, end int, mustExist bool) (*DB, error) {
	if maxParallelism < 1 || maxParallelism > MaxKeyGroups || start < 0 || start >= end || end > maxParallelism {
		return nil, fmt.Errorf("pebble: key groups [%d, %d) of %d do not fit the key layout (at most %d key groups)", start, end, maxParallelism, MaxKeyGroups)
	}
	if err := p.acquire(); err != nil {
		return nil, err
	}
	d := &DB{pool: p, dir: dir, maxPar: maxParallelism, start: start, end: end, failed: make(chan struct{}), fs: newTrackingFS()}
	if p.wrapFS != nil {
		d.fs.FS = p.wrapFS(d.fs.FS)
	}
	if !mustExist {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			p.release()
			return nil, &DirError{Dir: dir, Op: "create", Err: err}
		}
	}
	o := p.options(d.background)
	o.FS = d.fs
	o.ErrorIfNotExists = mustExist
	db, err := pebble.Open(dir, o)
	if err != nil {
		p.release()
		return nil, &DirError{Dir: dir, Op: "open", Err: err}
	}
	d.db, d.batch, d.opts = db, db.NewBatch(), o.Clone()
	d.opts.EnsureDefaults() // as Open did to its own copy
	d.work, d.result = make(chan func() error), make(chan error, 1)
	d.apply = d.applyBatch
	go d.writer()
	d.toClose, d.closerDone = make(chan *pebble.Iterator, closeQueue), make(chan struct{})
	go d.closer()
	return d, nil
}

// closeQueue is how many read iterators may wait for the closer; past it,
// closeIters closes them itself.
const closeQueue = 16

// closer closes the read iterators handed to it until closeDB. Closing the
// last iterator of an old version of the DB (a compaction or flush has
// replaced files since it opened) makes Pebble evict the replaced files'
// blocks from the block cache on the closing goroutine, yielding the
// processor between chunks: on a loaded machine that took the subtask half
// a second in a slow checkpoint's trace, with records and the barrier
// waiting behind it.
func (d *DB) closer() {
	defer close(d.closerDone)
	for it := range d.toClose {
		if err := it.Close(); err != nil {
			d.fail("read", err)
		}
	}
}

// writer runs the writes handed to it, one at a time, until Close.
func (d *DB) writer() {
	for fn := range d.work {
		d.result <- fn()
	}
}

// write runs fn, a call into Pebble that may wait for Pebble's background
// work (a write waits for a flush when the memtables are full, or for
// compactions when L0 is; an ingest waits for the flush of a memtable it
// overlaps), on the writer goroutine, and returns its error wrapped as a
// failure to op. It returns the DB's failure instead as soon as a
// background flush or compaction fails: Pebble retries a failed flush for
// ever, and a write that waits for one would never return, nor would the
// job. The writer then stays with fn; Close abandons the DB if fn has not
// returned by then. done is false if fn may still be running: what it
// uses (a batch) must not be used again.
func (d *DB) write(op string, fn func() error) (done bool, err error) {
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	if err := d.Err(); err != nil { // failed, or closed: work is closed
		return true, err
	}
	select {
	case d.work <- fn:
	case <-d.failed:
		return true, d.Err()
	}
	select {
	case err := <-d.result:
		return true, d.fail(op, err)
	case <-d.failed:
		select {
		case err := <-d.result: // it returned as the failure came
			return true, d.fail(op, err)
		default:
		}
		d.stuck = true
		return false, d.Err()
	}
}

// background records a failure of a background flush or compaction; see
// fail.
func (d *DB) background(err error) { d.fail("background flush or compaction", err) }

// fail records err, a failure of op that leaves the directory's contents
// in doubt (a read, a write, a flush, the directory gone), and returns it
// as a *DirError. The first one fails the DB: from then on every read,
// write, flush and checkpoint returns it, and nothing is read from the
// directory again.
func (d *DB) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	err = d.wrap(op, err)
	var de *DirError
	errors.As(err, &de)
	d.mu.Lock()
	if d.failure == nil {
		d.failure = de
		d.broken.Store(true)
		close(d.failed)
	}
	d.mu.Unlock()
	return err
}

// Err returns the DB's failure (see fail), a *DirError, or an error if
// the DB is closed.
func (d *DB) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failure != nil {
		return d.failure
	}
	if d.closed {
		return errClosed
	}
	return nil
}

// Dir returns the DB's directory.
func (d *DB) Dir() string { return d.dir }

// KeyGroups returns the key groups [start, end) the DB holds.
func (d *DB) KeyGroups() (start, end int) { return d.start, d.end }

// Close closes the DB, dropping uncommitted writes. A DB whose failure
// left a write waiting for a flush that cannot succeed is abandoned rather
// than closed (Pebble's Close would wait for that write): see abandon.
func (d *DB) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	d.writeMu.Lock()
	stuck := d.stuck
	if stuck {
		select {
		case <-d.result: // the write returned after all
			stuck = false
		default:
		}
	}
	close(d.work)
	d.writeMu.Unlock()
	if stuck {
		d.pool.release() // the job's restore opens another DB
		d.abandon()
		return &DirError{Dir: d.dir, Op: "close", Err: errAbandoned}
	}
	err := d.closeDB()
	d.pool.release()
	return err
}

// closeDB closes the Pebble DB and what reads and writes it.
func (d *DB) closeDB() error {
	d.closeIters()
	close(d.toClose)
	<-d.closerDone
	d.batch.Close()
	if err := d.db.Close(); err != nil {
		return &DirError{Dir: d.dir, Op: "close", Err: err}
	}
	return nil
}

// errAbandoned is why Close leaves a DB open.
var errAbandoned = errors.New("abandoned: a write waits for a flush that cannot succeed; its memory stays until the process ends")

// abandon gives up on a failed DB whose writer waits for a flush that
// cannot succeed (the disk is full or the directory gone, and Pebble
// retries the flush in a loop): the DB's file operations wait from now on
// instead of failing, which stops that loop, and the DB's memtables and
// goroutines stay until the process ends. Nothing reads or writes the DB
// again; its directory may be removed. Should the write return after all,
// the DB is closed then.
func (d *DB) abandon() {
	d.fs.hold()
	go func() {
		<-d.result
		d.fs.fail(errAbandoned)
		_ = d.closeDB()
	}()
}

func (d *DB) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var de *DirError
	if errors.As(err, &de) {
		return err
	}
	return &DirError{Dir: d.dir, Op: op, Err: err}
}

// Load implements state.Store.
func (d *DB) Load(kg int, st uint32, key []byte, elems bool, fn func(sub, val []byte) error) error {
	if d.broken.Load() {
		return d.Err()
	}
	d.key = appendKeyPrefix(d.key[:0], kg, st, key)
	if !elems {
		return d.get(d.key, fn)
	}
	if d.iter == nil {
		it, err := d.db.NewIter(nil)
		if err != nil {
			return d.fail("read", err)
		}
		d.iter = it
	}
	d.lo = append(d.lo[:0], d.key...)
	d.hi = appendPrefixEnd(d.hi[:0], d.key)
	return d.each(d.iter, d.lo, d.hi, func(k, v []byte) error { return fn(k[len(d.lo):], v) })
}

// get calls fn with the value of key k, if it has one. It reads through
// an iterator kept open until the next Commit rather than with DB.Get,
// which builds the iterators of every level's files anew for each read:
// a record batch's misses share them. SeekPrefixGE (the whole key is the
// prefix with the default comparer) consults the files' bloom filters.
func (d *DB) get(k []byte, fn func(sub, val []byte) error) error {
	if d.point == nil {
		it, err := d.db.NewIter(nil)
		if err != nil {
			return d.fail("read", err)
		}
		d.point = it
	}
	if !d.point.SeekPrefixGE(k) || !bytes.Equal(d.point.Key(), k) {
		return d.fail("read", d.point.Error())
	}
	v, err := d.point.ValueAndErr()
	if err != nil {
		return d.fail("read", err)
	}
	if d.broken.Load() { // the read itself failed the DB (Pebble's Fatalf, DataCorruption)
		return d.Err()
	}
	return fn(nil, v)
}

// closeIters drops the read iterators, which see the DB as of their
// creation: the closer goroutine closes them (a failure to close fails
// the DB there), or this one if the closer is behind.
func (d *DB) closeIters() error {
	var err error
	for _, it := range []**pebble.Iterator{&d.iter, &d.point} {
		if *it == nil {
			continue
		}
		select {
		case d.toClose <- *it:
		default:
			if cerr := (*it).Close(); err == nil {
				err = cerr
			}
		}
		*it = nil
	}
	return err
}

// each calls fn for every record of it in [lo, hi) (hi empty: no bound).
func (d *DB) each(it *pebble.Iterator, lo, hi []byte, fn func(k, v []byte) error) error {
	if len(hi) == 0 {
		hi = nil
	}
	it.SetBounds(lo, hi)
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return d.fail("read", err)
		}
		if d.broken.Load() {
			return d.Err()
		}
		if err := fn(it.Key(), v); err != nil {
			return err
		}
	}
	return d.fail("read", it.Error())
}

// Set implements state.Store.
func (d *DB) Set(kg int, st uint32, key, sub, val []byte) error {
	d.key = appendKey(d.key[:0], kg, st, key, sub)
	return d.batch.Set(d.key, val, nil)
}

// Delete implements state.Store.
func (d *DB) Delete(kg int, st uint32, key, sub []byte) error {
	d.key = appendKey(d.key[:0], kg, st, key, sub)
	return d.batch.Delete(d.key, nil)
}

// DeleteKey implements state.Store.
func (d *DB) DeleteKey(kg int, st uint32, key []byte, elems bool) error {
	d.key = appendKeyPrefix(d.key[:0], kg, st, key)
	if !elems {
		return d.batch.Delete(d.key, nil)
	}
	d.hi = appendPrefixEnd(d.hi[:0], d.key)
	return d.batch.DeleteRange(d.key, d.hi, nil)
}

// Commit implements state.Store: it applies the pending writes to the
// memtable (there is no write-ahead log: durability comes from checkpoints
// and the change log). It fails with a *DirError once a background flush
// or compaction has failed.
func (d *DB) Commit() error {
	if err := d.Err(); err != nil {
		return err
	}
	if err := d.closeIters(); err != nil {
		return d.fail("read", err)
	}
	if d.batch.Empty() {
		return nil
	}
	d.applying = d.batch
	done, err := d.write("write", d.apply)
	if !done {
		d.batch = d.db.NewBatch() // the writer still holds the old one
	}
	return err
}

// applyBatch commits the pending writes; the writer runs it, on the batch
// Commit handed it (d.applying, set before the hand-over): Commit may
// replace d.batch while a write it gave up on still runs.
func (d *DB) applyBatch() error {
	b := d.applying
	err := d.db.Apply(b, pebble.NoSync)
	b.Reset()
	return err
}

// SetSorted implements state.SortedStore: the pending writes are committed
// first, so that the values, ingested after them, replace what they wrote;
// then the values go into a table file that the DB ingests (into L0, or
// lower where nothing overlaps), which costs less than a batch that Pebble
// sorts into a memtable and flushes to a table file anyway.
func (d *DB) SetSorted(st uint32, fill func(set func(kg int, key, val []byte) error) error) error {
	if err := d.Commit(); err != nil {
		return err
	}
	d.ingests++
	path := filepath.Join(d.dir, fmt.Sprintf("ingest-%d.tmp", d.ingests))
	f, err := d.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return d.fail("write a table to ingest", err)
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), d.opts.MakeWriterOptions(0, d.db.TableFormat()))
	n := 0
	err = fill(func(kg int, key, val []byte) error {
		d.key = appendKey(d.key[:0], kg, st, key, nil)
		n++
		return w.Set(d.key, val)
	})
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > 0 {
		_, err = d.write("ingest", func() error { return d.db.Ingest(context.Background(), []string{path}) })
	}
	// Ingest moved or linked the file into the DB under a name of its own.
	if rerr := d.fs.Remove(path); err == nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	return d.wrap("ingest", err)
}

// Scan implements state.Store.
func (d *DB) Scan(kg int, st uint32, fn func(key, sub, val []byte) error) error {
	if d.broken.Load() {
		return d.Err()
	}
	it, err := d.db.NewIter(nil)
	if err != nil {
		return d.fail("read", err)
	}
	lo := appendStatePrefix(nil, kg, st)
	hi := appendPrefixEnd(nil, lo)
	err = d.each(it, lo, hi, func(k, v []byte) error {
		_, _, key, sub, err := parseKey(k)
		if err != nil {
			return d.fail("read", err)
		}
		return fn(key, sub, v)
	})
	if cerr := it.Close(); err == nil {
		err = d.fail("read", cerr)
	}
	return err
}

// Flush writes the memtables to files. It fails with a *DirError if the
// directory is gone (Pebble would retry the flush for ever) or a
// background flush fails meanwhile.
func (d *DB) Flush() error {
	if err := d.Commit(); err != nil {
		return err
	}
	if err := d.checkDir(); err != nil {
		return err
	}
	done, err := d.asyncFlush()
	if err != nil {
		return err
	}
	select {
	case <-done:
	case <-d.failed:
	}
	return d.Err()
}

// asyncFlush starts a flush of the memtables; done is closed once it is
// over.
func (d *DB) asyncFlush() (<-chan struct{}, error) {
	// The writer sends the channel: a write given up on may still set
	// it after this returns.
	ch := make(chan (<-chan struct{}), 1)
	ok, err := d.write("flush", func() error {
		done, err := d.db.AsyncFlush()
		ch <- done
		return err
	})
	if !ok || err != nil {
		return nil, err
	}
	return <-ch, nil
}

// checkDir fails if the DB's directory is no longer there.
func (d *DB) checkDir() error {
	fi, err := os.Stat(d.dir)
	if err == nil && !fi.IsDir() {
		err = errors.New("not a directory")
	}
	return d.fail("check directory", err)
}

var _ state.SortedStore = (*DB)(nil)
