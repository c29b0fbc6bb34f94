package main

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/eddyflow/eddy/blob"
)

// overlayStore reads through to a base store and keeps every write and
// delete to itself: Puts go to top, a Delete hides the base's object, and
// Get and List see top over what is left of the base. A timed restore runs
// on one, so the checkpoint it completes after restoring, and the pruning
// that follows, leave the measured run's checkpoints as they were: every
// round restores the same checkpoint, the one the measured run completed
// last.
type overlayStore struct {
	base, top blob.Store
	mu        sync.Mutex
	hidden    map[string]bool // base objects deleted through the overlay
}

func newOverlay(base, top blob.Store) *overlayStore {
	return &overlayStore{base: base, top: top, hidden: map[string]bool{}}
}

func (s *overlayStore) isHidden(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hidden[name]
}

// Put stores data in top; a base object of the same name stays as it is.
func (s *overlayStore) Put(ctx context.Context, name string, data []byte) error {
	if err := s.top.Put(ctx, name, data); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.hidden, name)
	s.mu.Unlock()
	return nil
}

// Get returns top's object, else the base's unless it was deleted.
func (s *overlayStore) Get(ctx context.Context, name string) ([]byte, error) {
	var buf []byte
	return s.GetInto(ctx, name, &buf)
}

// GetInto is Get reading into *buf (blob.IntoGetter).
func (s *overlayStore) GetInto(ctx context.Context, name string, buf *[]byte) ([]byte, error) {
	data, err := blob.GetInto(ctx, s.top, name, buf)
	if !errors.Is(err, blob.ErrNotFound) {
		return data, err
	}
	if s.isHidden(name) {
		return nil, blob.NotFound(name)
	}
	return blob.GetInto(ctx, s.base, name, buf)
}

// List returns the names under prefix in top and in the base, less the
// base's deleted ones.
func (s *overlayStore) List(ctx context.Context, prefix string) ([]string, error) {
	top, err := s.top.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	base, err := s.base.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	for _, n := range base {
		if !s.hidden[n] {
			top = append(top, n)
		}
	}
	s.mu.Unlock()
	slices.Sort(top)
	return slices.Compact(top), nil
}

// Delete removes name from top and hides the base's object of that name.
func (s *overlayStore) Delete(ctx context.Context, name string) error {
	if err := s.top.Delete(ctx, name); err != nil {
		return err
	}
	s.mu.Lock()
	s.hidden[name] = true
	s.mu.Unlock()
	return nil
}
