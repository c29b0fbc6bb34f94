package bufpool

import "testing"

// TestPool: Get gives an empty buffer with the room asked for, reusing a
// returned one large enough (sync.Pool may drop it, so reuse is only
// checked when it happens to be offered) and never one larger than Max.
func TestPool(t *testing.T) {
	p := &Pool{Max: 1 << 10}
	b := p.Get(100)
	if len(*b) != 0 || cap(*b) < 100 {
		t.Fatalf("Get(100) = len %d cap %d", len(*b), cap(*b))
	}
	*b = append(*b, "dirty"...)
	p.Put(b)
	c := p.Get(50)
	if len(*c) != 0 || cap(*c) < 50 {
		t.Fatalf("Get(50) after a Put = len %d cap %d", len(*c), cap(*c))
	}
	big := make([]byte, 0, 4<<10)
	p.Put(&big)
	for range 10 {
		if d := p.Get(0); cap(*d) > p.Max {
			t.Fatalf("Get returned a buffer of cap %d, over Max %d", cap(*d), p.Max)
		}
	}
	if d := p.Get(2 << 10); cap(*d) < 2<<10 {
		t.Fatalf("Get(2 KiB) = cap %d", cap(*d))
	}
}
