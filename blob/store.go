package blob

import (
	"context"
	"errors"
	"fmt"
)

// Store holds named objects. Implementations are safe for concurrent use;
// concurrent writers of the same name are not coordinated (the last rename
// wins).
type Store interface {
	// Put stores data under name, replacing any object of that name. It is
	// atomic: a concurrent or later Get sees all of data or the previous
	// object, never part of data, even across a crash.
	Put(ctx context.Context, name string, data []byte) error
	// Get returns the payload stored under name after verifying its
	// checksum. A missing object gives an error matching ErrNotFound; a
	// damaged one gives a *CorruptError.
	Get(ctx context.Context, name string) ([]byte, error)
	// List returns the names of the objects whose names start with prefix,
	// sorted. Temporary files of unfinished Puts are never listed.
	List(ctx context.Context, prefix string) ([]string, error)
	// Delete removes the object name. Deleting a missing object is not an
	// error.
	Delete(ctx context.Context, name string) error
}

// ErrNotFound is matched (errors.Is) by the error a Store returns for a
// missing object. Stores wrap it with the object's name, as NotFound does.
var ErrNotFound = errors.New("not found")

// NotFound returns the error a Store reports for the missing object name: it
// names the object and matches ErrNotFound.
func NotFound(name string) error {
	return fmt.Errorf("blob: object %q: %w", name, ErrNotFound)
}

// CorruptError reports an object whose bytes fail verification: a checksum
// mismatch, a truncated object, or one that was not written by a Store.
type CorruptError struct {
	Name   string // the object's name
	Reason string // what is wrong, e.g. "checksum mismatch: ..."
}

// Error names the object and what is wrong with it.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("blob: object %q is corrupt: %s", e.Name, e.Reason)
}
