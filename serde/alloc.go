package serde

import (
	"reflect"
	"sync/atomic"
	"unsafe"
)

// Decode allocates the targets of pointer fields (a *Status, an AnyValue
// behind a *AnyValue, a *string oneof member) in chunks rather than one at a
// time: a message with many small pointer targets, such as an OTLP span's
// attributes, otherwise spends most of its decode in the allocator. Chunks
// grow 1, 4, 16, then 64 elements per type, so a message with one pointer
// allocates exactly one target and unused room stays below three quarters
// of what a decode used. Targets in one chunk share its lifetime: a kept
// pointer keeps its chunk alive.

// chunkSlots is how many element types one decode batches at once; types
// that share a slot (by field, see nextChunkSlot) take turns and start their
// chunks anew.
const chunkSlots = 16

// maxChunk is the largest chunk, in elements.
const maxChunk = 64

// nextChunkSlot hands out slots to pointer fields as they are compiled.
var nextChunkSlot atomic.Uint32

// chunk is the part of a chunk of one element type not yet handed out.
type chunk struct {
	typ  reflect.Type
	base unsafe.Pointer // the chunk's first element
	i, n int            // the next element to hand out, and the chunk's length
	grow int            // the length of the next chunk
}

// newElem returns a zeroed target for the pointer field f.
func (d *decoder) newElem(f *field) unsafe.Pointer {
	c := &d.chunks[f.slot%chunkSlots]
	if c.typ == f.elemType && c.i < c.n {
		p := unsafe.Add(c.base, uintptr(c.i)*f.elemType.Size())
		c.i++
		return p
	}
	return d.refill(f, c)
}

// refill starts a new chunk for f in slot c and returns its first element.
func (d *decoder) refill(f *field, c *chunk) unsafe.Pointer {
	d.usedSlots |= 1 << (f.slot % chunkSlots)
	if c.typ != f.elemType {
		*c = chunk{typ: f.elemType, grow: 1}
	}
	n := c.grow
	c.grow = min(4*n, maxChunk)
	if n == 1 {
		c.base, c.i, c.n = nil, 0, 0
		return reflect.New(f.elemType).UnsafePointer()
	}
	p := reflect.MakeSlice(f.sliceType, n, n).UnsafePointer()
	c.base, c.i, c.n = p, 1, n
	return p
}

// dropChunks forgets the chunks of the decode that ends, so the pooled
// decoder keeps no memory of its value alive.
func (d *decoder) dropChunks() {
	for u := d.usedSlots; u != 0; u &= u - 1 {
		d.chunks[trailingZeros16(u)] = chunk{}
	}
	d.usedSlots = 0
}

func trailingZeros16(u uint16) int {
	n := 0
	for u&1 == 0 {
		u >>= 1
		n++
	}
	return n
}
