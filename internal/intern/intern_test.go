package intern

import (
	"fmt"
	"testing"
	"unsafe"
)

// TestTableSharesAndSweeps: a string interned twice is one copy, not the
// caller's bytes; once the table has grown past 2*live+MinKeys, strings
// not in use are forgotten and those in use keep their copy.
func TestTableSharesAndSweeps(t *testing.T) {
	var tb Table
	var inUse []string
	used := func(yield func(string) bool) {
		for _, s := range inUse {
			if !yield(s) {
				return
			}
		}
	}
	b := []byte("kept")
	kept := tb.Intern(b, 0, used)
	b[0] = 'K' // the caller's buffer is reused
	if again := tb.Intern([]byte("kept"), 0, used); kept != "kept" || unsafe.StringData(again) != unsafe.StringData(kept) {
		t.Fatalf("interned %q then %q at another copy", kept, again)
	}
	inUse = append(inUse, kept)
	gone := tb.Intern([]byte("gone"), len(inUse), used)
	for i := range 3 * MinKeys {
		tb.Intern(fmt.Appendf(nil, "k%d", i), len(inUse), used)
	}
	if n := tb.Len(); n > 2*len(inUse)+MinKeys+1 {
		t.Fatalf("%d strings held with %d in use, want at most %d", n, len(inUse), 2*len(inUse)+MinKeys+1)
	}
	if s := tb.Intern([]byte("kept"), len(inUse), used); unsafe.StringData(s) != unsafe.StringData(kept) {
		t.Fatal("a string in use lost its copy in a sweep")
	}
	if s := tb.Intern([]byte("gone"), len(inUse), used); unsafe.StringData(s) == unsafe.StringData(gone) {
		t.Fatal("a string not in use was kept through a sweep")
	}
}
