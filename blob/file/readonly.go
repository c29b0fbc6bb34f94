package file

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// OpenExisting returns the store of the existing directory dir for tools
// that only read: unlike New it neither creates the directory nor sweeps
// stale temporary files, so opening changes nothing on disk. The Store's
// Put and Delete still write; a caller that must not write wraps it.
func OpenExisting(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("blob/file: empty directory path")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob/file: directory %q: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("blob/file: directory %q does not exist", dir)
		}
		return nil, fmt.Errorf("blob/file: directory %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("blob/file: %q is not a directory", dir)
	}
	return &Store{dir: abs}, nil
}
