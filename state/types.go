package state

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/eddyflow/eddy/serde"
)

// table is the per-key-group storage shared by the state types: one Go map
// per key group, keyed by the serialized key.
type table[E any] struct {
	b      *Backend
	name   string
	id     uint32
	groups []map[string]*E
	mem    []groupMem[E] // where the keys and entries of groups[i] live
	codec  serde.Codec[E]
	cgen   uint64 // b.gen when cp was looked up
	cp     *E     // the current key's entry (nil: absent) as of cgen
}

func newTable[E any](b *Backend, name string, codec serde.Codec[E]) table[E] {
	t := table[E]{b: b, name: name, id: StateID(name), codec: codec, groups: make([]map[string]*E, b.kgEnd-b.kgStart),
		mem: make([]groupMem[E], b.kgEnd-b.kgStart)}
	for i := range t.groups {
		t.groups[i] = map[string]*E{}
	}
	return t
}

// get returns the current key's entry, or nil. The map lookup with
// string(bytes) does not allocate.
// The entry is cached until the key changes, so Get then Update costs one
// map lookup.
func (t *table[E]) get() *E {
	if t.cgen == t.b.gen {
		return t.cp
	}
	p := t.groups[t.b.group()][string(t.b.key)]
	t.cgen, t.cp = t.b.gen, p
	return p
}

// getOrCreate returns the current key's entry, creating it (allocating only
// once per chunk of new entries or block of new keys, and when the map grows).
func (t *table[E]) getOrCreate() *E {
	if t.cgen == t.b.gen && t.cp != nil {
		return t.cp
	}
	return t.lookupOrCreate()
}

// lookupOrCreate is getOrCreate past the cached entry, apart so that
// getOrCreate is inlined. A key that get just found absent is created
// without a second lookup: Get then Update of a new key costs one lookup and
// one insert, like m[k]++.
func (t *table[E]) lookupOrCreate() *E {
	m := t.groups[t.b.group()]
	var p *E
	if t.cgen != t.b.gen {
		p = m[string(t.b.key)]
	}
	if p == nil {
		g := &t.mem[t.b.group()]
		p = g.entries.alloc()
		m[arenaString(&g.keys, t.b.key)] = p
	}
	t.cgen, t.cp = t.b.gen, p
	return p
}

// remove deletes key from the map of key group index g and releases its entry.
func (t *table[E]) remove(g int, key []byte) {
	m := t.groups[g]
	p := m[string(key)]
	if p == nil {
		return
	}
	delete(m, string(key))
	mem := &t.mem[g]
	mem.entries.release(p)
	if mem.keys.drop(len(key)) {
		t.groups[g] = compactKeys(&mem.keys, m)
	}
}

func (t *table[E]) clear() {
	t.remove(t.b.group(), t.b.key)
	t.cgen, t.cp = t.b.gen, nil
	if t.b.changes != nil {
		t.b.logChange(t.id, nil, true)
	}
}

// logged reports a write of the current key's entry to the change log, if
// the backend has one.
func (t *table[E]) logged(p *E) {
	if t.b.changes == nil {
		return
	}
	var err error
	if t.b.scratch, err = t.codec.Append(t.b.scratch[:0], p); err != nil {
		t.b.fail(fmt.Errorf("state %q: %w", t.name, err))
		return
	}
	t.b.logChange(t.id, t.b.scratch, false)
}

// apply loads or removes one logged change of key group kg.
func (t *table[E]) apply(kg int, key, val []byte, del bool) error {
	if del {
		t.remove(kg-t.b.kgStart, key)
		return nil
	}
	return t.loadWith(kg, key, val, t.codec.Decode)
}

func (t *table[E]) stateName() string { return t.name }

func (t *table[E]) groupEntries(kg int) int { return len(t.groups[kg-t.b.kgStart]) }

func (t *table[E]) entries() int {
	n := 0
	for _, m := range t.groups {
		n += len(m)
	}
	return n
}

// appendGroupWith writes the entries of key group kg in key order, so
// snapshots of equal state are equal bytes.
func (t *table[E]) appendGroupWith(dst []byte, kg int, enc func(dst []byte, e *E) ([]byte, error)) ([]byte, int, error) {
	m := t.groups[kg-t.b.kgStart]
	if len(m) == 0 {
		return dst, 0, nil
	}
	var val []byte
	var err error
	if !t.b.deterministic {
		// Map order: sorting a million keys per checkpoint costs more
		// than everything else a snapshot does.
		for k, e := range m {
			if val, err = enc(val[:0], e); err != nil {
				return dst, 0, fmt.Errorf("key %x: %w", k, err)
			}
			dst = appendEntry(dst, []byte(k), val)
		}
		return dst, len(m), nil
	}
	// Sorting (key, entry) pairs keeps snapshots of equal state equal
	// without a map lookup per key.
	type pair struct {
		k string
		e *E
	}
	keys := make([]pair, 0, len(m))
	for k, e := range m {
		keys = append(keys, pair{k, e})
	}
	slices.SortFunc(keys, func(a, b pair) int { return strings.Compare(a.k, b.k) })
	for _, k := range keys {
		if val, err = enc(val[:0], k.e); err != nil {
			return dst, 0, fmt.Errorf("key %x: %w", k.k, err)
		}
		dst = appendEntry(dst, []byte(k.k), val)
	}
	return dst, len(keys), nil
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
	m := t.groups[g]
	if p := m[string(key)]; p != nil {
		// Replaying a change log rewrites the same keys over and over:
		// keeping the map's key and entry costs no allocation.
		*p = *e
		mem.entries.release(e)
		return nil
	}
	m[arenaString(&mem.keys, key)] = e
	return nil
}

