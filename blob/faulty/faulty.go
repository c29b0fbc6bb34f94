package faulty

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/eddyflow/eddy/blob"
)

// Options says which faults a Store injects. The zero value injects none.
type Options struct {
	// Latency is the distribution of the delay added to each call (to Put
	// only if PutOnly). Nil adds none.
	Latency Distribution
	// Scale multiplies every latency drawn from Latency, e.g. 0.01 to run a
	// test with realistic relative latencies 100× faster. Zero (or a
	// negative value) means 1.
	Scale float64
	// ErrorRate is the probability that a call fails with an injected
	// error. For Put, half of the injected errors happen after the object
	// was written (see InjectedError.Written).
	ErrorRate float64
	// StallRate is the probability that a call hangs until its context is
	// done and then returns ctx.Err().
	StallRate float64
	// Seed seeds the generators that decide the faults, one per operation:
	// with the same seed, the n-th call of an operation (the n-th Put, say)
	// meets the same fault however calls of other operations interleave.
	Seed uint64
	// PutOnly restricts injection to Put; Get, List and Delete are passed
	// straight to the inner store (and still counted in Stats).
	PutOnly bool
}

// ErrInjected is matched (errors.Is) by every error a Store injects.
var ErrInjected = errors.New("injected fault")

// InjectedError is the error of a call that failed by injection. It matches
// ErrInjected.
type InjectedError struct {
	Op   string // "put", "create" (PutIfAbsent), "get", "list" or "delete"
	Name string // the object's name, or the prefix for "list"
	// Written is true if the error was injected after the inner Put
	// succeeded: the caller sees a failure, but the object was stored.
	Written bool
}

// Error names the operation and the object (or the prefix, for List) and
// says whether the object was written anyway.
func (e *InjectedError) Error() string {
	what := "object"
	if e.Op == opNames[opList] {
		what = "prefix"
	}
	s := fmt.Sprintf("blob/faulty: %s %s %q: %v", e.Op, what, e.Name, ErrInjected)
	if e.Written {
		s += " (after the object was written)"
	}
	return s
}

// Unwrap returns ErrInjected.
func (e *InjectedError) Unwrap() error { return ErrInjected }

// OpStats counts what a Store did to the calls of one operation.
type OpStats struct {
	Calls   int64         // calls made to the wrapper
	Errors  int64         // calls that failed with an injected error
	Stalls  int64         // calls that stalled until their context was done
	Latency time.Duration // total injected latency (scaled; a wait cut short by the context counts as far as it got)
}

// Stats counts what a Store did, per operation.
type Stats struct {
	Put, Get, List, Delete OpStats
}

type op int

const (
	opPut op = iota
	opGet
	opList
	opDelete
	numOps
)

var opNames = [numOps]string{"put", "get", "list", "delete"}

// Store is a blob.Store that passes calls to an inner store and injects
// latency, errors and stalls as its Options say. It is safe for concurrent
// use.
type Store struct {
	inner blob.Store
	opts  Options
	scale float64

	mu    sync.Mutex
	rngs  [numOps]*rand.Rand // guarded by mu; one per operation
	stats [numOps]OpStats    // guarded by mu
}

var (
	_ blob.Store      = (*Store)(nil)
	_ blob.Creator    = (*Store)(nil)
	_ blob.IntoGetter = (*Store)(nil)
)

// New returns a Store that wraps inner and injects the faults of opts.
func New(inner blob.Store, opts Options) *Store {
	scale := opts.Scale
	if !(scale > 0) {
		scale = 1
	}
	s := &Store{inner: inner, opts: opts, scale: scale}
	for o := range s.rngs {
		s.rngs[o] = rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15+uint64(o)))
	}
	return s
}

// Inner returns the wrapped store, e.g. to inspect it without faults.
func (s *Store) Inner() blob.Store { return s.inner }

// Stats returns the counts so far.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Put: s.stats[opPut], Get: s.stats[opGet], List: s.stats[opList], Delete: s.stats[opDelete]}
}

// fault is what happens to one call.
type fault struct {
	stall      bool
	delay      time.Duration
	fail       bool
	afterWrite bool // with fail, for Put: fail after the inner Put
}

// decide counts a call of o and draws its fault from o's generator. Every
// injected call draws the same values in the same order (three Float64s,
// then a latency sample), whatever the outcome, so the n-th call's fate does
// not depend on earlier outcomes, nor on calls of other operations.
func (s *Store) decide(o op) fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats[o].Calls++
	if s.opts.PutOnly && o != opPut {
		return fault{}
	}
	rng := s.rngs[o]
	uStall, uErr, uAfter := rng.Float64(), rng.Float64(), rng.Float64()
	var f fault
	if s.opts.Latency != nil {
		d := s.opts.Latency.Sample(rng)
		if s.scale != 1 {
			d = time.Duration(float64(d) * s.scale)
		}
		f.delay = max(d, 0)
	}
	f.stall = uStall < s.opts.StallRate
	if f.stall {
		s.stats[o].Stalls++
		return f
	}
	f.fail = uErr < s.opts.ErrorRate
	if f.fail {
		s.stats[o].Errors++
		f.afterWrite = o == opPut && uAfter < 0.5
	}
	return f
}

