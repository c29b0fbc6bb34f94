package cacheline

// Size is the cache line size assumed, in bytes: that of amd64 cores and
// of most arm64 ones.
const Size = 64

// Pad is a cache line of nothing. A struct that one goroutine writes for
// every record starts and ends with one, so that no other allocation
// shares a cache line with its fields.
type Pad [Size]byte

// padded is a T with a Pad on either side.
type padded[T any] struct {
	_ Pad
	v T
	_ Pad
}

// New returns a pointer to a new zero T that shares no cache line with
// any other allocation. The pointer keeps the whole padded allocation
// alive.
func New[T any]() *T {
	return &new(padded[T]).v
}

// Bytes returns an empty byte slice with room for at least n bytes whose
// memory shares no cache line with any other allocation, for a buffer
// written for every record (an encoded key). Go allocates sizes that are
// multiples of Size at multiples of Size, and append grows such a buffer
// to sizes that stay so for all but very large keys.
func Bytes(n int) []byte {
	return make([]byte, 0, (max(n, 1)+Size-1)/Size*Size)
}
