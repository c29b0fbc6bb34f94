package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStderrTail: an early exit is reported with the end of the process's
// stderr, at most 2000 bytes of it, and without a note when it wrote
// nothing.
func TestStderrTail(t *testing.T) {
	dir := t.TempDir()
	p := &benchProc{errPath: filepath.Join(dir, "p0.stderr")}
	if got := p.stderrTail(); !strings.Contains(got, "no such file") {
		t.Fatalf("missing stderr file: %q, want the read error", got)
	}
	if err := os.WriteFile(p.errPath, []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := p.stderrTail(); got != "" {
		t.Fatalf("empty stderr: %q, want nothing", got)
	}
	long := strings.Repeat("x", 5000) + "\neddy: opening the checkpoint store: permission denied\n"
	if err := os.WriteFile(p.errPath, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	got := p.stderrTail()
	if !strings.HasSuffix(got, "eddy: opening the checkpoint store: permission denied") || !strings.Contains(got, p.errPath) || len(got) > 2000+len(p.errPath)+40 {
		t.Fatalf("stderr tail %q (%d bytes): want its path and its last 2000 bytes, ending with the error", got[:min(len(got), 120)], len(got))
	}
}
