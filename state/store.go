package state

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/eddyflow/eddy/serde"
)

// Store is byte-level storage of a Backend's keyed state, for state larger
// than memory: package state/pebble implements it on an LSM tree. A Backend
// built with NewStoreBackend keeps the same user-facing state types (Value,
// Reducing, List, Map); it holds the decoded values of recently used keys in
// its heap tables, which then act as a cache, and writes through to the Store.
//
// A record is addressed by key group, state id (StateID), serialized key
// and sub-key. The sub-key is empty for a key's whole value; a Map's
// entries are stored one record each under the byte 0x01 and their
// serialized map key, and a List's elements added since its last
// whole-value write under 0x01 and their index (an unsigned varint): the
// tag keeps an element whose key serializes to no bytes (a map key 0 or
// "") apart from the whole value. Values are serde bytes.
//
// Writes go to a pending batch that Commit applies; Load and Scan read what
// was committed. A Store belongs to the goroutine of its Backend.
type Store interface {
	// Load calls fn with the committed records of key in state of key
	// group kg: for a state without elements (elems false) its one
	// whole value (sub empty); otherwise the key's whole value, if it has
	// one, first, then its element records. fn does not keep the slices.
	// A key without records calls fn never.
	Load(kg int, state uint32, key []byte, elems bool, fn func(sub, val []byte) error) error
	// Set writes one record.
	Set(kg int, state uint32, key, sub, val []byte) error
	// Delete removes one record.
	Delete(kg int, state uint32, key, sub []byte) error
	// DeleteKey removes the key's whole value and, when elems is set,
	// every element record of it.
	DeleteKey(kg int, state uint32, key []byte, elems bool) error
	// Commit applies the pending writes.
	Commit() error
	// Scan calls fn with every committed record of state in key group kg,
	// the records of one key together, its whole value first.
	Scan(kg int, state uint32, fn func(key, sub, val []byte) error) error
}

// SortedStore is a Store that also takes many whole values of one state
// at once, in the store's key order, for less than a Set each: Flush gives
// it the dirty values of a state without elements when there are at least
// minSortedSet of them.
type SortedStore interface {
	Store
	// SetSorted commits the pending writes, then stores the whole values
	// of state that fill passes to set, in increasing order of key group,
	// uvarint(len key) and key, each key once; set does not keep the
	// slices.
	SetSorted(state uint32, fill func(set func(kg int, key, val []byte) error) error) error
}

// minSortedSet is the fewest dirty values Flush hands a SortedStore at once:
// below it a batch of Sets costs less than a table file.
const minSortedSet = 4096

// DefaultCacheBytes is the memory, in bytes, a store-backed Backend keeps
// decoded values in unless SetCacheBytes sets it.
const DefaultCacheBytes = 16 << 20

// cachedKeyOverhead estimates the memory of a decoded key beyond its key's
// and its value's bytes and its slab slot: its map slot (string header,
// pointer) and the map's free slots (a million Value[int64] keys of 14
// bytes took 60 bytes each with the slot, against 64 estimated).
const cachedKeyOverhead = 32

// NewStoreBackend returns a Backend for the key groups [kgStart, kgEnd) of
// maxParallelism whose state lives in store rather than in the heap. It has
// the API of a heap backend; in addition the runtime must call EndBatch
// after each batch of records, and Flush before it takes a checkpoint of
// the store and after a restore or a replay of logged changes.
func NewStoreBackend(maxParallelism, kgStart, kgEnd int, keySchema serde.Schema, store Store) *Backend {
	b := NewBackend(maxParallelism, kgStart, kgEnd, keySchema)
	b.store = store
	b.cacheBytes = DefaultCacheBytes
	return b
}

// SetCacheBytes sets how much memory, in bytes, a store-backed backend
// keeps decoded values in across batches of records (an estimate: the
// keys, the values' encodings and the maps' overhead). The values a batch
// writes stay in the cache until Flush or until their key group is
// evicted (write-back), so a key used again is neither read from the store
// nor written to it per batch; 0 writes and drops every value at each
// EndBatch.
func (b *Backend) SetCacheBytes(n int64) { b.cacheBytes = max(n, 0) }

