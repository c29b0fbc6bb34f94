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

// startWriteback starts the writeback of n bytes of f at off without
// waiting for it (sync_file_range SYNC_FILE_RANGE_WRITE), and waits for
// the writeback of the bytes before off that an earlier call started.
// Advice only, as dropCache: the fsync at the end is what makes the
// object durable; an error changes nothing.
func startWriteback(f *os.File, off, n int64) {
	fd := int(f.Fd())
	if off > 0 {
		_ = unix.SyncFileRange(fd, 0, off, unix.SYNC_FILE_RANGE_WAIT_BEFORE)
	}
	_ = unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE)
}
