package serde

import (
	"cmp"
	"reflect"
	"slices"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// mapOps encodes, sizes and decodes one map type. Maps whose key and value
// are scalars get typed code instantiated from generics (no reflection, no
// allocation); other maps go through reflect.
type mapOps struct {
	append func(b []byte, f *field, p unsafe.Pointer, depth int) ([]byte, error)
	size   func(f *field, p unsafe.Pointer, depth int) int
	// decode decodes one entry from d.src[start:end] into the map at p.
	decode func(d *decoder, f *field, p unsafe.Pointer, start, end, depth int) error
	// clear empties the map at p for reuse, keeping its memory; nil for
	// reflect-driven maps, which are replaced instead.
	clear func(p unsafe.Pointer)
}

type mapKind struct{ key, val reflect.Kind }

var typedMaps = map[mapKind]*mapOps{}

func addTyped[K cmp.Ordered, V any](key, val reflect.Kind) {
	typedMaps[mapKind{key, val}] = &mapOps{
		append: appendMapTyped[K, V],
		size:   sizeMapTyped[K, V],
		decode: decodeMapTyped[K, V],
		clear:  func(p unsafe.Pointer) { clear(*(*map[K]V)(p)) },
	}
}

func addTypedKey[K cmp.Ordered](key reflect.Kind) {
	addTyped[K, string](key, reflect.String)
	addTyped[K, []byte](key, reflect.Slice)
	addTyped[K, bool](key, reflect.Bool)
	addTyped[K, int32](key, reflect.Int32)
	addTyped[K, int64](key, reflect.Int64)
	addTyped[K, int](key, reflect.Int)
	addTyped[K, uint32](key, reflect.Uint32)
	addTyped[K, uint64](key, reflect.Uint64)
	addTyped[K, uint](key, reflect.Uint)
	addTyped[K, float32](key, reflect.Float32)
	addTyped[K, float64](key, reflect.Float64)
}

func init() {
	addTypedKey[string](reflect.String)
	typedMaps[mapKind{reflect.String, reflect.String}].append = appendMapStringString
	typedMaps[mapKind{reflect.String, reflect.String}].decode = decodeMapStringString
	addTypedKey[int64](reflect.Int64)
	addTypedKey[int32](reflect.Int32)
	addTypedKey[int](reflect.Int)
	addTypedKey[uint64](reflect.Uint64)
	addTypedKey[uint32](reflect.Uint32)
	addTypedKey[uint](reflect.Uint)
}

// mapOpsFor picks typed code when the map's key and value kinds have it. Named
// types share the memory layout and hashing of their underlying kind, so a
// map[Region]Status runs on the map[string]int32 code.
func mapOpsFor(t reflect.Type, key, val *field) *mapOps {
	vk := t.Elem().Kind()
	if vk == reflect.Slice && t.Elem().Elem().Kind() != reflect.Uint8 {
		vk = reflect.Invalid
	}
	if key.kind <= kBytes && val.kind <= kBytes && val.card == cSingular {
		if ops, ok := typedMaps[mapKind{t.Key().Kind(), vk}]; ok {
			return ops
		}
	}
	if ops, ok := registeredMaps.Load(t); ok {
		return ops.(*mapOps)
	}
	return &reflectMapOps
}

// registeredMaps holds the code instantiated by RegisterMap, by map type.
var registeredMaps sync.Map // reflect.Type -> *mapOps

// RegisterMap instantiates code for map[K]V, so that codecs and struct fields
// of that type compiled after the call encode, size and decode it without
// reflection or allocation per entry. The bytes are the same. Only maps whose
// values are not scalars need it (those of messages, pointers to messages,
// times and custom types); scalar maps have such code already.
//
// Call it once per map type during setup; later calls do nothing. The first
// call drops the compiled plans, as Register does, so that the next For
// compiles with the new code. A K that cannot be a protobuf map key is left
// alone: compiling the type reports why.
func RegisterMap[K comparable, V any]() {
	compare := keyCompare[K]()
	if compare == nil {
		return
	}
	t := reflect.TypeFor[map[K]V]()
	if _, ok := registeredMaps.Load(t); ok {
		return
	}
	compileMu.Lock()
	defer compileMu.Unlock()
	if _, ok := registeredMaps.Load(t); ok {
		return
	}
	registeredMaps.Store(t, newRegisteredMap[K, V](compare))
	plans.Clear()
}

// keyCompare returns protobuf's deterministic order of map keys of type K,
// the order of sortedKeys, or nil if K is not a map key kind.
func keyCompare[K comparable]() func(a, b K) int {
	switch reflect.TypeFor[K]().Kind() {
	case reflect.String:
		return compareAs[K, string]
	case reflect.Bool:
		return func(a, b K) int {
			x, y := *(*bool)(unsafe.Pointer(&a)), *(*bool)(unsafe.Pointer(&b))
			switch {
			case x == y:
				return 0
			case !x:
				return -1
			}
			return 1
		}
	case reflect.Int:
		return compareAs[K, int]
	case reflect.Int8:
		return compareAs[K, int8]
	case reflect.Int16:
		return compareAs[K, int16]
	case reflect.Int32:
		return compareAs[K, int32]
	case reflect.Int64:
		return compareAs[K, int64]
	case reflect.Uint:
		return compareAs[K, uint]
	case reflect.Uint8:
		return compareAs[K, uint8]
	case reflect.Uint16:
		return compareAs[K, uint16]
	case reflect.Uint32:
		return compareAs[K, uint32]
	case reflect.Uint64:
		return compareAs[K, uint64]
	}
	return nil
}

// compareAs compares two Ks as their underlying type U.
func compareAs[K any, U cmp.Ordered](a, b K) int {
	return cmp.Compare(*(*U)(unsafe.Pointer(&a)), *(*U)(unsafe.Pointer(&b)))
}

// registeredMap is the code of one map type registered with RegisterMap. The
// map is ranged over in Go; keys and values are written by the entry's field
// plans, as the reflect code writes them.
type registeredMap[K comparable, V any] struct {
	compare func(a, b mapEntry[K, V]) int
	// scratch recycles *[]mapEntry[K, V]: the entries of a map being
	// written, sorted, or the one entry being sized. The plans take unsafe
	// pointers that escape through function values, so temporaries on the
	// stack would move to the heap on every call; and a value can hold a
	// map of the same type, so one scratch per type would not do.
	scratch sync.Pool
	entries sync.Pool // zeroed *mapEntry[K, V]: decode's temporaries
}

type mapEntry[K comparable, V any] struct {
	k K
	v V
}

// maxScratch is the most entries a recycled scratch keeps room for.
const maxScratch = 1 << 12

func newRegisteredMap[K comparable, V any](compare func(a, b K) int) *mapOps {
	r := &registeredMap[K, V]{compare: func(a, b mapEntry[K, V]) int { return compare(a.k, b.k) }}
	r.scratch.New = func() any { return new([]mapEntry[K, V]) }
	r.entries.New = func() any { return new(mapEntry[K, V]) }
	return &mapOps{
		append: r.append,
		size:   r.size,
		decode: r.decode,
		clear:  func(p unsafe.Pointer) { clear(*(*map[K]V)(p)) },
	}
}

// done clears es, so the pool holds no references into decoded or user
// data, and recycles it.
func (r *registeredMap[K, V]) done(s *[]mapEntry[K, V], es []mapEntry[K, V]) {
	if cap(es) > maxScratch {
		return
	}
	clear(es)
	*s = es[:0]
	r.scratch.Put(s)
}

func (r *registeredMap[K, V]) append(b []byte, f *field, p unsafe.Pointer, depth int) ([]byte, error) {
	m := *(*map[K]V)(p)
	if len(m) == 0 {
		return b, nil
	}
	s := r.scratch.Get().(*[]mapEntry[K, V])
	es := (*s)[:0]
	for k, v := range m {
		es = append(es, mapEntry[K, V]{k, v})
	}
	slices.SortFunc(es, r.compare)
	var err error
	for i := range es {
		b = appendTag(b, f)
		b = append(b, 0)
		start := len(b)
		if b, err = appendElem(b, f.mapKey, unsafe.Pointer(&es[i].k), depth+1); err != nil {
			err = wrapEncode(err, "[key]")
			break
		}
		if b, err = appendMapValue(b, f.mapVal, unsafe.Pointer(&es[i].v), depth+1); err != nil {
			err = wrapEncode(err, "[value]")
			break
		}
		b = fixLength(b, start)
	}
	r.done(s, es)
	return b, err
}

func (r *registeredMap[K, V]) size(f *field, p unsafe.Pointer, depth int) int {
	m := *(*map[K]V)(p)
	if len(m) == 0 {
		return 0
	}
	s := r.scratch.Get().(*[]mapEntry[K, V])
	es := append((*s)[:0], mapEntry[K, V]{})
	e := &es[0]
	n := 0
	for k, v := range m {
		e.k, e.v = k, v
		sz := sizeElem(f.mapKey, unsafe.Pointer(&e.k), depth+1) + sizeMapValue(f.mapVal, unsafe.Pointer(&e.v), depth+1)
		n += int(f.tagLen) + sizeVarint(uint64(sz)) + sz
	}
	r.done(s, es)
	return n
}

// decode decodes one entry into a zeroed temporary, as the reflect code
// decodes into new ones: a value must not reuse the memory of the one
// before, which the map holds now. The temporary is the decoder's while it
// is free and of this type (a value can hold a map of the same type, whose
// entries then take one from the pool).
func (r *registeredMap[K, V]) decode(d *decoder, f *field, p unsafe.Pointer, start, end, depth int) error {
	var e *mapEntry[K, V]
	if d.entry != nil && d.entryOf == unsafe.Pointer(r) {
		e, d.entry = (*mapEntry[K, V])(d.entry), nil
	} else {
		e = r.entries.Get().(*mapEntry[K, V])
	}
	err := d.decodeEntry(f, unsafe.Pointer(&e.k), unsafe.Pointer(&e.v), start, end, depth)
	if err == nil {
		mp := (*map[K]V)(p)
		if *mp == nil {
			*mp = make(map[K]V)
		}
		(*mp)[e.k] = e.v
	}
	*e = mapEntry[K, V]{}
	if d.entry == nil {
		d.entry, d.entryOf = unsafe.Pointer(e), unsafe.Pointer(r)
	} else {
		r.entries.Put(e)
	}
	return err
}

// appendEntryScalar appends the entry {key = 1; value = 2} of a typed map.
func appendEntryScalar(b []byte, f *field, kp, vp unsafe.Pointer) ([]byte, error) {
	kf, vf := f.mapKey, f.mapVal
	if kf.kind == kString && !validString(*(*string)(kp)) {
		return b, &encodeErr{segs: []string{"[key]"}, reason: "invalid UTF-8 in a string map key"}
	}
	if vf.kind == kString && !validString(*(*string)(vp)) {
		return b, &encodeErr{segs: []string{"[value]"}, reason: "invalid UTF-8 in a string map value"}
	}
	n := int(kf.tagLen) + sizeScalar(kf, kp) + int(vf.tagLen) + sizeScalar(vf, vp)
	b = appendTag(b, f)
	b = appendVarint(b, uint64(n))
	b = appendTag(b, kf)
	b = appendScalar(b, kf, kp)
	b = appendTag(b, vf)
	return appendScalar(b, vf, vp), nil
}

func appendMapTyped[K cmp.Ordered, V any](b []byte, f *field, p unsafe.Pointer, _ int) ([]byte, error) {
	m := *(*map[K]V)(p)
	if len(m) == 0 {
		return b, nil
	}
	// Entries are copied out and sorted together, so writing them needs no
	// map lookups; small maps stay on the stack.
	type entry struct {
		k K
		v V
	}
	var stack [16]entry
	entries := stack[:0]
	for k, v := range m {
		entries = append(entries, entry{k, v})
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.k, b.k) })
	var err error
	for i := range entries {
		e := &entries[i]
		if b, err = appendEntryScalar(b, f, unsafe.Pointer(&e.k), unsafe.Pointer(&e.v)); err != nil {
			return b, err
		}
	}
	return b, nil
}