// StoreBacked reports whether the backend's state lives in a Store.
func (b *Backend) StoreBacked() bool { return b.store != nil }

// EndBatch ends a batch of records of a store-backed backend: it commits
// the batch's element and delete records to the store, and when the
// decoded values take more than the cache's bytes, it writes back every
// value written since the last Flush and evicts key groups of decoded
// values until they fit (Flush). It returns the backend's first failure,
// if any: a failed read or write of the store, or of the change log. A
// heap backend has nothing to end and returns Err().
func (b *Backend) EndBatch() error {
	if b.store == nil || b.err != nil {
		return b.err
	}
	if b.cacheUsed() > b.cacheBytes {
		return b.Flush()
	}
	if err := b.store.Commit(); err != nil {
		b.fail(&StoreError{Op: "commit", Err: err})
		return b.err
	}
	b.stale = false
	return nil
}

// Flush writes every value written since the last Flush to the store and
// commits, so that the store holds all of the state; then it evicts key
// groups of decoded values until they fit the cache. It returns the
// backend's first failure, as EndBatch does. A heap backend has nothing to
// flush and returns Err().
func (b *Backend) Flush() error {
	if b.store == nil {
		return b.err
	}
	if b.err != nil {
		return b.err
	}
	b.gen++
	for _, s := range b.states {
		if err := s.flush(); err != nil {
			b.fail(err)
			return b.err
		}
	}
	if err := b.store.Commit(); err != nil {
		b.fail(&StoreError{Op: "commit", Err: err})
		return b.err
	}
	b.stale = false
	b.trimCache()
	return nil
}

// cacheUsed estimates the bytes of the decoded values of every state.
func (b *Backend) cacheUsed() int64 {
	var n int64
	for _, s := range b.states {
		n += s.cacheBytes()
	}
	return n
}

// trimCache evicts key groups of decoded values, the next in turn of the
// state holding the most, until they take at most 7/8 of the cache's bytes,
// which leaves room for the next batches' new keys before another eviction.
// Nothing is dirty: Flush wrote it.
func (b *Backend) trimCache() {
	target := b.cacheBytes - b.cacheBytes/8
	sizes := make([]int64, len(b.states))
	var used int64
	for i, s := range b.states {
		sizes[i] = s.cacheBytes()
		used += sizes[i]
	}
	for used > target {
		i := 0
		for j := range sizes {
			if sizes[j] > sizes[i] {
				i = j
			}
		}
		freed := b.states[i].evictNext()
		if freed == 0 {
			freed = sizes[i] // no key left: what remains is an estimate's rest
		}
		sizes[i] -= freed
		used -= freed
	}
}

// flushAndEvict is Flush dropping every decoded key, so that the store
// holds all of the state and the tables are empty: the start of a walk
// over the store, which loads key groups into the tables one at a time.
func (b *Backend) flushAndEvict() error {
	if err := b.Flush(); err != nil {
		return err
	}
	for _, s := range b.states {
		s.evict()
	}
	return nil
}

// StoreError reports a failed read or write of a Backend's Store. The job
// fails: its state can no longer be trusted, and it restores from its last
// checkpoint.
type StoreError struct {
	Op    string // what failed: "load", "write", "commit", "scan"
	State string // the state's name, if one
	Err   error
}

