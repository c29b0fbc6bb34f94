package cacheline

import (
	"sync"
	"testing"
	"unsafe"
)

// TestNewOwnsItsLines: the cache lines a value from New touches hold
// nothing else, whatever its size: the allocation reaches a whole line
// beyond it on either side.
func TestNewOwnsItsLines(t *testing.T) {
	check := func(name string, p unsafe.Pointer, size, allocSize, offset uintptr) {
		t.Helper()
		first := uintptr(p) - offset // where the allocation starts
		lineStart := uintptr(p) &^ (Size - 1)
		lineEnd := (uintptr(p) + size + Size - 1) &^ (Size - 1)
		if lineStart < first || lineEnd > first+allocSize {
			t.Errorf("%s at %#x (%d bytes): its lines [%#x, %#x) reach outside its allocation [%#x, %#x)",
				name, uintptr(p), size, lineStart, lineEnd, first, first+allocSize)
		}
	}
	for range 100 {
		a := New[int64]()
		check("int64", unsafe.Pointer(a), 8, unsafe.Sizeof(padded[int64]{}), unsafe.Offsetof(padded[int64]{}.v))
		b := New[[100]byte]()
		check("[100]byte", unsafe.Pointer(b), 100, unsafe.Sizeof(padded[[100]byte]{}), unsafe.Offsetof(padded[[100]byte]{}.v))
		c := New[struct{}]()
		check("struct{}", unsafe.Pointer(c), 0, unsafe.Sizeof(padded[struct{}]{}), unsafe.Offsetof(padded[struct{}]{}.v))
	}
}

// TestBytesAligned: a buffer from Bytes starts at a cache line and its
// capacity is whole lines, so it shares none with another allocation.
func TestBytesAligned(t *testing.T) {
	for _, n := range []int{0, 1, 8, 63, 64, 65, 100, 200, 500, 1000, 5000} {
		for range 20 {
			b := Bytes(n)
			if len(b) != 0 || cap(b) < n || cap(b)%Size != 0 {
				t.Fatalf("Bytes(%d): len %d cap %d, want empty with whole lines for at least %d", n, len(b), cap(b), n)
			}
			if p := uintptr(unsafe.Pointer(unsafe.SliceData(b))); p%Size != 0 {
				t.Fatalf("Bytes(%d) starts at %#x, not at a cache line", n, p)
			}
		}
	}
}

// BenchmarkCounters: two goroutines each increment their own counter, the
// counters allocated one after the other with new (likely on one cache
// line) or with New. ns/op is per increment of each goroutine.
func BenchmarkCounters(b *testing.B) {
	run := func(b *testing.B, x, y *int64) {
		var wg sync.WaitGroup
		for _, p := range []*int64{x, y} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range b.N {
					*p++
					sink(p)
				}
			}()
		}
		wg.Wait()
	}
	b.Run("new", func(b *testing.B) { run(b, new(int64), new(int64)) })
	b.Run("cacheline.New", func(b *testing.B) { run(b, New[int64](), New[int64]()) })
}

// sink keeps the increments from being folded into one store per loop.
//
//go:noinline
func sink(*int64) {}
