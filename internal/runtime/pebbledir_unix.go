//go:build unix

package runtime

import (
	"os"
	"path/filepath"
	"syscall"
)

// dirLocks is true: a Run's directory is locked, and one whose lock is
// free was left by a killed process.
const dirLocks = true

// lockDir takes an exclusive lock (flock(2)) of dir's lock file for as long
// as the process lives or until the returned function is called; it fails
// if another process holds it.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
