package state

import (
	"encoding/binary"
	"unsafe"
)

// keyMap is one key group's entries of a table, by serialized key. Keys of
// up to maxShortKey bytes are packed with their length into a uint64 and
// held in a map of their own: a lookup compares the key in the map's slot
// instead of reading its bytes elsewhere in memory (a cache miss per lookup
// of a cold key in a large map), and hashes 8 bytes. Integer keys are
// that short up to 2^42 (serde's tag and varint). Longer keys are held as
// strings whose bytes live in the key group's arena (keyArena).
//
// The zero keyMap is empty; its maps are made on the first insert.
type keyMap[E any] struct {
	short map[uint64]*E
	long  map[string]*E
}

// maxShortKey is the length of the longest key keyMap packs: 7 bytes and a
// length byte.
const maxShortKey = 7

// packKey returns key, at most maxShortKey bytes, as a uint64: its length
// in the low byte, its bytes above in order. Keys of different bytes or
// lengths pack differently.
func packKey(key []byte) uint64 {
	// Two loads that overlap for keys of 4 to 7 bytes, three of single
	// bytes (some the same) for shorter ones: no loop per byte.
	n := len(key)
	var v uint64
	switch {
	case n >= 4:
		lo := uint64(binary.LittleEndian.Uint32(key))
		hi := uint64(binary.LittleEndian.Uint32(key[n-4:]))
		v = lo | hi<<(8*(n-4))
	case n > 0:
		v = uint64(key[0]) | uint64(key[n/2])<<(8*(n/2)) | uint64(key[n-1])<<(8*(n-1))
	}
	return v<<8 | uint64(n)
}

// unpackKey returns the key packed into v, in buf.
func unpackKey(buf *[8]byte, v uint64) []byte {
	binary.LittleEndian.PutUint64(buf[:], v>>8)
	return buf[:v&0xff]
}

// get returns key's entry, or nil.
func (m *keyMap[E]) get(key []byte) *E {
	if len(key) <= maxShortKey {
		return m.short[packKey(key)]
	}
	return m.long[string(key)]
}

// lookup returns key's entry and whether key is in the map (a store-backed
// table holds keys known to be absent with an entry of their own).
func (m *keyMap[E]) lookup(key []byte) (*E, bool) {
	if len(key) <= maxShortKey {
		p, ok := m.short[packKey(key)]
		return p, ok
	}
	p, ok := m.long[string(key)]
	return p, ok
}

// insert adds key, not in the map, with entry p; a long key's bytes are
// copied into a.
func (m *keyMap[E]) insert(a *keyArena, key []byte, p *E) {
	if len(key) <= maxShortKey {
		if m.short == nil {
			m.short = map[uint64]*E{}
		}
		m.short[packKey(key)] = p
		return
	}
	if m.long == nil {
		m.long = map[string]*E{}
	}
	m.long[arenaString(a, key)] = p
}

// replace sets the entry of key, which is in the map, to p.
func (m *keyMap[E]) replace(key []byte, p *E) {
	if len(key) <= maxShortKey {
		m.short[packKey(key)] = p
		return
	}
	m.long[string(key)] = p
}

// remove deletes key, which is in the map. A long key's bytes are dead in
// a from now on; when they outweigh the live ones, the long keys move to
// a fresh arena.
func (m *keyMap[E]) remove(a *keyArena, key []byte) {
	if len(key) <= maxShortKey {
		delete(m.short, packKey(key))
		return
	}
	delete(m.long, string(key))
	if a.drop(len(key)) {
		m.long = compactKeys(a, m.long)
	}
}

// len returns the number of keys in the map.
func (m *keyMap[E]) len() int { return len(m.short) + len(m.long) }

// clear removes every key.
func (m *keyMap[E]) clear() {
	clear(m.short)
	clear(m.long)
}

// all iterates over the map's keys and entries, short keys first, each in
// Go's map order. The key slice is valid until the next iteration: a
// caller that keeps it copies it.
func (m keyMap[E]) all(yield func(key []byte, p *E) bool) {
	if m.allShort(yield) {
		m.allLong(yield)
	}
}

// allLongFirst is all with the long keys first: a scan that stops after a
// budget of keys (TTL cleanup) alternates between the two, or it might
// never reach the long keys.
func (m keyMap[E]) allLongFirst(yield func(key []byte, p *E) bool) {
	if m.allLong(yield) {
		m.allShort(yield)
	}
}

// allShort yields the short keys and reports whether it yielded them all.
func (m keyMap[E]) allShort(yield func(key []byte, p *E) bool) bool {
	var buf [8]byte
	for k, p := range m.short {
		if !yield(unpackKey(&buf, k), p) {
			return false
		}
	}
	return true
}

// allLong yields the long keys and reports whether it yielded them all.
func (m keyMap[E]) allLong(yield func(key []byte, p *E) bool) bool {
	for k, p := range m.long {
		if !yield(unsafeBytes(k), p) {
			return false
		}
	}
	return true
}

// unsafeBytes returns the bytes of s, which the caller must not modify.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
