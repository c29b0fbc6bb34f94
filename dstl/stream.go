package dstl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync"
	"time"

	"github.com/eddyflow/eddy/blob"
)

// maxStreamBatches bounds the batches of one streamed object: a log that
// seals batch after batch without a barrier completes its object and
// starts another every this many.
const maxStreamBatches = 64

// stream is one log object built from several batches, on a store that
// builds objects from parts (blob.Parter, S3's multipart upload): the
// batches sealed early in a checkpoint interval, at the size thresholds,
// and the batch its barrier seals. Each batch is a frame of the object
// (the header and body of a one-batch object); the frames go up as parts
// as soon as they add up to the store's least part size, and the barrier's
// batch uploads the rest and completes the object. So a checkpoint
// interval's log is one object however much the interval logs, and the
// barrier waits for what was logged since the last part only.
//
// The batches of a stream take turns (turn, next) to add their frames in
// sealing order; the fields below the mutex line belong to the batch
// whose turn it is.
type stream struct {
	name string // the first batch's object name
	seq  uint64 // the first batch's number, for errors

	// Under Log.sealMu.
	tail    chan struct{} // the newest member's next: closed when it has added its frame
	batches []*batch      // members, in sealing order

	mu    sync.Mutex
	err   error  // the first failure (sealing, create, a part)
	live  int    // members some writer still tracks
	local string // path of the local copy, once complete

	// The turn holder's.
	up      blob.PartUpload
	parts   int            // part numbers used
	wg      sync.WaitGroup // part uploads running
	pending []byte         // frames not yet in a part
	held    int64          // in-flight bytes of pending, released when it is uploaded
	crc     uint32         // blob.Checksum of the object's bytes so far
	size    int64          // the object's bytes so far
	frames  []uint32       // the frames' checksums
	tmp     *os.File       // the local copy being written
	noLocal bool           // writing the local copy failed
	raw     int64          // raw body bytes of the frames
	began   time.Time      // when the last member's turn began
}

// setErr records the stream's first failure.
func (s *stream) setErr(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

func (s *stream) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// joinStream makes b a member of the open stream, opening one for an
// early batch, and makes a barrier's batch (or the maxStreamBatches-th)
// the stream's last. A barrier's batch with no stream open is a plain
// object. sealMu is held.
func (l *Log) joinStream(b *batch, barrier bool) {
	if l.parter == nil {
		return
	}
	s := l.open
	if s == nil {
		if barrier {
			return
		}
		s = &stream{name: b.name, seq: b.seq, tail: make(chan struct{})}
		close(s.tail)
		l.open = s
	}
	b.mu.Lock()
	b.stream = s
	b.mu.Unlock()
	b.turn, b.next = s.tail, make(chan struct{})
	s.tail = b.next
	s.batches = append(s.batches, b)
	s.mu.Lock()
	s.live++
	s.mu.Unlock()
	if barrier || len(s.batches) >= maxStreamBatches {
		b.last = true
		l.open = nil
	}
}

// finishStreamOf completes the stream b belongs to, if it is still open:
// a Persist needs b, and no barrier batch may come to end its stream (a
// writer cutting with nothing new to log ends no batch).
func (l *Log) finishStreamOf(b *batch) {
	l.sealMu.Lock()
	defer l.sealMu.Unlock()
	b.mu.Lock()
	s := b.stream
	b.mu.Unlock()
	if s != nil && l.open == s {
		l.endOpenStream()
	}
}

// endOpenStream completes the open stream after its members' frames.
// sealMu is held.
func (l *Log) endOpenStream() {
	s := l.open
	l.open = nil
	turn, next := s.tail, make(chan struct{})
	s.tail = next
	l.uploads.Add(1)
	go func() {
		defer l.uploads.Done()
		<-turn
		defer close(next)
		s.began = time.Now()
		l.completeStream(s)
	}()
}

// streamFrame adds b's sealed object (data, of rawLen raw body bytes, or
// the sealing error err) to its stream as a frame, in its turn, and
// uploads a part when enough frames are pending; the last member
// completes the stream.
func (l *Log) streamFrame(b *batch, data []byte, rawLen int64, err error) {
	s := b.stream
	<-b.turn
	defer close(b.next)
	if b.last {
		s.began = time.Now()
	}
	if err != nil {
		s.setErr(&BatchError{Batch: b.seq, Object: s.name, Err: err})
	} else if s.failure() == nil {
		s.crc = blob.UpdateChecksum(s.crc, data)
		s.size += int64(len(data))
		s.frames = append(s.frames, objectCRC(data))
		s.raw += rawLen
		l.streamLocal(s, data)
		s.pending = append(s.pending, data...)
	}
	s.held += int64(len(data)) // what upload added to the bytes in flight
	if err == nil {
		l.arena.putObject(data)
	}
	if b.last {
		l.completeStream(s)
		return
	}
	if len(s.pending) >= l.minPart && s.failure() == nil {
		l.startPart(s)
	}
}

// streamLocal appends a frame to the stream's local copy (LocalDir).
func (l *Log) streamLocal(s *stream, data []byte) {
	if l.opts.LocalDir == "" || s.noLocal {
		return
	}
	if s.tmp == nil {
		path := localPath(l.opts.LocalDir, s.name)
		f, err := createTemp(path)
		if err != nil {
			l.m.localErrors.Add(1)
			s.noLocal = true
			return
		}
		s.tmp = f
	}
	if _, err := s.tmp.Write(data); err != nil {
		l.m.localErrors.Add(1)
		s.tmp.Close()
		os.Remove(s.tmp.Name())
		s.tmp, s.noLocal = nil, true
	}
}

// create starts the stream's upload, with hedged attempts; the losers'
// uploads are aborted.
func (l *Log) create(s *stream) error {
	ups := make([]blob.PartUpload, l.opts.MaxAttempts)
	winner, err := l.hedged(l.small, func(int) {}, func(ctx context.Context, k int) error {
		u, err := l.parter.CreateParts(ctx, s.name)
		ups[k] = u
		return err
	}, func(winner, n int) {
		for k, u := range ups[:n] {
			if k != winner && u != nil {
				abort(u)
			}
		}
	})
	if err != nil {
		return err
	}
	s.up = ups[winner]
	return nil
}

// abort drops an upload, best effort.
func abort(u blob.PartUpload) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = u.Abort(ctx)
}

