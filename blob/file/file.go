package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/eddyflow/eddy/blob"
)

func init() {
	blob.RegisterScheme("file", func(rest string) (blob.Store, error) { return New(rest) })
}

// Store is a blob.Store keeping each object in a file under one directory.
// It is safe for concurrent use, also by several processes sharing the
// directory.
type Store struct {
	dir string // absolute, cleaned
}

var (
	_ blob.Store      = (*Store)(nil)
	_ blob.Creator    = (*Store)(nil)
	_ blob.IntoGetter = (*Store)(nil)
)

// New returns the store of directory dir, creating it (and its parents) if
// needed. A relative dir is resolved against the working directory now.
func New(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("blob/file: empty directory path")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob/file: directory %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("blob/file: create directory: %w", err)
	}
	sweepTemp(abs, time.Now().Add(-staleTemp))
	return &Store{dir: abs}, nil
}

// staleTemp is the age past which a temporary file is taken for the
// leftover of a writer that died mid-Put.
const staleTemp = 10 * time.Minute

// sweepTemp removes temporary files (".<name>.tmp-*") last modified before
// cutoff: a killed process leaves them behind, and nothing lists or prunes
// them. Younger ones may belong to a live writer and are left alone. Errors
// are ignored: sweeping is housekeeping.
func sweepTemp(dir string, cutoff time.Time) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		name := d.Name()
		if !strings.HasPrefix(name, ".") || !strings.Contains(name, ".tmp-") {
			return nil
		}
		if info, err := d.Info(); err == nil && info.ModTime().Before(cutoff) {
			_ = os.Remove(path)
		}
		return nil
	})
}

// Path returns the file that holds (or would hold) the object name, for
// debugging and tools. It does not validate name.
func (s *Store) Path(name string) string {
	return filepath.Join(s.dir, filepath.FromSlash(name))
}

// Dir returns the store's directory as an absolute path.
func (s *Store) Dir() string { return s.dir }

// Put stores data under name atomically and durably: temporary file, fsync,
// rename, fsync of the directory.
func (s *Store) Put(ctx context.Context, name string, data []byte) error {
	if err := blob.ValidateName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("blob/file: put %q: %w", name, err)
	}
	path := s.Path(name)
	dir := filepath.Dir(path)
	f, err := s.createTemp(dir, filepath.Base(path))
	if err != nil {
		return fmt.Errorf("blob/file: put %q: %w", name, err)
	}
	tmp := f.Name()
	if err := writeSynced(f, data); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("blob/file: put %q: write %s: %w", name, tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("blob/file: put %q: %w", name, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("blob/file: put %q: sync directory: %w", name, err)
	}
	return nil
}

