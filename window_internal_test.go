package eddy

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/eddyflow/eddy/internal/intern"
)

// TestWindowIndexInternsKeys: the windows of one string key share one copy
// of its bytes in the index, and the copies of keys without open windows
// are swept out as new keys come.
func TestWindowIndexInternsKeys(t *testing.T) {
	f := &windowFn[string, int64, int64, int64]{byEnd: map[int64][]openWindow[string]{}}
	kb := []byte("driver-1")
	f.addOpen("", kb, 3, 100)
	kb[0] = 'D' // the caller's buffer is reused: the index must not keep it
	f.addOpen("", []byte("driver-1"), 3, 200)
	a, b := f.byEnd[100][0].kb, f.byEnd[200][0].kb
	if a != "driver-1" || b != "driver-1" {
		t.Fatalf("index keys %q and %q, want driver-1", a, b)
	}
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatal("two windows of one key hold two copies of its bytes")
	}
	// Those windows fire (fireIndex drops their entries); then many new
	// keys open a window each, which fires in turn, but for the last few.
	fire := func(end int64) {
		f.open -= len(f.byEnd[end])
		delete(f.byEnd, end)
	}
	fire(100)
	fire(200)
	for i := range 3 * intern.MinKeys {
		f.addOpen("", fmt.Appendf(nil, "key-%d", i), 0, int64(300+i))
		if i < 3*intern.MinKeys-10 {
			fire(int64(300 + i))
		}
	}
	if n, limit := f.keys.Len(), 2*f.open+intern.MinKeys; n > limit {
		t.Fatalf("%d keys interned for %d open windows, want at most %d", n, f.open, limit)
	}
	for end, ws := range f.byEnd {
		for _, w := range ws {
			if want := fmt.Sprintf("key-%d", end-300); w.kb != want {
				t.Fatalf("window ending %d has key %q, want %q", end, w.kb, want)
			}
		}
	}
	if unsafe.StringData(f.intern([]byte("driver-1"))) == unsafe.StringData(a) {
		t.Fatal("a key without open windows is still interned after the index grew past its sweep threshold")
	}
}

// TestPlainValue: panes are kept only for accumulators a Merge cannot
// change through a shared reference.
func TestPlainValue(t *testing.T) {
	type sums struct {
		N   int64
		Avg [2]float64
		Tag string
	}
	type withSlice struct {
		N    int64
		Seen []int64
	}
	for _, c := range []struct {
		name string
		got  bool
		want bool
	}{
		{"int64", plainValue[int64](), true},
		{"struct of numbers, an array and a string", plainValue[sums](), true},
		{"struct with a slice", plainValue[withSlice](), false},
		{"map", plainValue[map[string]int](), false},
		{"pointer", plainValue[*int64](), false},
		{"array of slices", plainValue[[2][]byte](), false},
		{"interface", plainValue[any](), false},
	} {
		if c.got != c.want {
			t.Errorf("plainValue[%s] = %v, want %v", c.name, c.got, c.want)
		}
	}
}