// appendMapStringString is appendMapTyped for map[string]string, the common
// tags and labels map: entries sorted by insertion sort (maps are small) and
// written in place when key and value are short.
func appendMapStringString(b []byte, f *field, p unsafe.Pointer, _ int) ([]byte, error) {
	m := *(*map[string]string)(p)
	if len(m) == 0 {
		return b, nil
	}
	type entry struct{ k, v string }
	var entries []entry
	if len(m) <= 4 {
		// Tags and labels maps are mostly this small; the array is zeroed
		// on every call.
		var stack [4]entry
		entries = stack[:0]
	} else {
		var stack [16]entry
		entries = stack[:0]
	}
	for k, v := range m {
		entries = append(entries, entry{k, v})
	}
	if len(entries) <= 16 {
		for i := 1; i < len(entries); i++ {
			for j := i; j > 0 && entries[j].k < entries[j-1].k; j-- {
				entries[j], entries[j-1] = entries[j-1], entries[j]
			}
		}
	} else {
		slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.k, b.k) })
	}
	var tag byte
	if f.tagLen == 1 {
		tag = f.tag[0]
	}
	for i := range entries {
		k, v := entries[i].k, entries[i].v
		nk, nv := len(k), len(v)
		if tag != 0 && nk <= 32 && nv <= 32 && cap(b)-len(b) >= 6+64 {
			// Every length fits one byte: tag, entry length, key and value
			// written in place.
			at := len(b)
			b = b[:at+6+nk+nv]
			b[at] = tag
			b[at+1] = byte(4 + nk + nv)
			b[at+2] = 1<<3 | wireBytes
			b[at+3] = byte(nk)
			if nk > 0 && !copyShort(b[at+4:at+4+nk], unsafe.Slice(unsafe.StringData(k), nk)) && !utf8.ValidString(k) {
				return b[:at], &encodeErr{segs: []string{"[key]"}, reason: "invalid UTF-8 in a string map key"}
			}
			at += 4 + nk
			b[at] = 2<<3 | wireBytes
			b[at+1] = byte(nv)
			if nv > 0 && !copyShort(b[at+2:at+2+nv], unsafe.Slice(unsafe.StringData(v), nv)) && !utf8.ValidString(v) {
				return b[:at-4-nk], &encodeErr{segs: []string{"[value]"}, reason: "invalid UTF-8 in a string map value"}
			}
			continue
		}
		var err error
		if b, err = appendEntryScalar(b, f, unsafe.Pointer(&entries[i].k), unsafe.Pointer(&entries[i].v)); err != nil {
			return b, err
		}
	}
	return b, nil
}

