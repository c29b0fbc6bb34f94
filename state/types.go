package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"unsafe"

	"github.com/eddyflow/eddy/internal/cacheline"
	"github.com/eddyflow/eddy/serde"
	"google.golang.org/protobuf/encoding/protowire"
)

// table is the per-key-group storage shared by the state types: one Go map
// per key group, keyed by the serialized key.
type table[E any] struct {
	_      cacheline.Pad // its cached entry is set per record (package cacheline)
	b      *Backend
	name   string
	id     uint32
	groups []keyMap[E]
	mem    []groupMem[E] // where the keys and entries of groups[i] live
	codec  serde.Codec[E]
	cgen   uint64 // b.gen when cp was looked up
	cp     *E     // the current key's entry (nil: absent) as of cgen
	// lastSize is the length of the value appendEntry wrote last: the
	// guess of the next one's.
	lastSize int

	// Of a backend with a Store (see store.go), whose maps then cache
	// decoded entries:
	self        keyedState                           // the state type embedding the table, for its apply
	elems       bool                                 // the state stores elements (List, Map)
	absent      *E                                   // the cached entry of a key the store does not hold
	dirty       []dirtyEntry[E]                      // entries written since the last Flush, stored at the next
	dirtyKeys   []byte                               // the keys of dirty
	groupCounts []int                                // sortDirty's counting sort
	loadKG      int                                  // the key group of the key storeLoad loads
	loadKey     []byte                               // the key storeLoad loads
	loadBytes   int                                  // the value bytes storeLoad loaded
	loadFn      func(sub, val []byte) error          // t.applyLoaded, made once
	cached      int                                  // keys in the maps (storeLoad counts them)
	size16      int                                  // 16 × the running average of a key's and its value's bytes
	evictAt     int                                  // the key group index evictNext tries next
	split       func(kg int, key []byte, e *E) error // stores a whole value as element records (Map)

	ttl *ttl // expiry, if declared with TTL (ttl.go)
	_   cacheline.Pad
}

func newTable[E any](b *Backend, name string, codec serde.Codec[E]) table[E] {
	t := table[E]{b: b, name: name, id: StateID(name), codec: codec, groups: make([]keyMap[E], b.kgEnd-b.kgStart),
		mem: make([]groupMem[E], b.kgEnd-b.kgStart)}
	if b.store != nil {
		t.absent = &new(markedEntry[E]).e // with a mark, as every entry of the table
		t.size16 = 16 * 16
		for i := range t.mem {
			t.mem[i].entries.marked = true
		}
	}
	return t
}

// get returns the current key's entry, or nil. The map lookup with
// string(bytes) does not allocate.
// The entry is cached until the key changes, so Get then Update costs one
// map lookup.
func (t *table[E]) get() *E {
	if t.cgen == t.b.gen && t.ttl == nil {
		return t.cp
	}
	if t.ttl != nil && t.ttl.stamps != nil {
		return t.ttlGet()
	}
	return t.rawGet()
}

// rawGet is get without expiry.
func (t *table[E]) rawGet() *E {
	if t.cgen == t.b.gen {
		return t.cp
	}
	if t.b.store != nil {
		return t.storeGet()
	}
	p := t.groups[t.b.group()].get(t.b.key)
	t.cgen, t.cp = t.b.gen, p
	return p
}

// getOrCreate returns the current key's entry, creating it (allocating only
// once per chunk of new entries or block of new keys, and when the map grows).
func (t *table[E]) getOrCreate() *E {
	if t.cgen == t.b.gen && t.cp != nil && t.ttl == nil {
		return t.cp
	}
	return t.lookupOrCreate()
}

// lookupOrCreate is getOrCreate past the cached entry, apart so that
// getOrCreate is inlined. A key that get just found absent is created
// without a second lookup: Get then Update of a new key costs one lookup and
// one insert, like m[k]++.
func (t *table[E]) lookupOrCreate() *E {
	if t.ttl != nil && t.ttl.stamps != nil {
		// A write: an expired entry is gone first, and the key is
		// stamped.
		t.ttlGet()
		t.stamp()
		t.cgen = 0
	}
	if t.b.store != nil {
		return t.storeCreate()
	}
	m := &t.groups[t.b.group()]
	var p *E
	if t.cgen != t.b.gen {
		p = m.get(t.b.key)
	}
	if p == nil {
		g := &t.mem[t.b.group()]
		p = g.entries.alloc()
		m.insert(&g.keys, t.b.key, p)
	}
	t.cgen, t.cp = t.b.gen, p
	return p
}

