package blob

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"
)

// Parter is a Store that can build one object from parts uploaded over
// time and make it visible whole at the end: S3's multipart upload. A
// writer that produces an object piece by piece (the changelog's log of a
// checkpoint interval) uploads each piece as soon as it exists and pays
// only for the last one when the object must be durable.
//
// Wrappers of stores (Count, faulty) implement Parter whatever they wrap
// and report through MinPartSize whether the store below can: use
// PartsOf to get a Parter that works.
type Parter interface {
	// MinPartSize is the least size of every part but the last; 0 means
	// the store cannot build objects from parts (a wrapper of one that
	// cannot).
	MinPartSize() int
	// CreateParts starts the object name. Nothing is visible under name
	// until Complete returns; an upload neither completed nor aborted
	// costs storage until the store expires it (on S3, a bucket lifecycle
	// rule AbortIncompleteMultipartUpload).
	CreateParts(ctx context.Context, name string) (PartUpload, error)
	// CompleteParts completes the upload id (PartUpload.ID) of name, as
	// its PartUpload's Complete(ctx, n) would, from any process: a
	// reader completes an upload whose writer died after its parts were
	// up. size is the object's bytes, parts 1..n together. An upload
	// already completed (by its writer, another reader, or a lost
	// response) is success if an object of name and size exists: names
	// of objects built from parts are never reused, and the reader
	// verifies the bytes' checksum when it reads them. An upload that is
	// gone with no such object gives an error matching ErrNotFound.
	CompleteParts(ctx context.Context, name, id string, n int, size int64) error
}

// PartUpload is an object being built from parts. Its methods are safe for
// concurrent use: UploadPart may run for several parts at once, and for
// one part twice (a hedge or a retry; the part holds the bytes of the
// upload that finished last, so both must send the same bytes).
type PartUpload interface {
	// ID is the store's name of the upload: with the object's name, what
	// CompleteParts needs to complete it in another process.
	ID() string
	// UploadPart stores data as part n (from 1 to 10,000) of the
	// object's bytes. The store does not keep data once it returns.
	UploadPart(ctx context.Context, n int, data []byte) error
	// Complete makes parts 1..n, concatenated, the object. Their bytes
	// must be a payload followed by its trailer (AppendTrailerOf), as a
	// Put of the payload stores it, so that Get verifies and returns the
	// payload.
	Complete(ctx context.Context, n int) error
	// Abort drops the upload and its parts.
	Abort(ctx context.Context) error
}

// ErrNoParts is matched by the error of CreateParts on a store (or a
// wrapper of one) that cannot build objects from parts.
var ErrNoParts = errors.New("store cannot build objects from parts")

// PartsOf returns s as a Parter and its least part size, or false if s
// cannot build objects from parts.
func PartsOf(s Store) (Parter, int, bool) {
	p, ok := s.(Parter)
	if !ok {
		return nil, 0, false
	}
	n := p.MinPartSize()
	return p, n, n > 0
}

// NoParts is the error a wrapper's CreateParts returns when the store it
// wraps cannot build objects from parts.
func NoParts(s Store, name string) error {
	return fmt.Errorf("blob: create %q from parts: %T: %w", name, s, ErrNoParts)
}

// UpdateChecksum returns the Checksum of a payload whose earlier bytes had
// checksum crc, continued with p: a writer of parts computes the trailer's
// checksum as the parts go by (start with crc 0).
func UpdateChecksum(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// AppendTrailerOf appends the trailer of a payload of n bytes whose
// Checksum is crc: what AppendTrailer appends, for a payload that was
// never in one buffer.
func AppendTrailerOf(dst []byte, crc uint32, n int64) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, crc)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(n))
	return append(dst, trailerMagic...)
}

// CompleteUpload completes upload id of the object name from its first
// parts parts (size bytes, trailer included; see Parter.CompleteParts),
// the completion a reader makes of an upload its writer may never have
// completed. A failed completion is tried again, up to attempts times in
// all, with short pauses. It returns nil once the object is complete, an
// error matching ErrNotFound when the upload is gone (completed or aborted
// elsewhere: the caller waits for the object or gives up), or the last
// failure.
func CompleteUpload(ctx context.Context, p Parter, name, id string, parts int, size int64, attempts int) error {
	var err error
	for try := range max(attempts, 1) {
		if try > 0 {
			if serr := Sleep(ctx, time.Duration(10<<try)*time.Millisecond); serr != nil {
				return errors.Join(err, serr)
			}
		}
		if err = p.CompleteParts(ctx, name, id, parts, size); err == nil || errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return err
}

// CompleteAndAwait completes upload id of the object name (CompleteUpload)
// and then waits, up to wait, until found reports the object there. Either
// outcome of the completion can come before the object: a completion may
// report success while it only joined one still in progress (versitygw
// answers so), and an upload already gone is being completed elsewhere (a
// store drops the upload when a completion starts and shows the object
// when it ends, seconds later on some servers). It returns true once found
// does, false if the object did not show within wait, or the completion's
// failure (other than ErrNotFound) or found's error.
func CompleteAndAwait(ctx context.Context, p Parter, name, id string, parts int, size int64, attempts int,
	wait time.Duration, found func(context.Context) (bool, error)) (bool, error) {
	if err := CompleteUpload(ctx, p, name, id, parts, size, attempts); err != nil && !errors.Is(err, ErrNotFound) {
		return false, fmt.Errorf("complete the upload %s of %q: %w", id, name, err)
	}
	deadline := time.Now().Add(wait)
	for pause := 20 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		if ok, err := found(ctx); ok || err != nil {
			return ok, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := Sleep(ctx, pause); err != nil {
			return false, fmt.Errorf("waiting for %q, whose upload %s is being completed: %w", name, id, err)
		}
	}
}

// CheckUpload checks what a handle or a manifest records of an upload
// whose completion may be left to a reader: upload id of object (what
// names the kind of object in errors, "log object" say), one of objects
// (those the record lists), of 1 to 10,000 parts (S3's bounds) and at
// least a trailer's bytes.
func CheckUpload(what, object, id string, parts uint32, size int64, objects []string) error {
	switch {
	case !slices.Contains(objects, object):
		return fmt.Errorf("upload %q of object %q, which is not among its %ss", id, object, what)
	case id == "":
		return fmt.Errorf("upload of %s %q without an id", what, object)
	case parts < 1 || parts > 10000:
		return fmt.Errorf("upload %q of %s %q: part count %d outside 1..10000", id, what, object, parts)
	case size < TrailerSize:
		return fmt.Errorf("upload %q of %s %q: size %d is less than a trailer", id, what, object, size)
	}
	return nil
}
