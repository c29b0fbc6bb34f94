package pebble

import (
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// trackingFS is the file system of one DB: the operating system's, with
// the files Pebble creates tracked while open, so that a failed checkpoint
// can close what Pebble left open. Pebble v2.1.7's DB.Checkpoint does not
// close the OPTIONS file it copies when the copy fails (a full disk): its
// descriptor, and the space of the deleted file, would stay held for the
// life of the process.
//
// It also holds the file operations of an abandoned DB (DB.abandon): from
// hold on they wait, until fail, after which they fail.
type trackingFS struct {
	vfs.FS

	mu   sync.Mutex
	open map[*trackedFile]string // open file → its path

	gated    atomic.Bool   // set by hold: operations wait for released
	released chan struct{} // closed by fail
	failErr  error         // what operations return once released
}

func newTrackingFS() *trackingFS {
	return &trackingFS{FS: vfs.Default, open: map[*trackedFile]string{}, released: make(chan struct{})}
}

// hold makes every later file operation wait until fail.
func (fs *trackingFS) hold() { fs.gated.Store(true) }

// fail makes the held file operations, and every later one, fail with err.
func (fs *trackingFS) fail(err error) {
	fs.failErr = err
	fs.gated.Store(true)
	close(fs.released)
}

// gate returns nil, or waits until fail and returns its error once hold
// was called.
func (fs *trackingFS) gate() error {
	if !fs.gated.Load() {
		return nil
	}
	<-fs.released
	return fs.failErr
}

// Create creates the file and tracks it until it is closed.
func (fs *trackingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.gate(); err != nil {
		return nil, err
	}
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

// The other operations of vfs.FS that touch the disk pass the gate too.

func (fs *trackingFS) Link(oldname, newname string) error {
	if err := fs.gate(); err != nil {
		return err
	}
	return fs.FS.Link(oldname, newname)
}

func (fs *trackingFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if err := fs.gate(); err != nil {
		return nil, err
	}
	return fs.FS.Open(name, opts...)
}

func (fs *trackingFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if err := fs.gate(); err != nil {
		return nil, err
	}
	return fs.FS.OpenReadWrite(name, category, opts...)
}

func (fs *trackingFS) OpenDir(name string) (vfs.File, error) {
	if err := fs.gate(); err != nil {
		return nil, err
	}
	return fs.FS.OpenDir(name)
}

func (fs *trackingFS) Remove(name string) error {
	if err := fs.gate(); err != nil {
		return err
	}
	return fs.FS.Remove(name)
}

func (fs *trackingFS) RemoveAll(name string) error {
	if err := fs.gate(); err != nil {
		return err
	}
	return fs.FS.RemoveAll(name)
}

func (fs *trackingFS) Rename(oldname, newname string) error {
	if err := fs.gate(); err != nil {
		return err
	}
	return fs.FS.Rename(oldname, newname)
}

func (fs *trackingFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.gate(); err != nil {
		return nil, err
	}
	return fs.FS.ReuseForWrite(oldname, newname, category)
}

func (fs *trackingFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := fs.gate(); err != nil {
		return err
	}
	return fs.FS.MkdirAll(dir, perm)
}

func (fs *trackingFS) Lock(name string) (io.Closer, error) {
	if err := fs.gate(); err != nil {
		return nil, err
	}
	return fs.FS.Lock(name)
}

func (fs *trackingFS) List(dir string) ([]string, error) {
	if err := fs.gate(); err != nil {
		return nil, err
	}
	return fs.FS.List(dir)
}

func (fs *trackingFS) Stat(name string) (vfs.FileInfo, error) {
	if err := fs.gate(); err != nil {
		return nil, err
	}
	return fs.FS.Stat(name)
}

func (fs *trackingFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	if err := fs.gate(); err != nil {
		return vfs.DiskUsage{}, err
	}
	return fs.FS.GetDiskUsage(path)
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