// remove deletes key from the map of key group index g and releases its entry.
func (t *table[E]) remove(g int, key []byte) {
	m := &t.groups[g]
	p := m.get(key)
	if p == nil {
		return
	}
	mem := &t.mem[g]
	m.remove(&mem.keys, key)
	mem.entries.release(p)
}

func (t *table[E]) clear() {
	if t.ttl != nil && t.ttl.stamps != nil {
		t.ttl.stamps.clear()
	}
	t.clearRaw()
}

// clearRaw removes the current key's entry.
func (t *table[E]) clearRaw() {
	if t.b.store != nil {
		t.storeClear()
		return
	}
	t.remove(t.b.group(), t.b.key)
	t.cgen, t.cp = t.b.gen, nil
	if t.b.changes != nil {
		t.b.logChange(t.id, ChangeDelete, nil, nil)
	}
}

// logged reports a write of the current key's entry to the change log, if
// the backend has one.
func (t *table[E]) logged(p *E) {
	if t.ttl != nil && t.ttl.stamps != nil {
		t.stamp()
	}
	if t.b.changes == nil {
		if t.b.store != nil {
			t.markDirty(p)
		}
		return
	}
	if t.b.store != nil {
		t.markDirty(p)
	}
	var err error
	if t.b.scratch, err = t.codec.Append(t.b.scratch[:0], p); err != nil {
		t.b.fail(fmt.Errorf("state %q: %w", t.name, err))
		return
	}
	t.b.logChange(t.id, ChangePut, nil, t.b.scratch)
}

// apply loads or removes one logged whole-value change of key group kg.
// The state types with elements handle the element changes themselves.
func (t *table[E]) apply(kg int, op ChangeOp, key, sub, val []byte) error {
	switch op {
	case ChangeDelete:
		t.remove(kg-t.b.kgStart, key)
		return nil
	case ChangePut:
		return t.loadWith(kg, key, val, t.codec.Decode)
	}
	return fmt.Errorf("operation %d does not apply to a %s state", op, "whole-value")
}

// entryAt returns the entry of key in key group kg, creating it; for
// replaying element changes.
func (t *table[E]) entryAt(kg int, key []byte) *E {
	g := kg - t.b.kgStart
	m := &t.groups[g]
	p := m.get(key)
	if p == nil {
		mem := &t.mem[g]
		p = mem.entries.alloc()
		m.insert(&mem.keys, key, p)
	}
	return p
}

func (t *table[E]) stateName() string { return t.name }

func (t *table[E]) groupEntries(kg int) int {
	if t.b.store != nil {
		return t.storeEntries(kg)
	}
	return t.groups[kg-t.b.kgStart].len()
}

func (t *table[E]) entries() int {
	if t.b.store != nil {
		n := 0
		for kg := t.b.kgStart; kg < t.b.kgEnd; kg++ {
			n += t.storeEntries(kg)
		}
		return n
	}
	n := 0
	for i := range t.groups {
		n += t.groups[i].len()
	}
	return n
}

// appendGroup writes the entries of key group kg, each value encoded in
// place behind its size. In map order by default; in key order with
// SetDeterministic, so snapshots of equal state are equal bytes.
func (t *table[E]) appendGroup(dst []byte, kg int) ([]byte, int, error) {
	if t.b.store != nil {
		// The snapshot flushed and emptied the cache: load the group,
		// write it as the heap does, and drop it.
		if err := t.loadGroup(kg); err != nil {
			return dst, 0, err
		}
		defer t.evictGroup(kg - t.b.kgStart)
	}
	m := t.groups[kg-t.b.kgStart]
	if m.len() == 0 {
		return dst, 0, nil
	}
	var err error
	g := kg - t.b.kgStart
	if !t.b.deterministic {
		// Map order: sorting a million keys per checkpoint costs more
		// than everything else a snapshot does.
		n := 0
		for k, e := range m.all {
			if t.ttl != nil && !t.liveInSnapshot(g, k, e) {
				continue // expired: left out
			}
			if dst, err = t.appendEntry(dst, k, e); err != nil {
				return dst, 0, err
			}
			n++
		}
		return dst, n, nil
	}
	// Sorting (key, entry) pairs keeps snapshots of equal state equal
	// without a map lookup per key.
	type pair struct {
		k string
		e *E
	}
	keys := make([]pair, 0, m.len())
	for k, e := range m.all {
		if t.ttl != nil && !t.liveInSnapshot(g, k, e) {
			continue
		}
		keys = append(keys, pair{string(k), e})
	}
	slices.SortFunc(keys, func(a, b pair) int { return strings.Compare(a.k, b.k) })
	for _, k := range keys {
		if dst, err = t.appendEntry(dst, unsafeBytes(k.k), k.e); err != nil {
			return dst, 0, err
		}
	}
	return dst, len(keys), nil
}

