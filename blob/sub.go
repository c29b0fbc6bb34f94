package blob

import (
	"context"
	"fmt"
	"strings"
)

// Sub returns the store of the objects of s under prefix (a name ending
// in "/", e.g. "tasks/3/"): name n of the sub-store is prefix+n in s, and
// its List lists only them, without the prefix. The processes of a job
// that share one store keep each task's checkpoints in a sub-store of it.
//
// The sub-store is a Creator exactly when s is, is an IntoGetter and a
// Parter whenever s is, and is never a Locker: a lock of s (a file store
// locks its whole directory) would make the owners of different tasks
// wait for each other, so the writer of a sub-store claims it
// (blob.Claim), fencing an earlier writer instead of being refused by it.
func Sub(s Store, prefix string) (Store, error) {
	if !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("blob: sub-store prefix %q does not end in \"/\"", prefix)
	}
	if err := ValidateName(prefix + "x"); err != nil {
		return nil, fmt.Errorf("blob: sub-store prefix %q: %w", prefix, err)
	}
	sub := &subStore{s: s, prefix: prefix}
	if _, ok := s.(Creator); ok {
		return subCreator{sub}, nil
	}
	return sub, nil
}

type subStore struct {
	s      Store
	prefix string
}

func (w *subStore) Put(ctx context.Context, name string, data []byte) error {
	return w.s.Put(ctx, w.prefix+name, data)
}

func (w *subStore) Get(ctx context.Context, name string) ([]byte, error) {
	return w.s.Get(ctx, w.prefix+name)
}

func (w *subStore) GetInto(ctx context.Context, name string, buf *[]byte) ([]byte, error) {
	return GetInto(ctx, w.s, w.prefix+name, buf)
}

func (w *subStore) List(ctx context.Context, prefix string) ([]string, error) {
	names, err := w.s.List(ctx, w.prefix+prefix)
	for i, n := range names {
		names[i] = strings.TrimPrefix(n, w.prefix)
	}
	return names, err
}

func (w *subStore) Delete(ctx context.Context, name string) error {
	return w.s.Delete(ctx, w.prefix+name)
}

// String names the store and the prefix, so errors and logs say where.
func (w *subStore) String() string {
	if s, ok := w.s.(fmt.Stringer); ok {
		return s.String() + " under " + w.prefix
	}
	return fmt.Sprintf("%T under %s", w.s, w.prefix)
}

// MinPartSize is the wrapped store's, or 0 if it is not a Parter.
func (w *subStore) MinPartSize() int {
	if p, ok := w.s.(Parter); ok {
		return p.MinPartSize()
	}
	return 0
}

// CreateParts starts an upload of prefix+name in the wrapped store.
func (w *subStore) CreateParts(ctx context.Context, name string) (PartUpload, error) {
	p, ok := w.s.(Parter)
	if !ok {
		return nil, NoParts(w.s, w.prefix+name)
	}
	return p.CreateParts(ctx, w.prefix+name)
}

// CompleteParts completes an upload of prefix+name in the wrapped store.
func (w *subStore) CompleteParts(ctx context.Context, name, id string, n int, size int64) error {
	p, ok := w.s.(Parter)
	if !ok {
		return NoParts(w.s, w.prefix+name)
	}
	return p.CompleteParts(ctx, w.prefix+name, id, n, size)
}

// subCreator is a subStore of a Creator.
type subCreator struct{ *subStore }

func (w subCreator) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	return w.s.(Creator).PutIfAbsent(ctx, w.prefix+name, data)
}