// uploadPart uploads data as part n of the stream, with hedged attempts
// (a hedge sends the same part again; the store keeps one).
func (l *Log) uploadPart(s *stream, n int, data []byte) error {
	_, err := l.hedged(l.hedger, func(int) {}, func(ctx context.Context, _ int) error {
		return s.up.UploadPart(ctx, n, data)
	}, nil)
	l.m.parts.Add(1)
	return err
}

// startPart uploads the pending frames as the stream's next part, in the
// background, creating the upload first if this is its first part.
func (l *Log) startPart(s *stream) {
	if s.up == nil {
		if err := l.create(s); err != nil {
			s.setErr(l.streamError(s, "create", err))
			return
		}
	}
	s.parts++
	n, data, held := s.parts, s.pending, s.held
	s.pending, s.held = nil, 0
	s.wg.Add(1)
	l.uploads.Add(1)
	go func() {
		defer l.uploads.Done()
		defer s.wg.Done()
		if err := l.uploadPart(s, n, data); err != nil {
			s.setErr(l.streamError(s, fmt.Sprintf("part %d", n), err))
		}
		l.inflight.Add(-held)
		l.broadcast()
	}()
}

// streamError is the BatchError of a stream's failed request.
func (l *Log) streamError(s *stream, what string, err error) error {
	var f *failedAttempts
	if errors.As(err, &f) {
		return &BatchError{Batch: s.seq, Object: s.name, Attempts: f.n, Err: fmt.Errorf("%s: %w", what, f.err)}
	}
	return err
}

