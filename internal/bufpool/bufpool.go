package bufpool

import "sync"

// Pool recycles byte buffers through a sync.Pool, which lets go of what is
// not taken within two garbage collections. The zero value is ready; it
// is safe for concurrent use.
type Pool struct {
	// Max is the largest capacity Put keeps; 0 keeps any. A pool that
	// holds one huge buffer keeps it alive until it is taken again.
	Max int
	p   sync.Pool // of *[]byte
}

// Get returns an empty buffer with room for at least n bytes: a recycled
// one if the pool offers one that large, else a new one.
func (p *Pool) Get(n int) *[]byte {
	if b, ok := p.p.Get().(*[]byte); ok && cap(*b) >= n {
		return b
	}
	b := make([]byte, 0, n)
	return &b
}

// Put empties buf and keeps it for a later Get, unless it is larger than
// Max. The caller must not use buf, nor any slice of it, afterwards.
func (p *Pool) Put(buf *[]byte) {
	if p.Max > 0 && cap(*buf) > p.Max {
		return
	}
	*buf = (*buf)[:0]
	p.p.Put(buf)
}
