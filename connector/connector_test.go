package connector

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCanonicalPath(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if err := os.Mkdir("real", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", "link"); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "real", "out")
	for _, p := range []string{"real/out", "./real/out/", filepath.Join(dir, "real", ".", "out"), "link/out", "link/../real/out"} {
		got, err := CanonicalPath(p)
		if err != nil || got != want {
			t.Errorf("CanonicalPath(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	// Nothing of it exists below dir: still absolute and clean.
	if got, _ := CanonicalPath("a/b/../c"); got != filepath.Join(dir, "a", "c") {
		t.Errorf("CanonicalPath of a missing path = %q", got)
	}
}
