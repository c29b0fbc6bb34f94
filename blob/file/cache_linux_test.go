package file_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/eddyflow/eddy/blob/file"
)

// resident returns the share of path's pages in the page cache.
func resident(t *testing.T, path string) float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return float64(n) / float64(len(vec))
}

// TestPutLeavesNoPagesCached: an object the store wrote is not left in
// the page cache (checkpoint objects are read only by restores; cached,
// gigabytes of them evict the pages a job reads its state from), while a
// file written the usual way next to it is.
func TestPutLeavesNoPagesCached(t *testing.T) {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("tmpfs keeps every page in memory: nothing to drop")
	}
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	control := filepath.Join(dir, "control")
	if err := os.WriteFile(control, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := resident(t, control); r < 0.5 {
		t.Skipf("a file just written is %.0f%% in the page cache here: cannot tell", 100*r)
	}
	s, err := file.New(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), "a/object", data); err != nil {
		t.Fatal(err)
	}
	if r := resident(t, filepath.Join(dir, "store", "a", "object")); r > 0.1 {
		t.Errorf("%.0f%% of a stored object's pages are cached, want none", 100*r)
	}
}

// TestPutWritesBackInChunks: an object of several writeback chunks and a
// partial one (written a chunk at a time, each chunk's writeback started
// as the next is written) reads back whole.
func TestPutWritesBackInChunks(t *testing.T) {
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 5<<19+3) // 2.5 MiB and 3 bytes
	for i := range data {
		data[i] = byte(i*31 + i>>20)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "big", data); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(data) {
		t.Fatalf("read back %d bytes, differing from the %d put", len(got), len(data))
	}
}
