package file_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/blobtest"
	"github.com/eddyflow/eddy/blob/file"
)

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store { return newStore(t) },
		blobtest.Corrupt(func(t *testing.T, s blob.Store, name string, damage func([]byte) []byte) {
			path := s.(*file.Store).Path(name)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}))
}

// PutIfAbsent leaves no temporary file behind, whether it wins or loses.
func TestPutIfAbsentLeavesNoTemp(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	if err := s.PutIfAbsent(ctx, "d/obj", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "d/obj", []byte("b")); err == nil {
		t.Fatal("second PutIfAbsent succeeded")
	}
	entries, err := os.ReadDir(filepath.Join(s.Dir(), "d"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "obj" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %q, want only obj", names)
	}
}

// Two stores on one directory, as two processes would have, race to
// create one name: the link(2) decides, not anything in one Store value.
func TestPutIfAbsentAcrossStores(t *testing.T) {
	dir := t.TempDir()
	a, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := a.PutIfAbsent(ctx, "lock", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "lock", []byte("b")); !errorsIsExists(err) {
		t.Fatalf("second store's PutIfAbsent = %v, want ErrExists", err)
	}
	if got, err := b.Get(ctx, "lock"); err != nil || string(got) != "a" {
		t.Fatalf("Get = %q, %v; want \"a\"", got, err)
	}
}

// A directory holding objects is no object, and not one that "exists".
func TestPutIfAbsentOnDirectory(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	mustPut(t, s, "d/obj", []byte("x"))
	err := s.PutIfAbsent(ctx, "d", []byte("y"))
	if err == nil || errorsIsExists(err) {
		t.Fatalf("PutIfAbsent over a directory = %v, want an error saying it is a directory", err)
	}
}

func errorsIsExists(err error) bool { return errors.Is(err, blob.ErrExists) }