// completeStream uploads the stream's last part, or, if no part went up
// yet, puts its frames as one object; then it publishes the outcome to
// every member. An object of parts is durable once its parts are up: its
// members are published with its Upload, and completeLater completes it
// in the background, so a checkpoint does not wait for the completion
// (which a server may make as slow as copying the object). It runs in the
// last turn.
func (l *Log) completeStream(s *stream) {
	object := s.name
	err := s.failure()
	var up *Upload
	if err == nil && s.up == nil {
		// All frames are pending: one Put (the store adds the trailer).
		object, err = l.putNamed(s.name, s.seq, s.pending, func() {}, func() {})
	} else if err == nil {
		s.parts++
		n := s.parts
		last := blob.AppendTrailerOf(s.pending, s.crc, s.size)
		err = l.uploadPart(s, n, last)
		if err != nil {
			err = l.streamError(s, fmt.Sprintf("part %d", n), err)
		}
		s.wg.Wait()
		if err == nil {
			err = s.failure()
		}
		if err == nil {
			up = &Upload{Object: s.name, ID: s.up.ID(), Parts: uint32(n), Size: s.size + blob.TrailerSize}
		}
	}
	s.wg.Wait()
	if err != nil && s.up != nil {
		abort(s.up)
	}
	if err == nil {
		l.observeUpload(time.Since(s.began))
		l.m.objects.Add(1)
		l.m.bytesUploaded.Add(s.size)
		l.m.bytesRaw.Add(s.raw)
	}
	l.finishLocal(s, object, err)
	crc := framesCRC(s.frames)
	if up != nil {
		// Before the members are published: Close waits for it.
		l.completions.Add(1)
	}
	for _, b := range s.batches {
		b.mu.Lock()
		if err == nil {
			b.object, b.crc, b.upload = object, crc, up
			l.m.uploads.Add(1)
		} else {
			b.err = err
			if !l.closed.Load() {
				l.m.failedBatches.Add(1)
			}
		}
		b.mu.Unlock()
		close(b.done)
	}
	l.inflight.Add(-s.held)
	s.pending, s.held = nil, 0
	if err != nil && !l.closed.Load() && !errors.Is(err, ErrClosed) {
		l.fail(err)
	}
	l.broadcast()
	if up != nil {
		go l.completeLater(s, int(up.Parts))
	}
}

// completeLater completes a streamed object whose parts are all up, after
// its members were published: the handles naming it carry its Upload
// (also once it is complete, so that handles do not depend on timing). A
// failed attempt is retried after a backoff, MaxAttempts in all; if all
// fail, the log fails with a *BatchError (the job restarts from its last
// checkpoint, whose restore completes the upload from the handle). Close waits for a completion in progress (an
// attempt takes at most AttemptTimeout) but retries none: a completion
// that fails once the log is closing is left to a reader.
func (l *Log) completeLater(s *stream, n int) {
	defer l.completions.Done()
	began := time.Now()
	backoff := l.opts.RetryBackoff
	var errs []error
	for k := 1; ; k++ {
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.AttemptTimeout)
		err := s.up.Complete(ctx, n)
		cancel()
		if err == nil {
			l.m.completions.Add(1)
			l.m.completionNanos.Add(int64(time.Since(began)))
			return
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", k, err))
		if k >= l.opts.MaxAttempts || l.closed.Load() {
			break
		}
		select {
		case <-time.After(backoff):
		case <-l.quit:
		}
		backoff = min(2*backoff, l.opts.UploadTimeout)
	}
	if !l.closed.Load() {
		l.fail(&BatchError{Batch: s.seq, Object: s.name, Attempts: len(errs), Err: fmt.Errorf("complete: %w", errors.Join(errs...))})
	}
	l.m.failedCompletions.Add(1)
}

// finishLocal renames the stream's local copy into place, or drops it if
// the stream failed or no writer tracks its batches any more.
func (l *Log) finishLocal(s *stream, object string, err error) {
	if s.tmp == nil {
		return
	}
	tmp := s.tmp.Name()
	cerr := s.tmp.Close()
	s.tmp = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || cerr != nil || s.live == 0 {
		os.Remove(tmp)
		if cerr != nil {
			l.m.localErrors.Add(1)
		}
		return
	}
	path := localPath(l.opts.LocalDir, object)
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		l.m.localErrors.Add(1)
		return
	}
	s.local = path
	l.m.localWrites.Add(1)
}

// releaseStream notes that no writer tracks b, a member of s, any more:
// the local copy goes once no member is tracked.
func (l *Log) releaseStream(s *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live--
	if s.live > 0 || s.local == "" {
		return
	}
	if err := os.Remove(s.local); err == nil {
		l.m.localDeletes.Add(1)
	}
	s.local = ""
}

// closeOpenStream ends the open stream when the log closes: its members
// fail with ErrClosed and its upload is aborted.
func (l *Log) closeOpenStream() {
	l.sealMu.Lock()
	defer l.sealMu.Unlock()
	if l.open != nil {
		l.endOpenStream()
	}
}

// framesCRC is the checksum a Handle records for an object of frames
// with the given checksums: the one frame's, or the CRC-32C of their
// little-endian concatenation.
func framesCRC(frames []uint32) uint32 {
	if len(frames) == 1 {
		return frames[0]
	}
	var b []byte
	for _, c := range frames {
		b = binary.LittleEndian.AppendUint32(b, c)
	}
	return crc32.Checksum(b, castagnoli)
}
