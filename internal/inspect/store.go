package inspect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/eddyflow/eddy/blob"
)

// ErrReadOnly is matched by the error of every write to a store opened by
// OpenStore.
var ErrReadOnly = errors.New("inspect: the store is opened read-only")

// OpenStore opens the store a URL or directory names (as blob.Open does)
// for reading only. A directory must exist (blob.Open would create it), and
// an s3:// URL gets read_only=true unless it says otherwise, so opening it
// does not probe writes. The store's Put and Delete fail with ErrReadOnly.
// The backends must be imported by the caller (blob/file, blob/s3).
func OpenStore(url string) (blob.Store, error) {
	if url == "" {
		return nil, errors.New("no checkpoint store given; pass --data DIR or --data URL")
	}
	scheme, rest, hasScheme := strings.Cut(url, "://")
	switch {
	case !hasScheme:
		if err := mustBeDir(url); err != nil {
			return nil, err
		}
	case scheme == "file":
		dir := rest
		if strings.HasPrefix(dir, "./") || !strings.HasPrefix(dir, "/") {
			dir = strings.TrimPrefix(dir, "./")
			if dir == "" {
				dir = "."
			}
		}
		if err := mustBeDir(dir); err != nil {
			return nil, err
		}
	case scheme == "s3" && !strings.Contains(rest, "read_only="):
		if strings.Contains(rest, "?") {
			url += "&read_only=true"
		} else {
			url += "?read_only=true"
		}
	}
	s, err := blob.Open(url)
	if err != nil {
		return nil, err
	}
	return readOnly{s}, nil
}

func mustBeDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("checkpoint store %q does not exist", dir)
		}
		return fmt.Errorf("checkpoint store %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("checkpoint store %q is not a directory", dir)
	}
	return nil
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