// appendEntry appends uvarint(len key) key uvarint(len value) value,
// encoding the value straight into dst. Sizing a value first would cost as
// much as encoding it for maps, so the length gets as many bytes as the last
// value's did, and the value moves in the rare case that was wrong.
func (t *table[E]) appendEntry(dst []byte, k []byte, e *E) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	at := len(dst)
	w := protowire.SizeVarint(uint64(t.lastSize))
	dst = append(dst, make([]byte, w)...)
	dst, err := t.codec.Append(dst, e)
	if err != nil {
		return dst, fmt.Errorf("key %x: %w", k, err)
	}
	n := len(dst) - at - w
	t.lastSize = n
	if nw := protowire.SizeVarint(uint64(n)); nw != w {
		if nw > w {
			dst = append(dst, make([]byte, nw-w)...)
		}
		copy(dst[at+nw:], dst[at+w:at+w+n])
		dst, w = dst[:at+nw+n], nw
	}
	binary.PutUvarint(dst[at:at+w], uint64(n))
	return dst, nil
}

// loadValue loads one restored entry: into the map, or into the store.
func (t *table[E]) loadValue(kg int, key, val []byte) error {
	if t.b.store != nil {
		return t.storeLoadValue(kg, key, val, false)
	}
	return t.loadWith(kg, key, val, t.codec.Decode)
}

// loadWith sets key's entry in key group kg to val decoded by dec. It decodes
// into a fresh entry, so a value that fails to decode leaves the old one, and
// decoding never merges into what was there.
func (t *table[E]) loadWith(kg int, key, val []byte, dec func(src []byte, e *E) error) error {
	g := kg - t.b.kgStart
	mem := &t.mem[g]
	e := mem.entries.alloc()
	if err := dec(val, e); err != nil {
		mem.entries.release(e)
		return err
	}
	m := &t.groups[g]
	if p := m.get(key); p != nil {
		// Replaying a change log rewrites the same keys over and over:
		// keeping the map's key and entry costs no allocation.
		*p = *e
		mem.entries.release(e)
		return nil
	}
	m.insert(&mem.keys, key, e)
	return nil
}

// Value is a single value per key.
type Value[T any] struct {
	table[T]
	schema serde.Schema
}

// NewValue declares a value state named name on d.
func NewValue[T any](d Declarer, name string, opts ...Option) (*Value[T], error) {
	b := d.backend()
	codec, schema, err := codecAndSchema[T](name)
	if err != nil {
		return nil, err
	}
	v := &Value[T]{table: newTable(b, name, codec), schema: schema}
	v.self = v
	if err := b.register(v); err != nil {
		return nil, err
	}
	return v, withTTL(&v.table, v, opts)
}

// Get returns the current key's value and whether it is set.
func (v *Value[T]) Get() (T, bool) {
	if p := v.get(); p != nil {
		return *p, true
	}
	var zero T
	return zero, false
}

// Update sets the current key's value.
func (v *Value[T]) Update(x T) {
	p := v.getOrCreate()
	*p = x
	v.logged(p)
}

// Clear removes the current key's value.
func (v *Value[T]) Clear() { v.clear() }

func (v *Value[T]) kind() string                       { return "value" }
func (v *Value[T]) valueSchema() serde.Schema          { return v.schema }
func (v *Value[T]) load(kg int, key, val []byte) error { return v.loadValue(kg, key, val) }

// Reducing folds every added value into one per key with a reduce function.
type Reducing[T any] struct {
	Value[T]
	reduce func(acc, x T) T
}

