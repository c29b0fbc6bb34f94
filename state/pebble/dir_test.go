package pebble_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/eddyflow/eddy/state/pebble"
)

// TestDeletedDirectory: a DB whose directory is deleted under it fails
// its next flush or checkpoint with an error naming the directory.
func TestDeletedDirectory(t *testing.T) {
	p := newPool(t)
	dir := filepath.Join(t.TempDir(), "db")
	s := newSubtask(t, p, dir, 0, maxPar)
	rng := rand.New(rand.NewPCG(5, 5))
	s.run(t, rng, 200, 500)
	dbDir := s.db.Dir()
	if err := os.RemoveAll(dbDir); err != nil {
		t.Fatal(err)
	}
	s.run(t, rng, 200, 100) // into the memtable: no file yet
	err := s.db.Flush()
	if err == nil {
		_, err = s.db.TakeCheckpoint(1)
	}
	var de *pebble.DirError
	if !errors.As(err, &de) || de.Dir != dbDir || !strings.Contains(err.Error(), dbDir) {
		t.Fatalf("flush after the directory was deleted = %v, want a DirError naming %s", err, dbDir)
	}
}

// TestCorruptLocalFile: a damaged SST in the local directory fails the
// reads of the state with an error naming the directory, which the
// backend's Flush returns; it does not serve state from it.
func TestCorruptLocalFile(t *testing.T) {
	p := newPool(t)
	root := t.TempDir()
	s := newSubtask(t, p, root, 0, maxPar)
	s.run(t, rand.New(rand.NewPCG(6, 6)), 300, 2000)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	dbDir := s.db.Dir()
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	damaged := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".sst") {
			path := filepath.Join(dbDir, e.Name())
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(b)/2; i += 64 {
				b[i] ^= 0x5a
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			damaged++
		}
	}
	if damaged == 0 {
		t.Fatal("no SST to damage")
	}
	db, err := p.Open(dbDir, maxPar, 0, maxPar)
	if err == nil {
		defer db.Close()
		r := wrapDB(t, db, 0, maxPar)
		keys, groups := keysOf(300, 0, maxPar)
		for i, k := range keys {
			r.pb.b.SetCurrentKey(k, groups[i])
			r.pb.read()
			if r.pb.b.Err() != nil {
				break
			}
		}
		err = r.pb.b.Flush()
	}
	var de *pebble.DirError
	if !errors.As(err, &de) || de.Dir != dbDir || !strings.Contains(err.Error(), dbDir) {
		t.Fatalf("reading damaged files = %v, want a DirError naming %s", err, dbDir)
	}
	t.Log(err)
}

// TestManifestWriteFails: Pebble treats a failed MANIFEST write (a full
// disk under a flush) as fatal, and its own logger ends the process. Here
// the DB fails instead: the flush returns an error naming the directory
// and the MANIFEST, and so does every later flush or checkpoint; the
// process goes on, so the job can restore from its last checkpoint.
func TestManifestWriteFails(t *testing.T) {
	var full atomic.Bool
	inject := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && strings.HasPrefix(filepath.Base(op.Path), "MANIFEST") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return syscall.ENOSPC
		}
		return nil
	})
	p, err := pebble.NewPool(pebble.Memory(64<<20), pebble.MaxDBs(8),
		pebble.WrapFS(func(fs vfs.FS) vfs.FS { return errorfs.Wrap(fs, inject) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	s := newSubtask(t, p, t.TempDir(), 0, maxPar)
	rng := rand.New(rand.NewPCG(7, 7))
	s.run(t, rng, 200, 500)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	s.run(t, rng, 200, 500)
	err = s.db.Flush()
	var de *pebble.DirError
	if !errors.As(err, &de) || de.Dir != s.db.Dir() || !strings.Contains(err.Error(), "MANIFEST") || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("flush with the MANIFEST unwritable = %v, want a DirError naming %s, the MANIFEST and ENOSPC", err, s.db.Dir())
	}
	full.Store(false)
	if _, err := s.db.TakeCheckpoint(2); !errors.As(err, &de) {
		t.Fatalf("checkpoint after the fatal failure = %v, want the DirError again", err)
	}
	if err := s.db.Err(); !errors.As(err, &de) || !strings.Contains(err.Error(), "MANIFEST") {
		t.Fatalf("Err = %v, want the MANIFEST failure", err)
	}
}
