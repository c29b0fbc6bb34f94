package blob

import (
	"context"
	"errors"
	"fmt"
)

// Creator is a Store that can create an object only if no object of that
// name exists, atomically with respect to every other writer of the store
// (other processes included): of several concurrent PutIfAbsent calls for
// one name, exactly one succeeds and a later Get returns its bytes. It is
// the primitive behind claims that two processes must not both make, such
// as a lock object or the first write of a checkpoint's manifest.
type Creator interface {
	// PutIfAbsent stores data under name like Put if there is no object
	// name, and otherwise fails with an error matching ErrExists that
	// names the object, leaving the existing object as it was.
	PutIfAbsent(ctx context.Context, name string, data []byte) error
}

// ErrExists is matched (errors.Is) by the error PutIfAbsent returns when
// the object already exists. Stores wrap it with the object's name, as
// Exists does.
var ErrExists = errors.New("already exists")

// Exists returns the error a Creator reports when the object name already
// exists: it names the object and matches ErrExists.
func Exists(name string) error {
	return fmt.Errorf("blob: object %q: %w", name, ErrExists)
}

// ErrNoConditionalCreate is matched by the error PutIfAbsent returns for a
// store that is not a Creator.
var ErrNoConditionalCreate = errors.New("store cannot create objects conditionally")

// PutIfAbsent stores data under name in s only if no object name exists,
// with s.PutIfAbsent. If the object exists it returns an error matching
// ErrExists. A store that is not a Creator cannot make that promise, so
// PutIfAbsent then fails, with an error matching ErrNoConditionalCreate,
// rather than fall back to a racy "Get, then Put".
func PutIfAbsent(ctx context.Context, s Store, name string, data []byte) error {
	c, ok := s.(Creator)
	if !ok {
		return fmt.Errorf("blob: put %q if absent: %T: %w; use a store with conditional writes (file, s3)", name, s, ErrNoConditionalCreate)
	}
	return c.PutIfAbsent(ctx, name, data)
}
