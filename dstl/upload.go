package dstl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/eddyflow/eddy/blob"
)

// upload encodes b, uploads it with hedged attempts, writes its local
// copy, and publishes the outcome to the writers waiting in Persist.
func (l *Log) upload(b *batch) {
	defer l.uploads.Done()
	raw := l.encode(b)
	rawLen := int64(len(raw) - headerSize)
	var dst []byte
	if l.opts.Compression {
		dst = l.arena.object(len(raw)/2 + 64)
	}
	data, err := sealObject(raw, l.opts.Compression, dst)
	if l.opts.Compression {
		l.arena.putObject(raw)
	}
	for _, p := range b.parts {
		p.owner.recycle(p)
	}
	b.parts = nil
	size := int64(len(data))
	l.inflight.Add(size - b.queued)
	l.broadcast()
	if b.stream != nil {
		l.streamFrame(b, data, rawLen, err)
		return
	}

	var object string
	if err == nil {
		b.crc = objectCRC(data) // read by waiters only after done is closed
		b.dataRefs.Store(1)
		began := time.Now()
		object, err = l.put(b, data)
		if err == nil {
			l.observeUpload(time.Since(began))
		}
	} else {
		err = &BatchError{Batch: b.seq, Object: b.name, Err: err}
	}
	if err == nil {
		l.m.uploads.Add(1)
		l.m.objects.Add(1)
		l.m.bytesUploaded.Add(size)
		l.m.bytesRaw.Add(rawLen)
		l.writeLocal(b, object, data)
	} else if !l.closed.Load() {
		l.m.failedBatches.Add(1)
	}
	l.unrefData(b, data)
	b.object, b.err = object, err
	close(b.done)
	l.inflight.Add(-size)
	if err != nil && !l.closed.Load() {
		l.fail(err)
	}
	l.broadcast()
}

// unrefData drops a reference to the object buffer of b: the upload's own,
// or an attempt's. The last one recycles the buffer. (Stores do not retain
// the data given to Put after it returns, as io.Writer implementations do
// not.)
func (l *Log) unrefData(b *batch, data []byte) {
	if b.dataRefs.Add(-1) == 0 {
		l.arena.putObject(data)
	}
}

// encode builds the raw body of b (after headerSize bytes of room for the
// header): one section per part, without the superseded changes.
func (l *Log) encode(b *batch) []byte {
	n := headerSize + binary.MaxVarintLen64
	for _, p := range b.parts {
		n += 2*binary.MaxVarintLen64 + 4 + len(p.owner.name) + p.kept + 3*(p.n-p.dropped)
	}
	raw := l.arena.object(n)
	raw = binary.AppendUvarint(raw, uint64(len(b.parts)))
	for _, p := range b.parts {
		raw = binary.AppendUvarint(raw, uint64(len(p.owner.name)))
		raw = append(raw, p.owner.name...)
		raw = binary.AppendUvarint(raw, uint64(p.n-p.dropped))
		lenAt := len(raw)
		raw = append(raw, 0, 0, 0, 0) // the changes' length, below
		var prev uint64
		for bi, blk := range p.blocks {
			cnt := min(entryBlock, p.n-bi*entryBlock)
			for i := range blk[:cnt] {
				e := &blk[i]
				if e.superseded {
					continue
				}
				raw = binary.AppendUvarint(raw, e.seq-prev)
				prev = e.seq
				raw = append(raw, p.chunks[e.chunk][e.off:e.end]...)
			}
		}
		binary.LittleEndian.PutUint32(raw[lenAt:], uint32(len(raw)-lenAt-4))
	}
	return raw
}

// attempt is the outcome of one upload attempt.
type attempt struct {
	k   int
	err error
}

// put uploads data as batch b: a first attempt under b.name, a hedge
// (named b.name+"-h<k>") whenever the newest attempt has run for the hedge
// delay (blob.Hedger), and a retry after each failure, MaxAttempts in all. The
// first attempt to succeed wins; the others are cancelled and their
// objects deleted once they have finished, best effort.
func (l *Log) put(b *batch, data []byte) (string, error) {
	return l.putNamed(b.name, b.seq, data, func() { b.dataRefs.Add(1) }, func() { l.unrefData(b, data) })
}

// putNamed is put of data under name for batch seq; ref and unref hold
// and drop data for the time of an attempt.
func (l *Log) putNamed(name string, seq uint64, data []byte, ref, unref func()) (string, error) {
	nameOf := func(k int) string {
		if k == 0 {
			return name
		}
		return fmt.Sprintf("%s-h%d", name, k)
	}
	winner, err := l.hedged(l.hedger, func(int) { ref() }, func(ctx context.Context, k int) error {
		defer unref()
		return l.store.Put(ctx, nameOf(k), data)
	}, func(winner, n int) {
		for k := range n {
			if k == winner {
				continue
			}
			// A failed Put may have stored the object anyway; deleting a
			// missing object is not an error.
			dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
			if derr := l.store.Delete(dctx, nameOf(k)); derr != nil {
				l.m.deleteErrors.Add(1)
			} else {
				l.m.loserDeletes.Add(1)
			}
			dcancel()
		}
	})
	if err != nil {
		var f *failedAttempts
		if errors.As(err, &f) {
			return "", &BatchError{Batch: seq, Object: name, Attempts: f.n, Err: f.err}
		}
		return "", err
	}
	return nameOf(winner), nil
}