// inject applies the stall and the latency of f. A non-nil result is
// ctx.Err(): the call ends with it without reaching the inner store.
func (s *Store) inject(ctx context.Context, o op, f fault) error {
	if f.stall {
		<-ctx.Done()
		return ctx.Err()
	}
	if f.delay <= 0 {
		return nil
	}
	start := time.Now()
	t := time.NewTimer(f.delay)
	defer t.Stop()
	waited := f.delay
	var err error
	select {
	case <-t.C:
	case <-ctx.Done():
		err = ctx.Err()
		waited = min(time.Since(start), f.delay)
	}
	s.mu.Lock()
	s.stats[o].Latency += waited
	s.mu.Unlock()
	return err
}

// Put stores data in the inner store, subject to the injected faults. An
// injected error leaves the object unwritten, or written if the error's
// Written field is true.
func (s *Store) Put(ctx context.Context, name string, data []byte) error {
	return s.write(ctx, "put", name, func() error { return s.inner.Put(ctx, name, data) })
}

// write runs do, a write of the object name, subject to the injected
// faults of a Put: an injected error before do leaves the object as it
// was, one after it (Written) follows do's success.
func (s *Store) write(ctx context.Context, op, name string, do func() error) error {
	f := s.decide(opPut)
	if err := s.inject(ctx, opPut, f); err != nil {
		return err
	}
	if f.fail && !f.afterWrite {
		return &InjectedError{Op: op, Name: name}
	}
	if err := do(); err != nil {
		return err
	}
	if f.fail {
		return &InjectedError{Op: op, Name: name, Written: true}
	}
	return nil
}

// PutIfAbsent creates the object in the inner store with
// blob.PutIfAbsent, subject to the injected faults of a Put (it counts as
// one, in Stats.Put, and draws from Put's generator). An injected error
// leaves the object uncreated, or, if the error's Written field is true,
// created by this call. An inner store that is not a blob.Creator gives
// blob.PutIfAbsent's error.
func (s *Store) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	return s.write(ctx, "create", name, func() error { return blob.PutIfAbsent(ctx, s.inner, name, data) })
}

// MinPartSize is the inner store's, or 0 if it is not a blob.Parter.
func (s *Store) MinPartSize() int {
	if p, ok := s.inner.(blob.Parter); ok {
		return p.MinPartSize()
	}
	return 0
}

// CreateParts starts an upload in the inner store. Its create, each part
// and the completion are subject to the injected faults of a Put (and
// count as Puts in Stats); an injected error after a part's upload leaves
// the part uploaded.
func (s *Store) CreateParts(ctx context.Context, name string) (blob.PartUpload, error) {
	p, ok := s.inner.(blob.Parter)
	if !ok {
		return nil, blob.NoParts(s.inner, name)
	}
	var u blob.PartUpload
	err := s.write(ctx, "create parts", name, func() error {
		var err error
		u, err = p.CreateParts(ctx, name)
		return err
	})
	if err != nil {
		if u != nil {
			_ = u.Abort(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	return faultyUpload{s, name, u}, nil
}

// CompleteParts completes an upload in the inner store, subject to the
// injected faults of a Put (it counts as one); an injected error after it
// leaves the upload completed.
func (s *Store) CompleteParts(ctx context.Context, name, id string, n int, size int64) error {
	p, ok := s.inner.(blob.Parter)
	if !ok {
		return blob.NoParts(s.inner, name)
	}
	return s.write(ctx, "complete", name, func() error { return p.CompleteParts(ctx, name, id, n, size) })
}

type faultyUpload struct {
	s    *Store
	name string
	u    blob.PartUpload
}

func (f faultyUpload) UploadPart(ctx context.Context, n int, data []byte) error {
	return f.s.write(ctx, fmt.Sprintf("upload part %d", n), f.name, func() error { return f.u.UploadPart(ctx, n, data) })
}

func (f faultyUpload) ID() string { return f.u.ID() }

func (f faultyUpload) Complete(ctx context.Context, n int) error {
	return f.s.write(ctx, "complete", f.name, func() error { return f.u.Complete(ctx, n) })
}

func (f faultyUpload) Abort(ctx context.Context) error { return f.u.Abort(ctx) }

// Get returns the object from the inner store, subject to the injected
// faults.
func (s *Store) Get(ctx context.Context, name string) ([]byte, error) {
	f := s.decide(opGet)
	if err := s.inject(ctx, opGet, f); err != nil {
		return nil, err
	}
	if f.fail {
		return nil, &InjectedError{Op: "get", Name: name}
	}
	return s.inner.Get(ctx, name)
}

// GetInto is Get reading into *buf when the inner store can (see
// blob.GetInto), subject to the same injected faults.
func (s *Store) GetInto(ctx context.Context, name string, buf *[]byte) ([]byte, error) {
	f := s.decide(opGet)
	if err := s.inject(ctx, opGet, f); err != nil {
		return nil, err
	}
	if f.fail {
		return nil, &InjectedError{Op: "get", Name: name}
	}
	return blob.GetInto(ctx, s.inner, name, buf)
}

// List lists the inner store, subject to the injected faults.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	f := s.decide(opList)
	if err := s.inject(ctx, opList, f); err != nil {
		return nil, err
	}
	if f.fail {
		return nil, &InjectedError{Op: "list", Name: prefix}
	}
	return s.inner.List(ctx, prefix)
}

// Delete deletes the object from the inner store, subject to the injected
// faults. An injected error leaves the object in place.
func (s *Store) Delete(ctx context.Context, name string) error {
	f := s.decide(opDelete)
	if err := s.inject(ctx, opDelete, f); err != nil {
		return err
	}
	if f.fail {
		return &InjectedError{Op: "delete", Name: name}
	}
	return s.inner.Delete(ctx, name)
}