// decodeMapStringString is decodeMapTyped for map[string]string. Entries
// that are key then value with one-byte lengths, as every encoder writes
// them, are read inline; others go through decodeEntryValue.
func decodeMapStringString(d *decoder, f *field, p unsafe.Pointer, start, end, _ int) error {
	var k, v string
	src := d.src
	i := start
	if i+4 <= end && src[i] == 1<<3|wireBytes && src[i+1] < 0x80 {
		nk := int(src[i+1])
		j := i + 2 + nk
		if j+2 <= end && src[j] == 2<<3|wireBytes && src[j+1] < 0x80 && j+2+int(src[j+1]) == end &&
			validBytes(src[i+2:j]) && validBytes(src[j+2:end]) {
			if nk > 0 || j+2 < end {
				if d.arena == nil {
					if nk > 0 {
						d.newArena(i + 2)
					} else {
						d.newArena(j + 2)
					}
				}
				if nk > 0 {
					k = unsafe.String(&d.arena[i+2-d.arenaBase], nk)
				}
				if j+2 < end {
					v = unsafe.String(&d.arena[j+2-d.arenaBase], end-j-2)
				}
			}
			goto store
		}
	}
	if err := d.decodeEntryValue(f, unsafe.Pointer(&k), unsafe.Pointer(&v), start, end); err != nil {
		return err
	}
store:
	mp := (*map[string]string)(p)
	if *mp == nil {
		*mp = make(map[string]string)
	}
	(*mp)[k] = v
	return nil
}

