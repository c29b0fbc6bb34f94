package inspect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/file"
)

// ErrReadOnly is matched by the error of every write to a store opened by
// OpenStore.
var ErrReadOnly = errors.New("inspect: the store is opened read-only")

// OpenStore opens the store a URL or directory names (the forms of
// blob.Open) for reading only. A directory must exist, and opening it
// changes nothing on disk (file.OpenExisting: no directory created, no
// temporary files swept); an s3:// URL gets read_only=true unless it says
// otherwise, so opening it does not probe writes. The store's Put and
// Delete fail with ErrReadOnly. Other schemes' backends must be imported
// by the caller (blob/s3).
func OpenStore(url string) (blob.Store, error) {
	if url == "" {
		return nil, errors.New("no checkpoint store given; pass --data DIR or --data URL")
	}
	scheme, rest, hasScheme := strings.Cut(url, "://")
	if !hasScheme || !validScheme(scheme) {
		scheme, rest, hasScheme = "", url, false // a path with "://" in it
	}
	switch strings.ToLower(scheme) {
	case "", "file":
		if hasScheme && rest == "" {
			return nil, fmt.Errorf("checkpoint store %q: missing path after file://", url)
		}
		s, err := file.OpenExisting(rest)
		if err != nil {
			return nil, fmt.Errorf("checkpoint store %q: %w", url, err)
		}
		return readOnly{s}, nil
	case "s3":
		if !strings.Contains(rest, "read_only=") {
			if strings.Contains(rest, "?") {
				url += "&read_only=true"
			} else {
				url += "?read_only=true"
			}
		}
	}
	s, err := blob.Open(url)
	if err != nil {
		return nil, err
	}
	return readOnly{s}, nil
}

// validScheme reports whether s has the syntax of a URL scheme, as
// blob.Open decides it.
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// readOnly is a store whose writes fail: the inspecting commands promise
// to leave a store as they found it, and this makes a slip impossible.
type readOnly struct{ blob.Store }

func (r readOnly) Put(_ context.Context, name string, _ []byte) error {
	return fmt.Errorf("put %q: %w", name, ErrReadOnly)
}

func (r readOnly) Delete(_ context.Context, name string) error {
	return fmt.Errorf("delete %q: %w", name, ErrReadOnly)
}

// GetInto keeps the wrapped store's buffer reuse.
func (r readOnly) GetInto(ctx context.Context, name string, buf *[]byte) ([]byte, error) {
	return blob.GetInto(ctx, r.Store, name, buf)
}
