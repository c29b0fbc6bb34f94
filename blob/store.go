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
	// object, never part of data, even across a crash. Put does not keep
	// data once it returns: the caller may reuse the buffer.
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

// IntoGetter is a Store that can read an object into a buffer the caller
// keeps, so a reader of many objects in turn reuses one buffer instead of
// allocating each object afresh.
type IntoGetter interface {
	// GetInto is Get reading into *buf, which it grows as needed. The
	// payload it returns is a part of *buf, valid until *buf is used again.
	GetInto(ctx context.Context, name string, buf *[]byte) ([]byte, error)
}

// GetInto reads the object name from s into *buf when s is an IntoGetter,
// and with s.Get otherwise. The payload may alias *buf: it is valid until
// *buf is used again.
func GetInto(ctx context.Context, s Store, name string, buf *[]byte) ([]byte, error) {
	if g, ok := s.(IntoGetter); ok {
		return g.GetInto(ctx, name, buf)
	}
	return s.Get(ctx, name)
}

// Locker is implemented by stores that one process can hold at a time, so
// that two processes of one job never write the same checkpoints. Lock
// returns once this process holds the store, recording owner (who holds it,
// for the error another process gets), or a *HeldError naming the holder.
// The lease it returns checks that the store is still held (Check) and
// releases it (Release); a process that dies releases it too.
type Locker interface {
	Lock(owner string) (Lease, error)
}

// Lease is a held store.
type Lease interface {
	// Check returns an error if the store is no longer held by this
	// lease (its lock was removed or taken over).
	Check() error
	// Release gives the store up.
	Release() error
}

// CommitLease is a Lease that records each checkpoint it lets commit
// output: the runtime calls CommitCheckpoint between writing checkpoint
// id's manifest and committing its output, instead of Check. An error
// fences as Check's does (an error matching ErrLeaseUnknown fails only
// this checkpoint). Package tasks gives each task's runs one, a chain of
// commit records that fences a task's older owners.
type CommitLease interface {
	Lease
	CommitCheckpoint(ctx context.Context, id uint64) error
}

// HeldError says that a store is held by another owner.
type HeldError struct {
	Store  string // where the store is
	Holder string // the holder's owner string, as it recorded it
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("blob: %s is in use by %s; stop that process, or give this one its own checkpoint storage", e.Store, e.Holder)
}