// PutIfAbsent stores data under name like Put, but only if there is no
// object name; otherwise it returns an error matching blob.ErrExists. It
// writes and fsyncs a temporary file, then link(2)s it to the final name,
// which fails if the name exists: the check and the creation are one step
// of the file system, so of several processes creating one name exactly
// one succeeds, and the object appears whole. The temporary file is then
// removed and the directory fsynced.
func (s *Store) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	if err := blob.ValidateName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("blob/file: put %q if absent: %w", name, err)
	}
	path := s.Path(name)
	dir := filepath.Dir(path)
	f, err := s.createTemp(dir, filepath.Base(path))
	if err != nil {
		return fmt.Errorf("blob/file: put %q if absent: %w", name, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := writeSynced(f, data); err != nil {
		return fmt.Errorf("blob/file: put %q if absent: write %s: %w", name, tmp, err)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := os.Lstat(path); serr == nil && fi.IsDir() {
				return fmt.Errorf("blob/file: put %q if absent: %s is a directory (objects are stored under that name)", name, path)
			}
			return blob.Exists(name)
		}
		return fmt.Errorf("blob/file: put %q if absent: %w", name, err)
	}
	if err := os.Remove(tmp); err != nil {
		return fmt.Errorf("blob/file: put %q if absent: remove %s: %w", name, tmp, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("blob/file: put %q if absent: sync directory: %w", name, err)
	}
	return nil
}

// createTemp creates a temporary file in dir, creating dir if needed. A
// concurrent Delete may prune dir, or a parent of it, between the steps,
// hence the retries.
func (s *Store) createTemp(dir, base string) (*os.File, error) {
	// Keep the temporary name within NAME_MAX; the base is only a hint for
	// whoever finds a leftover after a crash.
	if len(base) > 64 {
		base = base[:64]
		for !utf8.ValidString(base) {
			base = base[:len(base)-1]
		}
	}
	for attempt := 0; ; attempt++ {
		err := s.mkdirAll(dir)
		if err == nil {
			var f *os.File
			if f, err = os.CreateTemp(dir, "."+base+".tmp-*"); err == nil {
				return f, nil
			}
		}
		// Each retry follows a Delete that made progress; give up only on
		// what cannot be a race.
		if !errors.Is(err, fs.ErrNotExist) || attempt == 100 {
			return nil, err
		}
	}
}

// writeSynced writes data and its trailer to f, fsyncs and closes it.
func writeSynced(f *os.File, data []byte) error {
	err := writeChunked(f, data)
	if err == nil {
		var t [blob.TrailerSize]byte
		_, err = f.Write(blob.AppendTrailer(t[:0], data))
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		dropCache(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writebackChunk is how much of an object Put writes before it starts
// writing those bytes back to the disk. Without it a large object (a
// Pebble file a materialization uploads: megabytes) is dirty in the page
// cache until its fsync, which then writes all of it at once; on ext4 any
// other fsync in the meantime (the log's, a manifest's, each a few KiB)
// commits the journal behind those bytes and waits as long. Written back
// a chunk at a time, at most two chunks of an object are dirty: the
// bytes-per-sync of RocksDB and Pebble.
const writebackChunk = 1 << 20

// writeChunked writes data to f in chunks of writebackChunk, starting the
// writeback of each as the next is written.
func writeChunked(f *os.File, data []byte) error {
	var off int64
	for len(data) > 0 {
		n := min(len(data), writebackChunk)
		if _, err := f.Write(data[:n]); err != nil {
			return err
		}
		if n == writebackChunk {
			startWriteback(f, off, int64(n))
		}
		off += int64(n)
		data = data[n:]
	}
	return nil
}

// mkdirAll creates dir and its missing parents up to the store's directory,
// fsyncing the parent of each directory it creates so the new entries
// survive a crash.
func (s *Store) mkdirAll(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	parent := filepath.Dir(dir)
	if dir != s.dir && parent != dir {
		if err := s.mkdirAll(parent); err != nil {
			return err
		}
	}
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(parent)
}

// syncDir fsyncs a directory, making renames and new entries in it durable.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for sync; NTFS journals renames
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Get reads the object name and verifies its trailer.
func (s *Store) Get(ctx context.Context, name string) ([]byte, error) {
	var buf []byte
	return s.GetInto(ctx, name, &buf)
}

// GetInto is Get reading the object into *buf, grown as needed: a reader
// of many objects in turn reuses one buffer.
func (s *Store) GetInto(ctx context.Context, name string, buf *[]byte) ([]byte, error) {
	if err := blob.ValidateName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("blob/file: get %q: %w", name, err)
	}
	path := s.Path(name)
	f, err := os.Open(path)
	if err != nil {
		if missing(err) {
			return nil, blob.NotFound(name)
		}
		return nil, fmt.Errorf("blob/file: get %q: %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("blob/file: get %q: %w", name, err)
	}
	if fi.IsDir() {
		return nil, blob.NotFound(name)
	}
	size := fi.Size()
	if int64(int(size)) != size {
		return nil, fmt.Errorf("blob/file: get %q: %d bytes do not fit in memory", name, size)
	}
	if cap(*buf) < int(size) {
		*buf = make([]byte, size)
	}
	data := (*buf)[:size]
	// The file's stored size: a file that ends sooner is truncated under us,
	// one that goes on was replaced (both fail the trailer check below).
	n, err := io.ReadFull(f, data)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, fmt.Errorf("blob/file: get %q: %w", name, err)
	}
	return blob.CheckTrailer(name, data[:n])
}

// missing reports whether err says a path does not exist, including the case
// where one of its parents is a file.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// List walks only the part of the tree that can hold names with prefix,
// skipping dot-files and dot-directories.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	start := s.dir
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		// Every valid name with this prefix lies under the directory
		// prefix[:i], which is then itself a valid name.
		if blob.ValidateName(prefix[:i]) != nil {
			return nil, nil
		}
		start = s.Path(prefix[:i])
	}
	var names []string
	err := filepath.WalkDir(start, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if missing(err) {
				return nil // gone, or pruned by a concurrent Delete
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if path == start {
			return nil
		}
		rel, err := filepath.Rel(s.dir, path)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || !strings.HasPrefix(name+"/", prefix) && !strings.HasPrefix(prefix, name+"/") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && strings.HasPrefix(name, prefix) && blob.ValidateName(name) == nil {
			names = append(names, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("blob/file: list %q: %w", prefix, err)
	}
	slices.Sort(names)
	return names, nil
}

// Delete removes the object name, then removes the directories the removal
// left empty, up to (not including) the store's directory.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := blob.ValidateName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("blob/file: delete %q: %w", name, err)
	}
	path := s.Path(name)
	if fi, err := os.Lstat(path); err != nil || fi.IsDir() {
		if err == nil || missing(err) {
			return nil // a directory is not an object
		}
		return fmt.Errorf("blob/file: delete %q: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !missing(err) {
		return fmt.Errorf("blob/file: delete %q: %w", name, err)
	}
	// Best effort: os.Remove fails on the first directory that is not empty.
	for dir := filepath.Dir(path); dir != s.dir && strings.HasPrefix(dir, s.dir); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}