// failedAttempts is hedged's error when every attempt failed.
type failedAttempts struct {
	n   int
	err error
}

func (f *failedAttempts) Error() string { return fmt.Sprintf("%d attempt(s) failed: %v", f.n, f.err) }

// hedged runs attempts of one request until one succeeds: a first one, a
// hedge whenever the newest has run for the hedge delay (h, a
// blob.Hedger), and a retry after each failure, MaxAttempts in all.
// begin(k) runs before attempt k starts, in hedged's goroutine; run(ctx,
// k) is the attempt. The first to succeed wins and the others are
// cancelled; once all have finished, cleanup(winner, n) runs in the
// background (winner -1 if none won; n attempts were started). The
// successful attempts' durations teach h: uploads of batches and parts
// teach one hedger, the small requests of streamed objects (create,
// complete) their own, so that neither waits on the other's typical
// duration. It returns the winner, or a *failedAttempts, or ErrClosed.
func (l *Log) hedged(h *blob.Hedger, begin func(k int), run func(ctx context.Context, k int) error, cleanup func(winner, n int)) (int, error) {
	ctx, cancel := context.WithCancel(l.ctx)
	results := make(chan attempt, l.opts.MaxAttempts)
	n, running := 0, 0
	start := func() {
		k := n
		n++
		running++
		begin(k)
		l.m.attempts.Add(1)
		l.uploads.Add(1)
		go func() {
			defer l.uploads.Done()
			began := time.Now()
			actx, acancel := context.WithTimeout(ctx, l.opts.AttemptTimeout)
			err := run(actx, k)
			acancel()
			if err == nil {
				h.Record(time.Since(began))
			}
			results <- attempt{k, err}
		}()
	}
	finish := func(winner int, err error) (int, error) {
		cancel()
		if cleanup != nil && (winner < 0 || n > 1) {
			l.uploads.Add(1)
			go func(running int) {
				defer l.uploads.Done()
				for ; running > 0; running-- {
					<-results
				}
				cleanup(winner, n)
			}(running)
		}
		return winner, err
	}

	start()
	hedge := time.NewTimer(h.Delay())
	defer hedge.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	retryArmed := false
	backoff := l.opts.RetryBackoff
	var errs []error
	for {
		select {
		case r := <-results:
			running--
			if r.err == nil {
				return finish(r.k, nil)
			}
			l.m.failedAttempts.Add(1)
			errs = append(errs, fmt.Errorf("attempt %d: %w", r.k+1, r.err))
			if l.closed.Load() {
				return finish(-1, ErrClosed)
			}
			if n < l.opts.MaxAttempts {
				if !retryArmed {
					retry.Reset(backoff)
					retryArmed = true
					backoff = min(2*backoff, l.opts.UploadTimeout)
				}
			} else if running == 0 {
				return finish(-1, &failedAttempts{n: n, err: errors.Join(errs...)})
			}
		case <-hedge.C:
			if n < l.opts.MaxAttempts && running > 0 {
				l.m.hedged.Add(1)
				start()
				hedge.Reset(h.Delay())
			}
		case <-retry.C:
			retryArmed = false
			if n < l.opts.MaxAttempts {
				l.m.retries.Add(1)
				start()
				hedge.Reset(h.Delay())
			}
		case <-l.ctx.Done():
			return finish(-1, ErrClosed)
		}
	}
}

// localPath returns the file of the local copy of object in dir.
func localPath(dir, object string) string {
	return filepath.Join(dir, filepath.FromSlash(object))
}

// writeLocal writes the local copy of b's object, if LocalDir is set and
// a writer still tracks b. It writes a temporary file and renames it, but
// does not sync: a copy lost or torn in a crash fails its checksum and
// Read falls back to the store.
func (l *Log) writeLocal(b *batch, object string, data []byte) {
	if l.opts.LocalDir == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refs == 0 {
		return
	}
	path := localPath(l.opts.LocalDir, object)
	if err := writeFile(path, data); err != nil {
		l.m.localErrors.Add(1)
		return
	}
	b.local = path
	l.m.localWrites.Add(1)
}

// writeFile writes data to path through a temporary file in its directory
// (named with a leading '.', which Read and PruneLocal ignore).
func writeFile(path string, data []byte) error {
	f, err := createTemp(path)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// createTemp creates the temporary file of a local copy of path, in its
// directory (named with a leading '.', which Read and PruneLocal ignore).
func createTemp(path string) (*os.File, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
}

// release drops a writer's reference to b; the local copy of a batch no
// writer tracks any more is deleted.
func (l *Log) release(b *batch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refs--
	if b.refs == 0 && b.stream != nil {
		l.releaseStream(b.stream)
		return
	}
	if b.refs > 0 || b.local == "" {
		return
	}
	if err := os.Remove(b.local); err == nil {
		l.m.localDeletes.Add(1)
	}
	b.local = ""
}
