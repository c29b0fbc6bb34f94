package pebble

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback starts writing f's dirty pages to the disk without
// waiting for it (sync_file_range SYNC_FILE_RANGE_WRITE). A restore writes
// gigabytes of files and syncs none (the local database is rebuilt from
// the checkpoint after a crash); left to the kernel, their writeback
// would start only after the restore, when the job runs, and for tens of
// seconds every read of cold state and every fsync of its checkpoints
// would queue behind it. Advice only: an error changes nothing.
func startWriteback(f *os.File) {
	_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}