// NewReducing declares a reducing state named name on d.
func NewReducing[T any](d Declarer, name string, reduce func(acc, x T) T, opts ...Option) (*Reducing[T], error) {
	b := d.backend()
	codec, schema, err := codecAndSchema[T](name)
	if err != nil {
		return nil, err
	}
	r := &Reducing[T]{Value: Value[T]{table: newTable(b, name, codec), schema: schema}, reduce: reduce}
	r.self = r
	if err := b.register(r); err != nil {
		return nil, err
	}
	return r, withTTL(&r.table, r, opts)
}

// Add folds x into the current key's value (x itself when none is set).
func (r *Reducing[T]) Add(x T) {
	if p := r.get(); p != nil {
		*p = r.reduce(*p, x)
		r.logged(p)
		return
	}
	p := r.getOrCreate()
	*p = x
	r.logged(p)
}

func (r *Reducing[T]) kind() string { return "reducing" }

// List is a list of values per key. With a change log, Add logs only the
// added element (at its index), not the whole list.
type List[T any] struct {
	table[[]T]
	elem   serde.Codec[T]
	schema serde.Schema
}

// NewList declares a list state named name on d.
func NewList[T any](d Declarer, name string, opts ...Option) (*List[T], error) {
	b := d.backend()
	codec, schema, err := codecAndSchema[[]T](name)
	if err != nil {
		return nil, err
	}
	elem, err := serde.For[T]()
	if err != nil {
		return nil, &DeclareError{State: name, Err: err}
	}
	l := &List[T]{table: newTable(b, name, codec), elem: elem, schema: schema}
	l.self, l.elems = l, true
	if err := b.register(l); err != nil {
		return nil, err
	}
	return l, withTTL(&l.table, l, opts)
}

// Add appends x to the current key's list.
func (l *List[T]) Add(x T) {
	p := l.getOrCreate()
	if *p == nil {
		// A new list starts with room for a few elements (64 bytes'
		// worth): growing from one by doubling costs an allocation per
		// step, and a key's timers are a list of a few.
		*p = make([]T, 0, max(1, 64/max(1, int(unsafe.Sizeof(x)))))
	}
	*p = append(*p, x)
	if l.b.changes != nil || l.b.store != nil {
		b := l.b
		b.subScratch = binary.AppendUvarint(b.subScratch[:0], uint64(len(*p)-1))
		var err error
		if b.scratch, err = l.elem.Append(b.scratch[:0], &(*p)[len(*p)-1]); err != nil {
			b.fail(fmt.Errorf("state %q: %w", l.name, err))
			return
		}
		b.record(l.id, true, ChangePutElem, b.subScratch, b.scratch)
	}
}

// apply replays a change; an element change sets the element at its index,
// padding with zero values if the list is shorter (an element the batch's
// deduplication dropped, which a later change of the same batch replaces).
func (l *List[T]) apply(kg int, op ChangeOp, key, sub, val []byte) error {
	if op != ChangePutElem {
		if op == ChangeDeleteElem {
			return errors.New("a list has no element deletes")
		}
		return l.table.apply(kg, op, key, sub, val)
	}
	i, n := binary.Uvarint(sub)
	if n <= 0 || n != len(sub) || i > maxListIndex {
		return fmt.Errorf("bad list index %x", sub)
	}
	p := l.entryAt(kg, key)
	for uint64(len(*p)) <= i {
		var zero T
		*p = append(*p, zero)
	}
	(*p)[i] = *new(T)
	return l.elem.Decode(val, &(*p)[i])
}

// maxListIndex bounds the index of a replayed list element, so a damaged
// change cannot make replay allocate without limit.
const maxListIndex = 1 << 28

// Get returns the current key's list. The slice belongs to the state: read
// it before the next state call, do not keep it.
func (l *List[T]) Get() []T {
	if p := l.get(); p != nil {
		return *p
	}
	return nil
}

// Update replaces the current key's list with a copy of xs.
func (l *List[T]) Update(xs []T) {
	if len(xs) == 0 {
		l.clear()
		return
	}
	p := l.getOrCreate()
	*p = append((*p)[:0], xs...)
	l.logged(p)
}

// Clear removes the current key's list.
func (l *List[T]) Clear() { l.clear() }

// Range calls fn for every key of the owned key groups, in no order, until
// fn returns false. The runtime uses it to rebuild timer queues.
func (l *List[T]) Range(fn func(key []byte, kg int, xs []T) bool) {
	l.rangeAll(func(key []byte, kg int, p *[]T) bool { return fn(key, kg, *p) })
}

