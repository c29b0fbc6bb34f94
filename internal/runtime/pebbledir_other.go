//go:build !unix

package runtime

// dirLocks is false: no Run directory is ever taken for stale, and those
// of killed processes stay.
const dirLocks = false

// lockDir does nothing here.
func lockDir(dir string) (unlock func(), err error) { return func() {}, nil }
