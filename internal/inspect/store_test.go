package inspect

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/eddyflow/eddy/blob/file"
)

// TestOpenStoreReadOnly: a missing directory is an error (not created), and
// the store refuses writes.
func TestOpenStoreReadOnly(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope")
	for _, url := range []string{missing, "file://" + missing} {
		if _, err := OpenStore(url); err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("%s: %v", url, err)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("OpenStore created the directory")
	}
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "checkpoints/x", []byte("x")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Put: %v", err)
	}
	if err := s.Delete(ctx, "checkpoints/x"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Delete: %v", err)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 0 {
		t.Fatalf("store written: %v", names)
	}
}

// TestOpenStoreForms: the file forms of blob.Open name the same directory.
func TestOpenStoreForms(t *testing.T) {
	dir := t.TempDir()
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, dir)
	if err != nil {
		t.Skip(err)
	}
	for _, url := range []string{dir, "file://" + dir, "FILE://" + dir, "file://./" + rel, rel} {
		if _, err := OpenStore(url); err != nil {
			t.Errorf("%s: %v", url, err)
		}
	}
	if _, err := OpenStore("file://"); err == nil {
		t.Error("file:// with no path opened")
	}
	if _, err := OpenStore("nosuch://x"); err == nil || !strings.Contains(err.Error(), "no store registered") {
		t.Errorf("unknown scheme: %v", err)
	}
}