func (l *List[T]) kind() string                       { return "list" }
func (l *List[T]) valueSchema() serde.Schema          { return l.schema }
func (l *List[T]) load(kg int, key, val []byte) error { return l.loadValue(kg, key, val) }

// rangeAll calls fn for every key of the owned key groups and its entry,
// in no order, until fn returns false; key is fn's to keep. A store-backed
// table is loaded a key group at a time; a failure fails the backend (Err)
// and ends the walk.
func (t *table[E]) rangeAll(fn func(key []byte, kg int, p *E) bool) {
	if t.b.store == nil {
		for i, m := range t.groups {
			for k, p := range m.all {
				if !fn(bytes.Clone(k), t.b.kgStart+i, p) {
					return
				}
			}
		}
		return
	}
	if t.b.flushAndEvict() != nil {
		return
	}
	for kg := t.b.kgStart; kg < t.b.kgEnd; kg++ {
		if err := t.loadGroup(kg); err != nil {
			t.b.fail(err)
			return
		}
		more := true
		for k, p := range t.groups[kg-t.b.kgStart].all {
			if more = fn(bytes.Clone(k), kg, p); !more {
				break
			}
		}
		t.evictGroup(kg - t.b.kgStart)
		if !more {
			return
		}
	}
}

// Map is a map of user keys to values per key. With a change log, Put and
// Delete log only the changed entry, not the whole map.
type Map[K comparable, V any] struct {
	table[map[K]V]
	kc     serde.Codec[K]
	vc     serde.Codec[V]
	schema serde.Schema
	// Scratch for encoding a logged entry (the subtask's goroutine), and
	// for decoding replayed entries (one per key group: replay applies
	// key groups concurrently). Passing pointers to locals through the
	// codec interfaces would move them to the heap on every call.
	logK   K
	logV   V
	replay []mapScratch[K, V] // by key group
	_      cacheline.Pad
}

type mapScratch[K comparable, V any] struct {
	k K
	v V
}

// NewMap declares a map state named name on d. K must be an integer, bool or
// string type (a protobuf map key).
func NewMap[K comparable, V any](d Declarer, name string, opts ...Option) (*Map[K, V], error) {
	b := d.backend()
	// Snapshots and restores encode each key's whole map: with code
	// instantiated for map[K]V, a map of structs costs no reflection and no
	// allocation per entry.
	serde.RegisterMap[K, V]()
	codec, schema, err := codecAndSchema[map[K]V](name)
	if err != nil {
		return nil, err
	}
	kc, err := serde.For[K]()
	if err != nil {
		return nil, &DeclareError{State: name, Err: err}
	}
	vc, err := serde.For[V]()
	if err != nil {
		return nil, &DeclareError{State: name, Err: err}
	}
	m := &Map[K, V]{table: newTable(b, name, codec), kc: kc, vc: vc, schema: schema,
		replay: make([]mapScratch[K, V], b.kgEnd-b.kgStart)}
	m.self, m.elems, m.split = m, true, m.storeSplit
	if err := b.register(m); err != nil {
		return nil, err
	}
	return m, withTTL(&m.table, m, opts)
}

// logElem logs the change of entry k of the current key's map: its new
// value v, or its removal if v is nil.
func (m *Map[K, V]) logElem(k K, v *V) {
	b := m.b
	var err error
	m.logK = k
	if b.subScratch, err = m.kc.Append(b.subScratch[:0], &m.logK); err != nil {
		b.fail(fmt.Errorf("state %q: %w", m.name, err))
		return
	}
	if v == nil {
		b.record(m.id, true, ChangeDeleteElem, b.subScratch, nil)
		return
	}
	if b.scratch, err = m.vc.Append(b.scratch[:0], v); err != nil {
		b.fail(fmt.Errorf("state %q: %w", m.name, err))
		return
	}
	b.record(m.id, true, ChangePutElem, b.subScratch, b.scratch)
}

// storeSplit stores the map e of key as one record per entry.
func (m *Map[K, V]) storeSplit(kg int, key []byte, e *map[K]V) error {
	b := m.b
	var err error
	for k, v := range *e {
		m.logK, m.logV = k, v
		if b.subScratch, err = m.kc.Append(b.subScratch[:0], &m.logK); err != nil {
			return err
		}
		if b.scratch, err = m.vc.Append(b.scratch[:0], &m.logV); err != nil {
			return err
		}
		if err = b.store.Set(kg, m.id, key, b.elemSub(b.subScratch), b.scratch); err != nil {
			return err
		}
	}
	return nil
}

