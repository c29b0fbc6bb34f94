//go:build unix

package file

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/eddyflow/eddy/blob"
)

// lockName is the file in a store's directory that its holder locks; it
// starts with "." so that it is no object (List does not show it).
const lockName = ".lock"

// Lock takes an exclusive advisory lock (flock(2)) on the store's .lock file
// and writes owner into it. Another process's Lock then fails with a
// *blob.HeldError that quotes owner; the lock goes with the process, so a
// killed holder leaves the store free.
func (s *Store) Lock(owner string) (blob.Lease, error) {
	path := s.Path(lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("blob/file: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if data, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(data))) > 0 {
			holder = strings.TrimSpace(string(data))
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &blob.HeldError{Store: s.dir, Holder: holder}
		}
		return nil, fmt.Errorf("blob/file: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(owner+"\n"), 0)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("blob/file: lock %s: %w", path, err)
		}
	}
	return &lease{f: f, path: path}, nil
}

type lease struct {
	f    *os.File
	path string
}

// Check fails if the lock file was removed or replaced: another process
// could then lock the new one.
func (l *lease) Check() error {
	held, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("blob/file: lock %s: %w", l.path, err)
	}
	now, err := os.Stat(l.path)
	if err != nil || !os.SameFile(held, now) {
		return fmt.Errorf("blob/file: the lock file %s was removed or replaced while this process held it", l.path)
	}
	return nil
}

func (l *lease) Release() error { return l.f.Close() }
