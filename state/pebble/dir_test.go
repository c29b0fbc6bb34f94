package pebble_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/eddyflow/eddy/state/pebble"
)

// TestDeletedDirectory: a DB whose directory is deleted under it fails
// its next flush or checkpoint with an error naming the directory, and
// every read after that with the same error: no state, and no empty
// state, is read from it.
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
	keys, groups := keysOf(200, 0, maxPar)
	read := s.db.Load(groups[0], 1, keys[0], true, func(_, _ []byte) error {
		t.Error("read a record from the failed DB")
		return nil
	})
	if !errors.As(read, &de) || de.Dir != dbDir {
		t.Fatalf("read after the failure = %v, want a DirError naming %s", read, dbDir)
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

// TestFailureUnderStalledWrite: the disk fills, or the directory is
// deleted, while a write waits for a flush (the memtables are full).
// Pebble retries the failed flush for ever, so the write would wait for
// ever, and the job with it; instead it returns an error naming the
// directory and the cause, reads and checkpoints of the DB fail with it
// too, Close returns and the pool has room for the DB the job restores.
func TestFailureUnderStalledWrite(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault func(dir string) error // what the flush meets once a write waits
		cause error
	}{
		{"disk full", func(string) error { return syscall.ENOSPC }, syscall.ENOSPC},
		{"directory deleted", func(dir string) error {
			if err := os.RemoveAll(dir); err != nil {
				t.Error(err)
			}
			return nil // the operation itself then fails
		}, os.ErrNotExist},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "db")
			var armed atomic.Bool
			stalled := make(chan struct{})
			var once sync.Once
			var fault sync.Once
			var faultErr error
			inject := errorfs.InjectorFunc(func(op errorfs.Op) error {
				if armed.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
					<-stalled // no flush gets through until a write waits for one
					fault.Do(func() { faultErr = c.fault(dir) })
					return faultErr
				}
				return nil
			})
			p, err := pebble.NewPool(pebble.Memory(pebble.MinMemory(1)), pebble.MaxDBs(1),
				pebble.WrapFS(func(fs vfs.FS) vfs.FS { return errorfs.Wrap(fs, inject) }),
				pebble.OnWriteStall(func() { once.Do(func() { close(stalled) }) }))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			db, err := p.Open(dir, maxPar, 0, maxPar)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Set(0, 1, []byte("kept"), nil, []byte("v")); err != nil {
				t.Fatal(err)
			}
			if err := db.Commit(); err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			val := make([]byte, 16<<10)
			// Far more than the memtables hold (2 MiB): a write must wait.
			for i := 0; err == nil; i++ {
				if i == 4096 {
					t.Fatal("4096 writes of 16 KiB went into the memtables of a DB that cannot flush")
				}
				if err = db.Set(i%maxPar, 1, fmt.Appendf(nil, "key-%d", i), nil, val); err == nil {
					err = db.Commit()
				}
			}
			var de *pebble.DirError
			if !errors.As(err, &de) || de.Dir != dir || !errors.Is(err, c.cause) {
				t.Fatalf("write = %v, want a DirError naming %s and %v", err, dir, c.cause)
			}
			t.Log(err)
			read := db.Load(0, 1, []byte("kept"), false, func(_, v []byte) error {
				t.Errorf("read %q from the failed DB", v)
				return nil
			})
			if !errors.As(read, &de) || !errors.Is(read, c.cause) {
				t.Fatalf("read after the failure = %v, want the DirError", read)
			}
			if _, err := db.TakeCheckpoint(1); !errors.As(err, &de) || !errors.Is(err, c.cause) {
				t.Fatalf("checkpoint after the failure = %v, want the DirError", err)
			}
			t.Logf("close: %v", db.Close())
			armed.Store(false)
			again, err := p.Open(filepath.Join(root, "restored"), maxPar, 0, maxPar)
			if err != nil {
				t.Fatalf("open after the failed DB was closed: %v", err)
			}
			if err := again.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
