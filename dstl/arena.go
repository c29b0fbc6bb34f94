package dstl

import "sync"

// Changes are buffered in fixed-size chunks and entry blocks that the log
// recycles, so that appending never copies a growing buffer and, in steady
// state, never allocates.
const (
	chunkSize  = 64 << 10 // bytes per chunk of encoded changes
	entryShift = 10
	entryBlock = 1 << entryShift // entries per block
	entryMask  = entryBlock - 1
	maxFree    = 32 << 20 // bytes of chunks and blocks kept for reuse, each
)

// entry locates one change in a part.
type entry struct {
	seq        uint64
	chunk      uint32 // index of the chunk holding the change's bytes
	off, end   uint32 // the change's bytes in the chunk (after its sequence delta)
	keyOff     uint32 // its key in the chunk
	keyLen     uint32
	subOff     uint32 // its sub key in the chunk (element operations)
	subLen     uint32
	kg, state  uint32
	class      uint8 // what it replaces (dedupClass)
	superseded bool  // a later change of the part replaces it
}

// part is one writer's share of a batch: its changes, pre-encoded.
type part struct {
	owner   *Writer
	chunks  [][]byte
	blocks  []*[entryBlock]entry
	n       int    // entries
	first   uint64 // sequence numbers of the first and last change
	last    uint64
	dropped int // entries superseded within the part
	kept    int // bytes of the entries not superseded
	size    int // bytes in chunks
}

// entry returns the i-th entry.
func (p *part) entry(i int32) *entry { return &p.blocks[i>>entryShift][i&entryMask] }

// arena recycles chunks, entry blocks and object buffers. It is safe for
// concurrent use.
type arena struct {
	mu      sync.Mutex
	chunks  [][]byte
	blocks  []*[entryBlock]entry
	objects [][]byte // object buffers, at most maxObjects
}

const maxObjects = 8

// chunk returns an empty chunk with room for need bytes.
func (a *arena) chunk(need int) []byte {
	if need > chunkSize {
		return make([]byte, 0, need)
	}
	a.mu.Lock()
	if n := len(a.chunks); n > 0 {
		c := a.chunks[n-1]
		a.chunks = a.chunks[:n-1]
		a.mu.Unlock()
		return c
	}
	a.mu.Unlock()
	return make([]byte, 0, chunkSize)
}

// block returns an entry block.
func (a *arena) block() *[entryBlock]entry {
	a.mu.Lock()
	if n := len(a.blocks); n > 0 {
		b := a.blocks[n-1]
		a.blocks = a.blocks[:n-1]
		a.mu.Unlock()
		return b
	}
	a.mu.Unlock()
	return new([entryBlock]entry)
}

// release takes back p's chunks and blocks and empties p.
func (a *arena) release(p *part) {
	a.mu.Lock()
	for i, c := range p.chunks {
		if cap(c) == chunkSize && len(a.chunks) < maxFree/chunkSize {
			a.chunks = append(a.chunks, c[:0])
		}
		p.chunks[i] = nil
	}
	for i, b := range p.blocks {
		if len(a.blocks) < maxFree/(entryBlock*48) {
			a.blocks = append(a.blocks, b)
		}
		p.blocks[i] = nil
	}
	a.mu.Unlock()
	p.chunks, p.blocks = p.chunks[:0], p.blocks[:0]
	p.n, p.first, p.last, p.dropped, p.kept, p.size = 0, 0, 0, 0, 0, 0
}

// object returns a buffer of length headerSize and capacity at least n.
func (a *arena) object(n int) []byte {
	a.mu.Lock()
	for i, b := range a.objects {
		if cap(b) >= n {
			last := len(a.objects) - 1
			a.objects[i] = a.objects[last]
			a.objects[last] = nil
			a.objects = a.objects[:last]
			a.mu.Unlock()
			return b[:headerSize]
		}
	}
	a.mu.Unlock()
	return make([]byte, headerSize, n)
}

// putObject takes back an object buffer no one uses any more, replacing
// the smallest kept one if all slots are taken.
func (a *arena) putObject(b []byte) {
	if cap(b) > maxFree {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.objects) < maxObjects {
		a.objects = append(a.objects, b)
		return
	}
	small := 0
	for i, o := range a.objects {
		if cap(o) < cap(a.objects[small]) {
			small = i
		}
	}
	if cap(a.objects[small]) < cap(b) {
		a.objects[small] = b
	}
}
