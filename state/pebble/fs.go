package pebble

import (
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// trackingFS is the file system of one DB: the operating system's, with
// the files Pebble creates tracked while open, so that a failed checkpoint
// can close what Pebble left open. Pebble v2.1.7's DB.Checkpoint does not
// close the OPTIONS file it copies when the copy fails (a full disk): its
// descriptor, and the space of the deleted file, would stay held for the
// life of the process.
type trackingFS struct {
	vfs.FS

	mu   sync.Mutex
	open map[*trackedFile]string // open file → its path
}

func newTrackingFS() *trackingFS {
	return &trackingFS{FS: vfs.Default, open: map[*trackedFile]string{}}
}

// Create creates the file and tracks it until it is closed.
func (fs *trackingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	tf := &trackedFile{File: f, fs: fs}
	fs.mu.Lock()
	fs.open[tf] = name
	fs.mu.Unlock()
	return tf, nil
}

// closeUnder closes the files created under dir that are still open.
func (fs *trackingFS) closeUnder(dir string) {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	fs.mu.Lock()
	var left []*trackedFile
	for f, name := range fs.open {
		if strings.HasPrefix(name, prefix) {
			left = append(left, f)
		}
	}
	fs.mu.Unlock()
	for _, f := range left {
		_ = f.Close() // the checkpoint failed already; this only releases
	}
}

// trackedFile is a file of a trackingFS.
type trackedFile struct {
	vfs.File
	fs   *trackingFS
	once sync.Once
	err  error
}

// Close closes the file once; later calls return the first one's result.
func (f *trackedFile) Close() error {
	f.once.Do(func() {
		f.fs.mu.Lock()
		delete(f.fs.open, f)
		f.fs.mu.Unlock()
		f.err = f.File.Close()
	})
	return f.err
}
