package discard

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/internal/cacheline"
)

// Sink returns a sink that counts the records written to it and discards
// them. The result is a *Counter[T]; New returns one without the need for a
// type assertion.
func Sink[T any]() connector.Sink[T] { return New[T]() }

// New returns a sink that counts the records written to it and discards them.
func New[T any]() *Counter[T] { return &Counter[T]{} }

// Counter is the discarding sink. Each writer counts on its own cache line,
// so writers of different subtasks do not contend.
type Counter[T any] struct {
	mu      sync.Mutex
	writers []*writer[T] // every writer ever opened
}

// Count returns the number of records written so far by all writers,
// including writers that were closed and records of transactions that were
// never committed.
func (c *Counter[T]) Count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, w := range c.writers {
		n += w.n.Load()
	}
	return n
}

// Name returns "discard".
func (c *Counter[T]) Name() string { return "discard" }

// Recover does nothing: there is nothing to commit or abort.
func (c *Counter[T]) Recover(context.Context, [][]byte) error { return nil }

// OpenWriter returns a writer that counts and discards.
func (c *Counter[T]) OpenWriter(context.Context, int, int) (connector.SinkWriter[T], error) {
	w := &writer[T]{}
	c.mu.Lock()
	c.writers = append(c.writers, w)
	c.mu.Unlock()
	return w, nil
}

// Commit does nothing.
func (c *Counter[T]) Commit(context.Context, [][]byte) error { return nil }

type writer[T any] struct {
	_ cacheline.Pad // keep n on its own cache line
	n atomic.Int64
	_ cacheline.Pad
}

func (w *writer[T]) Write(*T) error {
	w.n.Add(1)
	return nil
}

func (w *writer[T]) PreCommit(uint64) ([]byte, error) { return nil, nil }

func (w *writer[T]) Close() error { return nil }
