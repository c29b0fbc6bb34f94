package cputime

import (
	"runtime"
	"testing"
)

// TestProcessGrows: spinning adds CPU time.
func TestProcessGrows(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no CPU time here")
	}
	before := Process()
	x := 0
	for i := range 50_000_000 {
		x ^= i
	}
	if after := Process(); after <= before {
		t.Fatalf("CPU time %v after spinning, %v before (x %d)", after, before, x)
	}
}
