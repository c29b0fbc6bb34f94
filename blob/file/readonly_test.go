package file

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOpenExistingChangesNothing: OpenExisting refuses a missing directory
// without creating it and leaves even stale temporary files alone (New
// sweeps them), while reading what New's store wrote.
func TestOpenExistingChangesNothing(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope")
	if _, err := OpenExisting(missing); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing directory: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("OpenExisting created the directory")
	}
	w, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Put(ctx, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "a", ".b.tmp-123")
	os.WriteFile(stale, nil, 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(stale, old, old)
	r, err := OpenExisting(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err != nil {
		t.Fatal("OpenExisting swept a temporary file")
	}
	if b, err := r.Get(ctx, "a/b"); err != nil || string(b) != "x" {
		t.Fatalf("Get: %q %v", b, err)
	}
	if names, err := r.List(ctx, "a/"); err != nil || len(names) != 1 {
		t.Fatalf("List: %v %v", names, err)
	}
}
