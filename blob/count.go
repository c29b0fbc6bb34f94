package blob

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// Requests is a number of store operations by kind: what an object store
// bills for. A PutIfAbsent is a Put and a GetInto a Get.
type Requests struct {
	Put, Get, List, Delete int64
}

// Sub returns r minus o: the requests made between two readings.
func (r Requests) Sub(o Requests) Requests {
	return Requests{Put: r.Put - o.Put, Get: r.Get - o.Get, List: r.List - o.List, Delete: r.Delete - o.Delete}
}

// Total is the sum of the requests of every kind.
func (r Requests) Total() int64 { return r.Put + r.Get + r.List + r.Delete }

// String lists the requests by kind, e.g. "12 PUT, 3 GET, 1 LIST, 0 DELETE".
func (r Requests) String() string {
	return fmt.Sprintf("%d PUT, %d GET, %d LIST, %d DELETE", r.Put, r.Get, r.List, r.Delete)
}

// Counter counts the operations of the stores that Count wraps with it. It
// is safe for concurrent use; its zero value is ready.
type Counter struct {
	put, get, list, del atomic.Int64
	// failed counts the operations that returned an error other than an
	// answer (ErrNotFound of a Get, ErrExists of a PutIfAbsent).
	failedPut, failedGet, failedList, failedDel atomic.Int64
}

// Requests returns the operations counted so far.
func (c *Counter) Requests() Requests {
	return Requests{Put: c.put.Load(), Get: c.get.Load(), List: c.list.Load(), Delete: c.del.Load()}
}

// Failed returns the operations counted so far that failed: those that
// returned an error other than ErrNotFound or ErrExists, which are
// answers. A cancelled hedge counts as failed.
func (c *Counter) Failed() Requests {
	return Requests{Put: c.failedPut.Load(), Get: c.failedGet.Load(), List: c.failedList.Load(), Delete: c.failedDel.Load()}
}

// note counts err in failed unless it is nil or an answer, and returns it.
func note(failed *atomic.Int64, err error) error {
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrExists) {
		failed.Add(1)
	}
	return err
}

// Count returns a Store that passes every operation to s and counts it in
// c, failed operations included (a store bills them too). It counts calls
// of the Store interface, the same for every backend, so counts of two
// backends compare side by side; a backend that splits one call into
// several requests (blob/s3's multipart uploads and ranged reads) counts
// those itself.
//
// The wrapper is a Creator and a Locker exactly when s is, so wrapping a
// store changes neither its conditional writes nor its single-writer lock;
// it is always an IntoGetter (GetInto falls back to s.Get).
func Count(s Store, c *Counter) Store {
	cs := &countingStore{s: s, c: c}
	_, creator := s.(Creator)
	_, locker := s.(Locker)
	switch {
	case creator && locker:
		return &countingCreatorLocker{countingCreator{cs}, countingLocker{cs}}
	case creator:
		return &countingCreator{cs}
	case locker:
		return &countingLockerStore{cs, countingLocker{cs}}
	}
	return cs
}

type countingStore struct {
	s Store
	c *Counter
}

func (w *countingStore) Put(ctx context.Context, name string, data []byte) error {
	w.c.put.Add(1)
	return note(&w.c.failedPut, w.s.Put(ctx, name, data))
}

func (w *countingStore) Get(ctx context.Context, name string) ([]byte, error) {
	w.c.get.Add(1)
	b, err := w.s.Get(ctx, name)
	return b, note(&w.c.failedGet, err)
}

func (w *countingStore) GetInto(ctx context.Context, name string, buf *[]byte) ([]byte, error) {
	w.c.get.Add(1)
	b, err := GetInto(ctx, w.s, name, buf)
	return b, note(&w.c.failedGet, err)
}

func (w *countingStore) List(ctx context.Context, prefix string) ([]string, error) {
	w.c.list.Add(1)
	names, err := w.s.List(ctx, prefix)
	return names, note(&w.c.failedList, err)
}

func (w *countingStore) Delete(ctx context.Context, name string) error {
	w.c.del.Add(1)
	return note(&w.c.failedDel, w.s.Delete(ctx, name))
}

// String names the wrapped store, so errors and logs that print the
// store still say where it is.
func (w *countingStore) String() string {
	if s, ok := w.s.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", w.s)
}

// countingCreator is a countingStore of a Creator.
type countingCreator struct{ *countingStore }

func (w countingCreator) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	w.c.put.Add(1)
	return note(&w.c.failedPut, w.s.(Creator).PutIfAbsent(ctx, name, data))
}

// countingLocker passes Lock on: taking a lock is not an object request.
type countingLocker struct{ w *countingStore }

func (l countingLocker) Lock(owner string) (Lease, error) { return l.w.s.(Locker).Lock(owner) }

type countingLockerStore struct {
	*countingStore
	countingLocker
}

type countingCreatorLocker struct {
	countingCreator
	countingLocker
}

// MinPartSize is the wrapped store's, or 0 if it is not a Parter.
func (w *countingStore) MinPartSize() int {
	if p, ok := w.s.(Parter); ok {
		return p.MinPartSize()
	}
	return 0
}

// CreateParts starts an upload in the wrapped store. Its create, each
// part and the completion count as Puts, as S3 bills them; an abort as a
// Delete.
func (w *countingStore) CreateParts(ctx context.Context, name string) (PartUpload, error) {
	p, ok := w.s.(Parter)
	if !ok {
		return nil, NoParts(w.s, name)
	}
	w.c.put.Add(1)
	u, err := p.CreateParts(ctx, name)
	if err != nil {
		return nil, note(&w.c.failedPut, err)
	}
	return countingUpload{u, w.c}, nil
}

// CompleteParts completes an upload in the wrapped store: one Put, and
// one List (ListParts on S3) as the store may need to find the parts.
func (w *countingStore) CompleteParts(ctx context.Context, name, id string, n int, size int64) error {
	p, ok := w.s.(Parter)
	if !ok {
		return NoParts(w.s, name)
	}
	w.c.put.Add(1)
	w.c.list.Add(1)
	return note(&w.c.failedPut, p.CompleteParts(ctx, name, id, n, size))
}

type countingUpload struct {
	u PartUpload
	c *Counter
}

func (u countingUpload) ID() string { return u.u.ID() }

func (u countingUpload) UploadPart(ctx context.Context, n int, data []byte) error {
	u.c.put.Add(1)
	return note(&u.c.failedPut, u.u.UploadPart(ctx, n, data))
}

func (u countingUpload) Complete(ctx context.Context, n int) error {
	u.c.put.Add(1)
	return note(&u.c.failedPut, u.u.Complete(ctx, n))
}

func (u countingUpload) Abort(ctx context.Context) error {
	u.c.del.Add(1)
	return note(&u.c.failedDel, u.u.Abort(ctx))
}