// Value is a single value per key.
type Value[T any] struct {
	table[T]
	schema serde.Schema
}

// NewValue declares a value state named name on b.
func NewValue[T any](b *Backend, name string) (*Value[T], error) {
	codec, schema, err := codecAndSchema[T](name)
	if err != nil {
		return nil, err
	}
	v := &Value[T]{table: newTable(b, name, codec), schema: schema}
	return v, b.register(v)
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

func (v *Value[T]) kind() string              { return "value" }
func (v *Value[T]) valueSchema() serde.Schema { return v.schema }
func (v *Value[T]) appendGroup(dst []byte, kg int) ([]byte, int, error) {
	return v.appendGroupWith(dst, kg, func(d []byte, e *T) ([]byte, error) { return v.codec.Append(d, e) })
}
func (v *Value[T]) load(kg int, key, val []byte) error {
	return v.loadWith(kg, key, val, v.codec.Decode)
}

// Reducing folds every added value into one per key with a reduce function.
type Reducing[T any] struct {
	Value[T]
	reduce func(acc, x T) T
}

// NewReducing declares a reducing state named name on b.
func NewReducing[T any](b *Backend, name string, reduce func(acc, x T) T) (*Reducing[T], error) {
	codec, schema, err := codecAndSchema[T](name)
	if err != nil {
		return nil, err
	}
	r := &Reducing[T]{Value: Value[T]{table: newTable(b, name, codec), schema: schema}, reduce: reduce}
	return r, b.register(r)
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

// List is a list of values per key.
type List[T any] struct {
	table[[]T]
	schema serde.Schema
}

// NewList declares a list state named name on b.
func NewList[T any](b *Backend, name string) (*List[T], error) {
	codec, schema, err := codecAndSchema[[]T](name)
	if err != nil {
		return nil, err
	}
	l := &List[T]{table: newTable(b, name, codec), schema: schema}
	return l, b.register(l)
}

// Add appends x to the current key's list.
func (l *List[T]) Add(x T) {
	p := l.getOrCreate()
	*p = append(*p, x)
	l.logged(p)
}

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
	for i, m := range l.groups {
		for k, p := range m {
			if !fn([]byte(k), l.b.kgStart+i, *p) {
				return
			}
		}
	}
}

func (l *List[T]) kind() string              { return "list" }
func (l *List[T]) valueSchema() serde.Schema { return l.schema }
func (l *List[T]) appendGroup(dst []byte, kg int) ([]byte, int, error) {
	return l.appendGroupWith(dst, kg, func(d []byte, e *[]T) ([]byte, error) { return l.codec.Append(d, e) })
}
func (l *List[T]) load(kg int, key, val []byte) error {
	return l.loadWith(kg, key, val, l.codec.Decode)
}

// Map is a map of user keys to values per key.
type Map[K comparable, V any] struct {
	table[map[K]V]
	schema serde.Schema
}

// NewMap declares a map state named name on b. K must be an integer, bool or
// string type (a protobuf map key).
func NewMap[K comparable, V any](b *Backend, name string) (*Map[K, V], error) {
	codec, schema, err := codecAndSchema[map[K]V](name)
	if err != nil {
		return nil, err
	}
	m := &Map[K, V]{table: newTable(b, name, codec), schema: schema}
	return m, b.register(m)
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
	m.logged(p)
}

// Delete removes k from the current key's map.
func (m *Map[K, V]) Delete(k K) {
	if p := m.get(); p != nil {
		delete(*p, k)
		if len(*p) == 0 {
			m.clear()
		} else {
			m.logged(p)
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

func (m *Map[K, V]) kind() string              { return "map" }
func (m *Map[K, V]) valueSchema() serde.Schema { return m.schema }
func (m *Map[K, V]) appendGroup(dst []byte, kg int) ([]byte, int, error) {
	return m.appendGroupWith(dst, kg, func(d []byte, e *map[K]V) ([]byte, error) { return m.codec.Append(d, e) })
}
func (m *Map[K, V]) load(kg int, key, val []byte) error {
	return m.loadWith(kg, key, val, m.codec.Decode)
}

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