func (e *StoreError) Error() string {
	if e.State == "" {
		return fmt.Sprintf("state: store %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("state: store %s of state %q: %v", e.Op, e.State, e.Err)
}

// Unwrap returns the cause.
func (e *StoreError) Unwrap() error { return e.Err }

// errStoreGroupSnapshot is what a GroupSnapshot of a store-backed backend
// returns: its store's own checkpoint is the materialization.
var errStoreGroupSnapshot = errors.New("state: a store-backed backend is materialized by a checkpoint of its store, not by a GroupSnapshot")

// record sends an element change of the current key to the change log and
// the store, whichever the backend has.
func (b *Backend) record(id uint32, elems bool, op ChangeOp, sub, value []byte) {
	if b.changes != nil {
		b.logChange(id, op, sub, value)
	}
	if b.store != nil {
		b.storeChange(b.kg, id, elems, op, b.key, sub, value)
	}
}

// storeChange writes an element change or a whole-key delete to the store.
func (b *Backend) storeChange(kg int, id uint32, elems bool, op ChangeOp, key, sub, value []byte) {
	var err error
	switch op {
	case ChangePutElem:
		err = b.store.Set(kg, id, key, b.elemSub(sub), value)
	case ChangeDeleteElem:
		err = b.store.Delete(kg, id, key, b.elemSub(sub))
	case ChangeDelete:
		err = b.store.DeleteKey(kg, id, key, elems)
	default:
		err = fmt.Errorf("operation %d is not an element change", op)
	}
	if err != nil {
		b.fail(&StoreError{Op: "write", Err: err})
	}
}

// dirtyKey is where a decoded entry written since the last Flush is to be
// stored: its key is dirtyKeys[off:off+n] of the table, a buffer reused by
// every Flush so that marking a key dirty allocates nothing.
type dirtyKey struct {
	off   int
	kg, n int32
}

// dirtyEntry is a dirty entry (nil: cleared since it was written) and
// where it is to be stored.
type dirtyEntry[E any] struct {
	p *E
	dirtyKey
}

// storeGet is get for a store-backed table: the cached entry, or the
// key's records loaded from the store into the cache. A key known to be
// absent is cached as t.absent.
func (t *table[E]) storeGet() *E {
	p, ok := t.groups[t.b.group()].lookup(t.b.key)
	if !ok {
		p = t.storeLoad(t.b.kg, t.b.key)
	}
	if p == t.absent {
		p = nil
	}
	t.cgen, t.cp = t.b.gen, p
	return p
}

// storeLoad loads key of key group kg from the store into the cache, which
// does not hold it, and returns its entry or t.absent.
func (t *table[E]) storeLoad(kg int, key []byte) *E {
	b := t.b
	if b.stale {
		// A restore or a replay wrote to the store without a Flush:
		// commit before reading.
		if err := b.store.Commit(); err != nil {
			b.fail(&StoreError{Op: "commit", Err: err})
		}
		b.stale = false
	}
	// A closure over kg and key would be allocated per load: the key
	// goes through the table, and the method value is made once.
	t.loadKG, t.loadKey, t.loadBytes = kg, key, 0
	if t.loadFn == nil {
		t.loadFn = t.applyLoaded
	}
	err := b.store.Load(kg, t.id, key, t.elems, t.loadFn)
	t.loadKey = nil
	if t.loadBytes > 0 {
		// A key the store does not hold says nothing of the values'
		// size: a run of new keys would pull the average to the keys'.
		t.noteSize(len(key) + t.loadBytes)
	}
	if err != nil {
		b.fail(&StoreError{Op: "load", State: t.name, Err: err})
	}
	g := kg - b.kgStart
	m := &t.groups[g]
	p := m.get(key)
	if p == nil {
		p = t.absent
		m.insert(&t.mem[g].keys, key, p)
	}
	t.cached++
	return p
}

// storeCreate is lookupOrCreate for a store-backed table.
func (t *table[E]) storeCreate() *E {
	if p := t.get(); p != nil {
		return p
	}
	g := t.b.group()
	mem := &t.mem[g]
	p := mem.entries.alloc()
	// The key is in the map (as absent): the arena copy only saves the
	// allocation of a string for the assignment.
	t.groups[g].insert(&mem.keys, t.b.key, p)
	t.cgen, t.cp = t.b.gen, p
	return p
}

// storeClear is clear for a store-backed table.
func (t *table[E]) storeClear() {
	b := t.b
	g := b.group()
	m := &t.groups[g]
	if p, ok := m.lookup(b.key); ok {
		if p != t.absent {
			t.undirty(p)
			t.mem[g].entries.release(p)
			m.replace(b.key, t.absent)
		}
	} else {
		m.insert(&t.mem[g].keys, b.key, t.absent)
		t.cached++
	}
	t.cgen, t.cp = b.gen, nil
	b.record(t.id, t.elems, ChangeDelete, nil, nil)
}

// markDirty notes that p, the current key's entry, is to be written to the
// store at the next Flush, and samples its size for the running average.
// The entry's mark (its slot in the slab) says whether it is in the dirty
// list already, which a map from entries would say at the cost of a random
// memory access per write.
func (t *table[E]) markDirty(p *E) {
	m := markOf(p)
	if *m != 0 {
		return
	}
	t.dirty = append(t.dirty, dirtyEntry[E]{p, dirtyKey{off: len(t.dirtyKeys), kg: int32(t.b.kg), n: int32(len(t.b.key))}})
	*m = uint32(len(t.dirty))
	t.dirtyKeys = append(t.dirtyKeys, t.b.key...)
	// New keys' values are sized as they are written, not only at the
	// next Flush: a cache filling with new keys of large values would
	// otherwise grow far past its bytes on a stale average. One in 16 is
	// enough for the average and costs a sixteenth.
	if len(t.dirty)&15 == 1 {
		t.noteSize(len(t.b.key) + t.codec.Size(p))
	}
}

// undirty takes p out of the dirty list, if it is there: its key was
// cleared, and the entry is about to be released for reuse.
func (t *table[E]) undirty(p *E) {
	m := markOf(p)
	if *m != 0 {
		t.dirty[*m-1].p = nil
		*m = 0
	}
}

// flush writes the entries written since the last Flush to the store, in
// the store's key order (key group, uvarint(len key), key): a SortedStore
// takes many of them at once, and Pebble sorts a large batch before it
// flushes it, which costs far less on sorted input. A whole value replaces
// the key's element records, if the state has elements.
func (t *table[E]) flush() error {
	if len(t.dirty) == 0 {
		return nil
	}
	keys := t.dirtyKeys
	// each calls fn with the dirty entries in key order, clean again.
	each := func(fn func(e *dirtyEntry[E]) error) error {
		for _, k := range t.sortDirty() {
			e := &t.dirty[k.i]
			if e.p == nil {
				continue // cleared since
			}
			*markOf(e.p) = 0
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if ss, ok := t.b.store.(SortedStore); ok && !t.elems && t.split == nil && len(t.dirty) >= minSortedSet {
		err = ss.SetSorted(t.id, func(set func(kg int, key, val []byte) error) error {
			return each(func(e *dirtyEntry[E]) error {
				var err error
				if t.b.scratch, err = t.codec.Append(t.b.scratch[:0], e.p); err != nil {
					return err
				}
				key := keys[e.off : e.off+int(e.n)]
				t.noteSize(len(key) + len(t.b.scratch))
				return set(int(e.kg), key, t.b.scratch)
			})
		})
	} else {
		err = each(func(e *dirtyEntry[E]) error {
			return t.putWhole(int(e.kg), keys[e.off:e.off+int(e.n)], e.p, true)
		})
	}
	if err != nil {
		return &StoreError{Op: "write", State: t.name, Err: err}
	}
	clear(t.dirty)
	t.dirty = t.dirty[:0]
	t.dirtyKeys = t.dirtyKeys[:0]
	return nil
}

// dirtySortKey is a dirty entry's key for sorting: its length prefix and
// its first 16 bytes (big-endian, zero-padded) inline, so that most
// comparisons touch neither the dirty list nor the keys.
type dirtySortKey struct {
	hi, lo uint64
	ln     uint64 // uvarint(len key) left-aligned: sorts as the store's length prefix
	n, i   int32  // the key's length and the entry's index in the dirty list
}

// sortDirty returns the dirty list's entries in the store's key order (key
// group, uvarint(len key), key): a counting sort by key group that reads
// the dirty list and its keys in order (sequentially) and writes their
// sort keys, then each key group's sort keys sorted on their own, a small
// set that stays in the processor's caches. The result is not kept after
// the Flush (32 bytes per dirty entry).
func (t *table[E]) sortDirty() []dirtySortKey {
	b := t.b
	counts := t.groupCounts[:0]
	for range b.kgEnd - b.kgStart + 1 {
		counts = append(counts, 0)
	}
	t.groupCounts = counts
	for _, e := range t.dirty {
		counts[int(e.kg)-b.kgStart+1]++
	}
	for g := 1; g < len(counts); g++ {
		counts[g] += counts[g-1]
	}
	keys, dirty := t.dirtyKeys, t.dirty
	sk := make([]dirtySortKey, len(dirty))
	var ln [binary.MaxVarintLen64]byte
	for i := range dirty {
		e := &dirty[i]
		g := int(e.kg) - b.kgStart
		k := keys[e.off : e.off+int(e.n)]
		sk[counts[g]] = dirtySortKey{hi: bigEndianAt(k, 0), lo: bigEndianAt(k, 8),
			ln: bigEndianAt(binary.AppendUvarint(ln[:0], uint64(e.n)), 0), n: e.n, i: int32(i)}
		counts[g]++
	}
	from := 0
	for _, to := range counts[:len(counts)-1] {
		slices.SortFunc(sk[from:to], func(a, b dirtySortKey) int {
			if a.ln != b.ln {
				return cmp.Compare(a.ln, b.ln)
			}
			if a.hi != b.hi {
				return cmp.Compare(a.hi, b.hi)
			}
			if a.lo != b.lo || a.n <= 16 {
				return cmp.Compare(a.lo, b.lo)
			}
			ea, eb := &dirty[a.i], &dirty[b.i]
			return bytes.Compare(keys[ea.off+16:ea.off+int(ea.n)], keys[eb.off+16:eb.off+int(eb.n)])
		})
		from = to
	}
	return sk
}

// bigEndianAt returns the 8 bytes of k from off as a big-endian number,
// the bytes past k's end taken as zeros.
func bigEndianAt(k []byte, off int) uint64 {
	if len(k) >= off+8 {
		return binary.BigEndian.Uint64(k[off:])
	}
	var v uint64
	for j := off; j < off+8; j++ {
		v <<= 8
		if j < len(k) {
			v |= uint64(k[j])
		}
	}
	return v
}

// putWhole stores entry e as key's whole value; with replace, it first
// removes the key's element records, if the state has elements (a restore
// into an empty store need not).
func (t *table[E]) putWhole(kg int, key []byte, e *E, replace bool) error {
	b := t.b
	if replace && t.elems {
		if err := b.store.DeleteKey(kg, t.id, key, true); err != nil {
			return err
		}
	}
	if t.split != nil {
		return t.split(kg, key, e)
	}
	var err error
	if b.scratch, err = t.codec.Append(b.scratch[:0], e); err != nil {
		return err
	}
	t.noteSize(len(key) + len(b.scratch))
	return b.store.Set(kg, t.id, key, nil, b.scratch)
}

// noteSize adds the bytes of a key and its value's encoding, as loaded or
// stored, to the running average that estimates a cached key's memory.
func (t *table[E]) noteSize(n int) { t.size16 += n - t.size16>>4 }

// keyCost estimates the memory of one decoded key of the table.
func (t *table[E]) keyCost() int64 {
	var e markedEntry[E]
	return cachedKeyOverhead + int64(unsafe.Sizeof(e)) + int64(t.size16>>4)
}

// cacheBytes estimates the memory of the table's decoded keys.
func (t *table[E]) cacheBytes() int64 {
	// The dirty list and its buffers keep their capacity for the next
	// Flush: they count as long as they are held.
	var d dirtyEntry[E]
	return int64(t.cached)*t.keyCost() + int64(cap(t.dirty))*int64(unsafe.Sizeof(d)) + int64(cap(t.dirtyKeys))
}

// evictNext drops the decoded keys of the next key group in turn that has
// any, none of them dirty, and returns the memory they took (0 if no group
// has any).
func (t *table[E]) evictNext() int64 {
	for range len(t.groups) {
		g := t.evictAt % len(t.groups)
		t.evictAt++
		if n := t.groups[g].len(); n > 0 {
			t.evictGroup(g)
			t.b.gen++
			return int64(n) * t.keyCost()
		}
	}
	return 0
}

// evict drops every decoded entry of the table.
func (t *table[E]) evict() {
	for g := range t.groups {
		t.evictGroup(g)
	}
	t.b.gen++
}

// evictGroup drops the decoded entries of key group index g. (A walk over
// the store loads key groups uncounted into an emptied cache, and evicts
// them after: the count stays at least 0.)
func (t *table[E]) evictGroup(g int) {
	m := &t.groups[g]
	t.cached = max(t.cached-m.len(), 0)
	mem := &t.mem[g]
	for _, p := range m.all {
		if p != t.absent {
			mem.entries.release(p)
		}
	}
	m.clear()
	mem.keys = keyArena{}
}

// elemTag starts the sub-key of every element record in the store: an
// element whose own key serializes to no bytes (a Map key 0, "" or false)
// is then never taken for the key's whole value, whose sub-key is empty.
const elemTag = 0x01

// elemSub returns the store's sub-key of the element whose key is sub, in
// a scratch buffer of the backend valid until the next call.
func (b *Backend) elemSub(sub []byte) []byte {
	b.elemScratch = append(append(b.elemScratch[:0], elemTag), sub...)
	return b.elemScratch
}

// applyRecord puts one record of key loaded from the store into the cache:
// a whole value (sub empty) or an element (sub is elemTag and its key).
func (t *table[E]) applyRecord(kg int, key, sub, val []byte) error {
	if len(sub) == 0 {
		return t.self.apply(kg, ChangePut, key, nil, val)
	}
	if sub[0] != elemTag {
		return fmt.Errorf("key %x: element record with sub-key %x, which does not start with %#x", key, sub, elemTag)
	}
	return t.self.apply(kg, ChangePutElem, key, sub[1:], val)
}

// applyLoaded is applyRecord for the key storeLoad loads.
func (t *table[E]) applyLoaded(sub, val []byte) error {
	t.loadBytes += len(val)
	return t.applyRecord(t.loadKG, t.loadKey, sub, val)
}

// loadGroup loads every key of key group kg from the store into the
// table's map of it, which must be empty.
func (t *table[E]) loadGroup(kg int) error {
	err := t.b.store.Scan(kg, t.id, func(key, sub, val []byte) error {
		return t.applyRecord(kg, key, sub, val)
	})
	if err != nil {
		return &StoreError{Op: "scan", State: t.name, Err: fmt.Errorf("key group %d: %w", kg, err)}
	}
	return nil
}

// storeApply replays one logged change into the store. A whole value is
// decoded first, so that a damaged one fails the replay as it does on the
// heap, and is stored as putWhole stores it.
func (t *table[E]) storeApply(kg int, op ChangeOp, key, sub, val []byte) error {
	b := t.b
	b.stale = true
	if op != ChangePut {
		b.storeChange(kg, t.id, t.elems, op, key, sub, val)
		return b.err
	}
	return t.storeLoadValue(kg, key, val, true)
}

// storeLoadValue decodes the whole value val of key and stores it,
// replacing the key's records if replace is set.
func (t *table[E]) storeLoadValue(kg int, key, val []byte, replace bool) error {
	b := t.b
	b.stale = true
	mem := &t.mem[kg-b.kgStart]
	e := mem.entries.alloc()
	defer mem.entries.release(e)
	if err := t.codec.Decode(val, e); err != nil {
		return err
	}
	if err := t.putWhole(kg, key, e, replace); err != nil {
		return &StoreError{Op: "write", State: t.name, Err: err}
	}
	return nil
}

// storeEntries counts the keys of key group kg in the store.
func (t *table[E]) storeEntries(kg int) int {
	if t.b.flushAndEvict() != nil {
		return 0
	}
	n := 0
	var last []byte
	err := t.b.store.Scan(kg, t.id, func(key, sub, val []byte) error {
		if n == 0 || string(key) != string(last) {
			n++
			last = append(last[:0], key...)
		}
		return nil
	})
	if err != nil {
		t.b.fail(&StoreError{Op: "scan", State: t.name, Err: err})
	}
	return n
}
