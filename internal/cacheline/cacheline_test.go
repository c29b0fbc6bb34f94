package cacheline

import (
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
