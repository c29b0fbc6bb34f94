package pebble

import (
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Local recovery: a restore takes each checkpoint file it finds on local
// disk, with the size and CRC-32C the checkpoint recorded, from there (a
// hard link, or a copy across file systems) instead of downloading it.
// The runtime names the directories to look in with SetLocalCopies: the
// databases and last local checkpoints of an attempt that failed in this
// process, and those a killed process left under the same state
// directory. A local file is only a cache of the checkpoint: any file that
// does not match is ignored and downloaded, so a damaged or foreign local
// directory can slow a restore down but never changes what it restores.

// RestoreStats counts where a restore took its checkpoint files from.
type RestoreStats struct {
	LocalFiles, DownloadedFiles int
	LocalBytes, DownloadedBytes int64
}

func (s *RestoreStats) add(o RestoreStats) {
	s.LocalFiles += o.LocalFiles
	s.DownloadedFiles += o.DownloadedFiles
	s.LocalBytes += o.LocalBytes
	s.DownloadedBytes += o.DownloadedBytes
}

// localCopies indexes the immutable files (SSTs, blob files) under some
// directories by name, built at the first lookup.
type localCopies struct {
	dirs []string

	once   sync.Once
	byName map[string][]string // file name → paths
}

func (l *localCopies) index() {
	l.byName = map[string][]string{}
	for _, dir := range l.dirs {
		_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil // a directory removed or unreadable meanwhile: skip it
			}
			if e.Type().IsRegular() && immutable(e.Name()) {
				l.byName[e.Name()] = append(l.byName[e.Name()], path)
			}
			return nil
		})
	}
}

// take puts a local copy of f at dst and reports whether it found one with
// f's size and checksum.
func (l *localCopies) take(f File, dst string) bool {
	if l == nil || !immutable(f.Name) {
		return false
	}
	l.once.Do(l.index)
	for _, src := range l.byName[f.Name] {
		if !matches(src, f) {
			continue
		}
		if os.Link(src, dst) == nil || copyFile(src, dst) == nil {
			return true
		}
	}
	return false
}

// matches reports whether the file at path has f's size and CRC-32C.
func matches(path string, f File) bool {
	file, err := os.Open(path)
	if err != nil {
		return false
	}
	defer file.Close()
	if st, err := file.Stat(); err != nil || st.Size() != f.Size {
		return false
	}
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, file)
	return err == nil && n == f.Size && h.Sum32() == f.CRC32C
}

// copyFile copies src to a new file dst.
func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	_, err = io.Copy(out, in)
	return err
}

// SetLocalCopies names the directories whose files later restores of the
// pool may take instead of downloading them (local recovery); none turns
// local recovery off. The directories are only read; their owner removes
// them once no restore needs them.
func (p *Pool) SetLocalCopies(dirs ...string) {
	var l *localCopies
	if len(dirs) > 0 {
		l = &localCopies{dirs: dirs}
	}
	p.localMu.Lock()
	p.local = l
	p.localMu.Unlock()
}

func (p *Pool) localCopies() *localCopies {
	p.localMu.Lock()
	defer p.localMu.Unlock()
	return p.local
}

// RestoreStats returns where the DB's restore took its files from (zero
// for a DB that was opened, not restored).
func (d *DB) RestoreStats() RestoreStats { return d.restoreStats }
