package dstl

// dedupTable maps the hash of a change's (key group, state, key) to the
// index of the latest change with that hash in a part: an open-addressing
// table with linear probing, denser and cheaper to clear than a Go map.
// A slot holds the upper 32 bits of the hash and index+1; 0 is empty.
type dedupTable struct {
	slots []uint64
	n     int // occupied slots
}

// upsert records idx as the latest change with hash h. For each earlier
// change whose hash has the same upper 32 bits it calls same(i); the first
// i for which same reports true is replaced by idx and returned. Otherwise
// idx is inserted and upsert returns -1. rehash(i) returns the hash of
// change i, for growing the table.
func (t *dedupTable) upsert(h uint64, idx int32, same func(i int32) bool, rehash func(i int32) uint64) int32 {
	if 4*(t.n+1) > 3*len(t.slots) {
		t.grow(rehash)
	}
	tag := h >> 32 << 32
	mask := uint64(len(t.slots) - 1)
	for pos := h & mask; ; pos = (pos + 1) & mask {
		s := t.slots[pos]
		if s == 0 {
			t.slots[pos] = tag | uint64(uint32(idx+1))
			t.n++
			return -1
		}
		if s&^(1<<32-1) == tag {
			if prev := int32(uint32(s)) - 1; same(prev) {
				t.slots[pos] = tag | uint64(uint32(idx+1))
				return prev
			}
		}
	}
}

// grow doubles the table (to at least 256 slots) and reinserts its
// entries.
func (t *dedupTable) grow(rehash func(i int32) uint64) {
	old := t.slots
	t.slots = make([]uint64, max(256, 2*len(old)))
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		h := rehash(int32(uint32(s)) - 1)
		pos := h & mask
		for t.slots[pos] != 0 {
			pos = (pos + 1) & mask
		}
		t.slots[pos] = s
	}
}

// reset empties the table, shrinking it if it was mostly unused.
func (t *dedupTable) reset() {
	if len(t.slots) > 1<<12 && 8*t.n < len(t.slots) {
		t.slots = make([]uint64, max(256, len(t.slots)/4))
	} else {
		clear(t.slots)
	}
	t.n = 0
}
