package pebble_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/state/pebble"
)

// TestLocalRecovery: with the directory of the DB that took a checkpoint
// named as a local copy, a restore takes the files found there with the
// recorded size and checksum instead of downloading them; a local file
// that was damaged, and files of other DBs with the same names, are
// downloaded instead, and the restored state is the checkpoint's either
// way.
func TestLocalRecovery(t *testing.T) {
	ctx := context.Background()
	p := newPool(t)
	store := blobStore(t)
	root := t.TempDir()
	s := newSubtask(t, p, root, 0, maxPar)
	s.run(t, rand.New(rand.NewPCG(7, 7)), 400, 3000)
	c, _, err := s.db.Checkpoint(ctx, store, pebble.CheckpointOptions{Prefix: "op", Run: "r", ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	var immutable int64
	nImmutable := 0
	for _, f := range c.Files {
		if strings.HasSuffix(f.Name, ".sst") {
			immutable += f.Size
			nImmutable++
		}
	}
	if nImmutable == 0 {
		t.Fatal("the checkpoint has no SST")
	}
	// Another DB whose files have the same names (numbered alike) but
	// other contents: never taken.
	other := newSubtask(t, p, t.TempDir(), 0, maxPar)
	other.run(t, rand.New(rand.NewPCG(8, 8)), 400, 3000)
	if _, err := other.db.TakeCheckpoint(1); err != nil {
		t.Fatal(err)
	}

	restore := func(t *testing.T, local ...string) pebble.RestoreStats {
		t.Helper()
		p.SetLocalCopies(local...)
		defer p.SetLocalCopies()
		db, err := p.Restore(ctx, store, filepath.Join(t.TempDir(), "db"), maxPar, 0, maxPar, []pebble.Checkpoint{c})
		if err != nil {
			t.Fatal(err)
		}
		r := wrapDB(t, db, 0, maxPar)
		compareSnapshots(t, s.heap.b, r.pb.b)
		st := db.RestoreStats()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return st
	}

	t.Run("none", func(t *testing.T) {
		st := restore(t)
		if st.LocalFiles != 0 || st.DownloadedFiles != len(c.Files) {
			t.Fatalf("without local copies: %+v, want all %d files downloaded", st, len(c.Files))
		}
	})
	t.Run("other db", func(t *testing.T) {
		same := 0
		for _, f := range c.Files {
			if _, err := os.Stat(filepath.Join(other.db.Dir(), f.Name)); err == nil && strings.HasSuffix(f.Name, ".sst") {
				same++
			}
		}
		if same == 0 {
			t.Fatal("the other DB has no SST named like the checkpoint's: the case tests nothing")
		}
		st := restore(t, other.db.Dir(), other.db.Dir()+".checkpoint-1")
		if st.LocalFiles != 0 {
			t.Fatalf("took %d files of another DB: %+v", st.LocalFiles, st)
		}
	})
	t.Run("own", func(t *testing.T) {
		st := restore(t, filepath.Dir(other.db.Dir()), root)
		if st.LocalFiles != nImmutable || st.LocalBytes != immutable || st.DownloadedFiles != len(c.Files)-nImmutable {
			t.Fatalf("with the DB's own directory: %+v, want its %d SSTs (%d bytes) local and the other %d files downloaded",
				st, nImmutable, immutable, len(c.Files)-nImmutable)
		}
	})
	t.Run("damaged", func(t *testing.T) {
		// Damage one local SST (in the DB's directory and in every hard
		// link of it): it is downloaded, the others stay local.
		var victim string
		for _, f := range c.Files {
			if strings.HasSuffix(f.Name, ".sst") {
				victim = filepath.Join(s.db.Dir(), f.Name)
				break
			}
		}
		b, err := os.ReadFile(victim)
		if err != nil {
			t.Skipf("the SST is no longer in the DB's directory: %v", err)
		}
		b[len(b)/2] ^= 0x10
		if err := os.WriteFile(victim, b, 0o644); err != nil {
			t.Fatal(err)
		}
		st := restore(t, root)
		if st.LocalFiles != nImmutable-1 || st.DownloadedFiles != len(c.Files)-nImmutable+1 {
			t.Fatalf("with one local SST damaged: %+v, want %d local", st, nImmutable-1)
		}
	})
}
