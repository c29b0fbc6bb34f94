package state

import "unsafe"

// Entries of a key group's map come from chunks ([]E) rather than one new(E)
// per key: with a million keys, an allocation per new key was, with the key
// string, most of the allocation and GC marking work of a keyed count, which a
// Go map of values does not do. The map keeps *E, so a lookup costs what it
// did (storing chunk indices instead, one more indirection per access, took
// the 1M-key count from 0.95x of the map loop to 0.70x).
//
// A chunk stays alive while any of its entries is in the map, so deleted
// entries are zeroed and reused before the chunk is extended: the entries
// held never exceed the key group's largest number of keys plus one chunk.

const (
	minChunk = 8   // entries of a key group's first chunk
	maxChunk = 256 // chunks double up to this size
)

// groupMem is where the keys and entries of one key group's map live. Each
// key group has its own, so changes of different key groups can be replayed
// concurrently.
type groupMem[E any] struct {
	entries entrySlab[E]
	keys    keyArena
}

// entrySlab hands out the entries of one key group.
type entrySlab[E any] struct {
	chunk []E  // the unused rest of the current chunk
	free  []*E // zeroed entries of deleted keys, reused first
	next  int  // the size of the next chunk
	// A store-backed table's slab hands out the entries of marked slots
	// (markOf) instead, from mchunk.
	marked bool
	mchunk []markedEntry[E]
}

// markedEntry is an entry with a mark of the table's own: the place of a
// store-backed table's entry in its dirty list, plus one (0: clean).
type markedEntry[E any] struct {
	e    E
	mark uint32
}

// markOf returns the mark of p, which a marked slab handed out.
func markOf[E any](p *E) *uint32 {
	var m markedEntry[E]
	return (*uint32)(unsafe.Add(unsafe.Pointer(p), unsafe.Offsetof(m.mark)))
}

// alloc returns a zero entry (of mark 0, in a marked slab).
func (s *entrySlab[E]) alloc() *E {
	if n := len(s.free); n > 0 {
		p := s.free[n-1]
		s.free = s.free[:n-1]
		return p
	}
	if s.marked {
		if len(s.mchunk) == 0 {
			s.next = min(max(2*s.next, minChunk), maxChunk)
			s.mchunk = make([]markedEntry[E], s.next)
		}
		p := &s.mchunk[0].e
		s.mchunk = s.mchunk[1:]
		return p
	}
	if len(s.chunk) == 0 {
		s.next = min(max(2*s.next, minChunk), maxChunk)
		s.chunk = make([]E, s.next)
	}
	p := &s.chunk[0]
	s.chunk = s.chunk[1:]
	return p
}

// release zeroes p, an entry of this slab no longer in the map, for reuse.
// Zeroing drops what the entry refers to (a list's slice, a map) and makes
// the reused entry look new to getOrCreate's callers.
func (s *entrySlab[E]) release(p *E) {
	var zero E
	*p = zero
	s.free = append(s.free, p)
}

// Keys are copied into blocks of bytes for the same reason: one string
// allocation per new key is the other half of that work. A block stays alive
// while any key in it is in the map, so deleting keys can pin dead bytes; a
// key group whose dead key bytes outgrow its live ones (and minCompact) gets
// its keys copied into fresh blocks and its map rebuilt, which bounds what a
// key group holds to about twice its live key bytes plus minCompact and one
// block.

const (
	minKeyBlock = 256      // bytes of a key group's first key block
	maxKeyBlock = 32 << 10 // blocks double up to this size
	maxArenaKey = 1 << 10  // longer keys are allocated on their own
	minCompact  = 16 << 10 // dead key bytes a key group may hold regardless
)

// keyArena holds the long keys (keyMap) of one key group.
type keyArena struct {
	block []byte // the unused rest of the current block
	next  int    // the size of the next block
	live  int    // bytes of arena keys in the map
	dead  int    // bytes of arena keys deleted from the map since the last compaction
}

// arenaString returns a copy of key whose bytes live in a.
func arenaString[K string | []byte](a *keyArena, key K) string {
	if len(key) == 0 || len(key) > maxArenaKey {
		return string(key)
	}
	if len(key) > len(a.block) {
		a.next = min(max(2*a.next, minKeyBlock), maxKeyBlock)
		a.block = make([]byte, a.next)
	}
	n := copy(a.block, key)
	s := unsafe.String(&a.block[0], n)
	a.block = a.block[n:]
	a.live += n
	return s
}

// drop accounts for a key of n bytes deleted from the map and reports
// whether the arena now holds enough dead bytes to be compacted.
func (a *keyArena) drop(n int) bool {
	if n == 0 || n > maxArenaKey {
		return false
	}
	a.live -= n
	a.dead += n
	return a.dead > a.live && a.dead >= minCompact
}

// compactKeys returns a copy of m whose keys are in a fresh arena, which
// replaces a. The old blocks are then garbage, with their dead keys.
func compactKeys[E any](a *keyArena, m map[string]*E) map[string]*E {
	*a = keyArena{}
	fresh := make(map[string]*E, len(m))
	for k, p := range m {
		fresh[arenaString(a, k)] = p
	}
	return fresh
}
