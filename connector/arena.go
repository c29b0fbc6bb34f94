package connector

import "unsafe"

// The runtime hands a record to the next operators by shallow copy (into a
// shuffle batch, a window's list), so the memory a record points to must be
// its own: a reader may not overwrite what it pointed an earlier record at.
// Allocating that memory one object at a time costs a malloc per record and
// most of a cheap reader's time. Slab and Strings give a reader memory that
// records own at a fraction of that cost: objects and bytes are carved from
// chunks, and a chunk lives as long as any record points into it.

// Slab hands out new zeroed *T carved from chunks of Size elements. The
// zero Slab uses chunks of 64. A Slab belongs to one reader (one
// goroutine).
type Slab[T any] struct {
	// Size is the number of elements per chunk; 0 means 64.
	Size int
	free []T
}

// New returns a pointer to a zeroed T that no other call of New returns.
func (s *Slab[T]) New() *T {
	if len(s.free) == 0 {
		n := s.Size
		if n <= 0 {
			n = 64
		}
		s.free = make([]T, n)
	}
	p := &s.free[0]
	s.free = s.free[1:]
	return p
}

// Strings copies bytes into immutable strings carved from shared blocks of
// BlockSize bytes: one allocation per block instead of one per string. A
// string longer than a quarter block gets its own allocation. The zero
// Strings uses blocks of 16 KiB. A Strings belongs to one reader (one
// goroutine).
type Strings struct {
	// BlockSize is the size of a block in bytes; 0 means 16 KiB.
	BlockSize int
	block     []byte // the unused rest of the current block
}

// String returns a string holding a copy of b.
func (s *Strings) String(b []byte) string {
	n := len(b)
	if n == 0 {
		return ""
	}
	if n > len(s.block) {
		size := s.BlockSize
		if size <= 0 {
			size = 16 << 10
		}
		if n > size/4 {
			return string(b)
		}
		s.block = make([]byte, size)
	}
	// The bytes handed out are never written again: only the rest of the
	// block past them is, so the string is immutable as Go requires.
	p := s.block[:n:n]
	copy(p, b)
	s.block = s.block[n:]
	return unsafe.String(&p[0], n)
}
