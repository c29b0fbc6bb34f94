package state

import "unsafe"

// The key directory lets an operator's states share one lookup per key.
// Each state of the heap backend keeps its own map per key group (its
// snapshots, restores, TTL and iteration walk it), and the first
// dirWidth states declared on a backend also record their entries in one
// directory per key group: serialized key → the key's slot, which points
// to the key's entries of all of them. A record's first state access looks
// the key up there once; every other state of the operator then finds its
// entry in that slot, where it would have paid a cold lookup of its own map
// (a join or a window operator reads two to four states per record: its
// own and the key's timer list). Slots stay where they are while their key
// has entries, so a state that creates or removes the entry of a key with
// others writes the slot, not the directory.

// dirWidth is how many states of a backend share its key directory; those
// declared later look their entries up in their own maps only.
const dirWidth = 6

// keySlot is one key's entries in the directory: entry i belongs to the
// state of directory index i (nil: the state holds no entry for the key).
type keySlot struct {
	key string
	e   [dirWidth]unsafe.Pointer
}

// used reports whether any state holds an entry for the slot's key.
func (s *keySlot) used() bool {
	for _, p := range s.e {
		if p != nil {
			return true
		}
	}
	return false
}

// keyDir is the directory of one key group. Key groups have their own, so
// changes of different key groups can be replayed concurrently.
type keyDir struct {
	m     map[string]*keySlot
	slots entrySlab[keySlot]
	keys  keyArena
}

// set sets entry i of key's slot s (nil if the directory has none) to p,
// nil to remove it, and returns the key's slot afterwards (nil if it has
// none left; s is then released).
func (d *keyDir) set(s *keySlot, key []byte, i int, p unsafe.Pointer) *keySlot {
	if s == nil {
		if p == nil {
			return nil
		}
		if d.m == nil {
			d.m = map[string]*keySlot{}
		}
		s = d.slots.alloc()
		s.key = arenaString(&d.keys, key)
		d.m[s.key] = s
	}
	s.e[i] = p
	if p != nil || s.used() {
		return s
	}
	delete(d.m, s.key)
	n := len(s.key)
	d.slots.release(s)
	if d.keys.drop(n) {
		d.compact()
	}
	return nil
}

// compact copies the directory's keys into a fresh arena (see compactKeys).
func (d *keyDir) compact() {
	d.keys = keyArena{}
	fresh := make(map[string]*keySlot, len(d.m))
	for k, s := range d.m {
		s.key = arenaString(&d.keys, k)
		fresh[s.key] = s
	}
	d.m = fresh
}

// dirIndex returns the directory index of the next state a backend
// declares, or -1 if it has none (a store-backed backend caches entries in
// the states' maps, evicting them on its own schedule; and the directory
// is full).
func (b *Backend) dirIndex() int {
	i := b.ntables
	b.ntables++
	if b.store != nil || i >= dirWidth {
		return -1
	}
	return i
}

// slot returns the current key's slot (nil: no state in the directory
// holds an entry for it), looked up once per key.
func (b *Backend) slot() *keySlot {
	if b.slotGen != b.gen {
		b.cur = b.dir[b.group()].m[string(b.key)]
		b.slotGen = b.gen
	}
	return b.cur
}

// setCurrent sets entry i of the current key to p (nil: removed).
func (b *Backend) setCurrent(i int, p unsafe.Pointer) {
	b.cur = b.dir[b.group()].set(b.slot(), b.key, i, p)
}

// setAt sets entry i of key in key group index g to p (nil: removed), for
// restores and replays, which name the key: they may run concurrently for
// different key groups, and write the current key's cached slot only if
// they release it.
func (b *Backend) setAt(g int, key []byte, i int, p unsafe.Pointer) {
	d := &b.dir[g]
	s := d.m[string(key)]
	if d.set(s, key, i, p) == nil && s != nil && b.cur == s {
		b.cur, b.slotGen = nil, 0
	}
}