// apply replays a change, whole or of one entry.
func (m *Map[K, V]) apply(kg int, op ChangeOp, key, sub, val []byte) error {
	if op != ChangePutElem && op != ChangeDeleteElem {
		return m.table.apply(kg, op, key, sub, val)
	}
	sc := &m.replay[kg-m.b.kgStart]
	if err := m.kc.Decode(sub, &sc.k); err != nil {
		return fmt.Errorf("map key: %w", err)
	}
	k := sc.k
	if op == ChangeDeleteElem {
		if p := m.groups[kg-m.b.kgStart].get(key); p != nil {
			delete(*p, k)
			if len(*p) == 0 {
				m.remove(kg-m.b.kgStart, key) // as Delete does: no empty maps
			}
		}
		return nil
	}
	// Decode reuses the memory of what it decodes into, and the map keeps
	// a shallow copy: a value with slices, maps or pointers (a window's
	// records) must start from zero, or every replayed value would share
	// the scratch's memory and the last one would overwrite the others.
	var zero V
	sc.v = zero
	if err := m.vc.Decode(val, &sc.v); err != nil {
		return fmt.Errorf("map value: %w", err)
	}
	p := m.entryAt(kg, key)
	if *p == nil {
		*p = map[K]V{}
	}
	(*p)[k] = sc.v
	return nil
}

// Get returns the value of k in the current key's map.
func (m *Map[K, V]) Get(k K) (V, bool) {
	if p := m.get(); p != nil {
		v, ok := (*p)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

// Put sets k to v in the current key's map.
func (m *Map[K, V]) Put(k K, v V) {
	p := m.getOrCreate()
	if *p == nil {
		*p = map[K]V{}
	}
	(*p)[k] = v
	if m.b.changes != nil || m.b.store != nil {
		m.logV = v
		m.logElem(k, &m.logV)
	}
}

// Delete removes k from the current key's map.
func (m *Map[K, V]) Delete(k K) {
	if p := m.get(); p != nil {
		if _, ok := (*p)[k]; !ok {
			return
		}
		delete(*p, k)
		if len(*p) == 0 {
			m.clear()
		} else if m.b.changes != nil || m.b.store != nil {
			m.logElem(k, nil)
		}
	}
}

// Len returns the size of the current key's map.
func (m *Map[K, V]) Len() int {
	if p := m.get(); p != nil {
		return len(*p)
	}
	return 0
}

// Range calls fn for every key of the owned key groups and its map, in no
// order, until fn returns false; key is fn's to keep, the map is not. The
// window operators use it to rebuild their index of open windows after a
// restore.
func (m *Map[K, V]) Range(fn func(key []byte, kg int, m map[K]V) bool) {
	m.rangeAll(func(key []byte, kg int, p *map[K]V) bool { return fn(key, kg, *p) })
}

// All iterates over the current key's map.
func (m *Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if p := m.get(); p != nil {
			for k, v := range *p {
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

// Clear removes the current key's map.
func (m *Map[K, V]) Clear() { m.clear() }

func (m *Map[K, V]) kind() string                       { return "map" }
func (m *Map[K, V]) valueSchema() serde.Schema          { return m.schema }
func (m *Map[K, V]) load(kg int, key, val []byte) error { return m.loadValue(kg, key, val) }

// DeclareError reports a state that cannot be declared, such as one whose
// type serde cannot encode. Restarting does not help.
type DeclareError struct {
	State string
	Err   error
}

func (e *DeclareError) Error() string { return fmt.Sprintf("state %q: %v", e.State, e.Err) }

// Unwrap returns the cause.
func (e *DeclareError) Unwrap() error { return e.Err }

func codecAndSchema[T any](name string) (serde.Codec[T], serde.Schema, error) {
	codec, err := serde.For[T]()
	if err != nil {
		return nil, serde.Schema{}, &DeclareError{State: name, Err: err}
	}
	schema, err := serde.SchemaOf[T]()
	if err != nil {
		return nil, serde.Schema{}, &DeclareError{State: name, Err: err}
	}
	return codec, schema, nil
}
