package pebble

import "github.com/cockroachdb/pebble/v2/vfs"

// NoAutoCompactions turns automatic compactions off, so a test can count
// on the files of one checkpoint still being there at the next.
func NoAutoCompactions() PoolOption { return func(c *poolConfig) { c.noCompactions = true } }

// WrapFS wraps the file system of every DB the pool opens: a test injects
// failures (errorfs).
func WrapFS(wrap func(vfs.FS) vfs.FS) PoolOption {
	return func(c *poolConfig) { c.wrapFS = wrap }
}