func sizeMapTyped[K cmp.Ordered, V any](f *field, p unsafe.Pointer, _ int) int {
	n := 0
	for k, v := range *(*map[K]V)(p) {
		s := int(f.mapKey.tagLen) + sizeScalar(f.mapKey, unsafe.Pointer(&k)) +
			int(f.mapVal.tagLen) + sizeScalar(f.mapVal, unsafe.Pointer(&v))
		n += int(f.tagLen) + sizeVarint(uint64(s)) + s
	}
	return n
}

func decodeMapTyped[K cmp.Ordered, V any](d *decoder, f *field, p unsafe.Pointer, start, end, _ int) error {
	var k K
	var v V
	if err := d.decodeEntryValue(f, unsafe.Pointer(&k), unsafe.Pointer(&v), start, end); err != nil {
		return err
	}
	mp := (*map[K]V)(p)
	if *mp == nil {
		*mp = make(map[K]V)
	}
	(*mp)[k] = v
	return nil
}

// reflectMapOps handles maps with message, time or custom values, and keys
// without typed code (bool, int8, int16, uint8, uint16).
var reflectMapOps = mapOps{
	append: appendMapReflect,
	size:   sizeMapReflect,
	decode: decodeMapReflect,
}

// sortedKeys returns the keys of mv in protobuf's deterministic order.
func sortedKeys(mv reflect.Value) []reflect.Value {
	keys := mv.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int {
		switch a.Kind() {
		case reflect.String:
			return cmp.Compare(a.String(), b.String())
		case reflect.Bool:
			if a.Bool() == b.Bool() {
				return 0
			}
			if !a.Bool() {
				return -1
			}
			return 1
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return cmp.Compare(a.Int(), b.Int())
		}
		return cmp.Compare(a.Uint(), b.Uint())
	})
	return keys
}

