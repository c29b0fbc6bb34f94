package file

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropCache asks the kernel to drop the pages of f, written and synced,
// from the page cache: checkpoint objects are read back only by restores,
// and gigabytes of them cached would evict the pages the job reads its
// state from (a Pebble database on the same machine). Advice only: an
// error changes nothing.
func dropCache(f *os.File) {
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
