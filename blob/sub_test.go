package blob_test

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/blobtest"
	"github.com/eddyflow/eddy/blob/file"
)

// A sub-store is a store: it passes the conformance suite, conditional
// create included.
func TestSubConformance(t *testing.T) {
	inner := map[blob.Store]*file.Store{}
	blobtest.Run(t, func(t *testing.T) blob.Store {
		f, err := file.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		s, err := blob.Sub(f, "tasks/3/")
		if err != nil {
			t.Fatal(err)
		}
		inner[s] = f
		return s
	}, blobtest.Corrupt(func(t *testing.T, s blob.Store, name string, damage func([]byte) []byte) {
		path := inner[s].Path("tasks/3/" + name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, damage(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}), blobtest.ErrorNamePrefix("tasks/3/"))
}

// TestSubKeepsToItsPrefix: two sub-stores of one store see only their
// own objects, the store sees both under their prefixes, a sub-store of a
// file store is not a Locker (its writer claims it), and a prefix that is
// not a directory is refused.
func TestSubKeepsToItsPrefix(t *testing.T) {
	ctx := context.Background()
	f, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := blob.Sub(f, "tasks/1/")
	if err != nil {
		t.Fatal(err)
	}
	b, err := blob.Sub(f, "tasks/11/")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, "checkpoints/x", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := b.(blob.Creator).PutIfAbsent(ctx, "checkpoints/x", []byte("b")); err != nil {
		t.Fatal(err)
	}
	for s, want := range map[blob.Store]string{a: "a", b: "b"} {
		names, err := s.List(ctx, "")
		if err != nil || !slices.Equal(names, []string{"checkpoints/x"}) {
			t.Fatalf("%v lists %q (%v)", s, names, err)
		}
		if got, err := s.Get(ctx, "checkpoints/x"); err != nil || string(got) != want {
			t.Fatalf("%v: %q (%v), want %q", s, got, err, want)
		}
	}
	if names, err := f.List(ctx, "tasks/"); err != nil || !slices.Equal(names, []string{"tasks/1/checkpoints/x", "tasks/11/checkpoints/x"}) {
		t.Fatalf("the store lists %q (%v)", names, err)
	}
	if _, ok := a.(blob.Locker); ok {
		t.Error("a sub-store of a file store is a Locker")
	}
	if _, err := blob.Sub(f, "tasks/1"); err == nil {
		t.Error("a prefix without a trailing slash was accepted")
	}
}