// entryParts copies a map key and value into addressable temporaries.
func entryParts(f *field, mv, k reflect.Value) (kp, vp unsafe.Pointer) {
	kt := reflect.New(f.mapKey.typ)
	kt.Elem().Set(k)
	vt := reflect.New(f.mapVal.typ)
	vt.Elem().Set(mv.MapIndex(k))
	return kt.UnsafePointer(), vt.UnsafePointer()
}

func appendMapReflect(b []byte, f *field, p unsafe.Pointer, depth int) ([]byte, error) {
	mv := reflect.NewAt(f.typ, p).Elem()
	if mv.Len() == 0 {
		return b, nil
	}
	var err error
	for _, k := range sortedKeys(mv) {
		kp, vp := entryParts(f, mv, k)
		b = appendTag(b, f)
		b = append(b, 0)
		start := len(b)
		if b, err = appendElem(b, f.mapKey, kp, depth+1); err != nil {
			return b, wrapEncode(err, "[key]")
		}
		if b, err = appendMapValue(b, f.mapVal, vp, depth+1); err != nil {
			return b, wrapEncode(err, "[value]")
		}
		b = fixLength(b, start)
	}
	return b, nil
}

// appendMapValue writes a map value; a nil pointer value is an empty message.
func appendMapValue(b []byte, vf *field, vp unsafe.Pointer, depth int) ([]byte, error) {
	if vf.card == cPointer {
		vp = *(*unsafe.Pointer)(vp)
		if vp == nil {
			b = appendTag(b, vf)
			return append(b, 0), nil
		}
	}
	return appendElem(b, vf, vp, depth)
}

func sizeMapValue(vf *field, vp unsafe.Pointer, depth int) int {
	if vf.card == cPointer {
		vp = *(*unsafe.Pointer)(vp)
		if vp == nil {
			return int(vf.tagLen) + 1
		}
	}
	return sizeElem(vf, vp, depth)
}

func sizeMapReflect(f *field, p unsafe.Pointer, depth int) int {
	mv := reflect.NewAt(f.typ, p).Elem()
	n := 0
	for _, k := range mv.MapKeys() {
		kp, vp := entryParts(f, mv, k)
		s := sizeElem(f.mapKey, kp, depth+1) + sizeMapValue(f.mapVal, vp, depth+1)
		n += int(f.tagLen) + sizeVarint(uint64(s)) + s
	}
	return n
}

func decodeMapReflect(d *decoder, f *field, p unsafe.Pointer, start, end, depth int) error {
	kv := reflect.New(f.mapKey.typ)
	vv := reflect.New(f.mapVal.typ)
	if err := d.decodeEntry(f, kv.UnsafePointer(), vv.UnsafePointer(), start, end, depth); err != nil {
		return err
	}
	mv := reflect.NewAt(f.typ, p).Elem()
	if mv.IsNil() {
		mv.Set(reflect.MakeMap(f.typ))
	}
	mv.SetMapIndex(kv.Elem(), vv.Elem())
	return nil
}
