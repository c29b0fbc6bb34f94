package serde

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[time.Duration]()
	unknownType  = reflect.TypeFor[Unknown]()
)

// Field numbers protobuf forbids or reserves.
const (
	maxFieldNumber     = 1<<29 - 1
	firstReservedRange = 19000
	lastReservedRange  = 19999
)

// planFor returns the cached plan of t, compiling it (and every struct it
// reaches) on first use.
func planFor(t reflect.Type) (*message, error) {
	if m, ok := plans.Load(t); ok {
		return m.(*message), nil
	}
	compileMu.Lock()
	defer compileMu.Unlock()
	if m, ok := plans.Load(t); ok {
		return m.(*message), nil
	}
	c := compiler{building: map[reflect.Type]*message{}}
	var m *message
	var err error
	if t.Kind() == reflect.Struct && t != timeType {
		m, err = c.message(t)
	} else {
		m, err = c.wrapper(t)
	}
	if err != nil {
		return nil, err
	}
	for _, bm := range c.building {
		bm.buildProg()
	}
	if m.synth {
		m.buildProg()
	}
	for bt, bm := range c.building {
		plans.Store(bt, bm)
	}
	plans.Store(t, m)
	return m, nil
}

// compiler builds plans; building holds the structs compiled in this pass so
// recursive types point at one plan.
type compiler struct {
	building map[reflect.Type]*message
}

// wrapper compiles a non-struct type as a message with one field numbered 1.
func (c *compiler) wrapper(t reflect.Type) (*message, error) {
	m := &message{typ: t, goName: t.String(), unknown: -1, synth: true}
	f := field{num: 1, goName: "value", protoName: "value", typ: t}
	if err := c.fieldType(&f, t, tagOptions{}, m.goName+".value"); err != nil {
		return nil, err
	}
	m.fields = []field{f}
	m.index()
	return m, nil
}

func (c *compiler) message(t reflect.Type) (*message, error) {
	if m, ok := c.building[t]; ok {
		return m, nil
	}
	if m, ok := plans.Load(t); ok {
		return m.(*message), nil
	}
	m := &message{typ: t, goName: t.Name(), unknown: -1}
	if m.goName == "" {
		m.goName = t.String()
	}
	c.building[t] = m
	seen := map[uint32]string{}
	groups := map[string]*oneof{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		path := m.goName + "." + sf.Name
		tag, hasTag := sf.Tag.Lookup("proto")
		if sf.Name == "_" {
			if strings.HasPrefix(tag, "reserved=") {
				if err := m.parseReserved(strings.TrimPrefix(tag, "reserved=")); err != nil {
					return nil, fmt.Errorf("serde: %s: reserved tag %q: %v", m.goName, tag, err)
				}
			}
			continue
		}
		if tag == "-" {
			continue
		}
		if !sf.IsExported() {
			if hasTag {
				return nil, fmt.Errorf("serde: field %s is unexported but has a proto tag; export it or drop the tag", path)
			}
			continue
		}
		if !hasTag {
			return nil, fmt.Errorf("serde: field %s has no proto tag; add `proto:\"N\"` with an unused field number, or `proto:\"-\"` to skip it", path)
		}
		if tag == "unknown" {
			if sf.Type != unknownType {
				return nil, fmt.Errorf("serde: field %s is tagged proto:\"unknown\" but has type %s; use serde.Unknown", path, sf.Type)
			}
			if m.unknown >= 0 {
				return nil, fmt.Errorf("serde: %s has two fields tagged proto:\"unknown\"", m.goName)
			}
			m.unknown = int(sf.Offset)
			m.hasUnkwn = true
			continue
		}
		opts, err := parseTag(tag)
		if err != nil {
			return nil, fmt.Errorf("serde: field %s: %v", path, err)
		}
		if prev, dup := seen[opts.num]; dup {
			return nil, fmt.Errorf("serde: fields %s.%s and %s both use number %d; field numbers must be unique", m.goName, prev, sf.Name, opts.num)
		}
		seen[opts.num] = sf.Name
		f := field{num: opts.num, goName: sf.Name, protoName: opts.name, offset: sf.Offset, typ: sf.Type}
		if f.protoName == "" {
			f.protoName = snakeCase(sf.Name)
		}
		if err := c.fieldType(&f, sf.Type, opts, path); err != nil {
			return nil, err
		}
		if opts.oneof != "" {
			if err := oneofMember(&f, path, opts.oneof); err != nil {
				return nil, err
			}
			f.oneof = groups[opts.oneof]
			if f.oneof == nil {
				f.oneof = &oneof{name: opts.oneof}
				groups[opts.oneof] = f.oneof
				m.oneofs = append(m.oneofs, f.oneof)
			}
		}
		m.fields = append(m.fields, f)
	}
	for _, g := range m.oneofs {
		for _, f := range m.fields {
			if f.protoName == g.name {
				return nil, fmt.Errorf("serde: oneof %s of %s has the name of field %s.%s; proto declares both in the message's scope, so rename one", g.name, m.goName, m.goName, f.goName)
			}
		}
	}
	for _, f := range m.fields {
		if m.isReservedNumber(f.num) {
			return nil, fmt.Errorf("serde: field %s.%s uses number %d, which %s declares reserved; pick an unused number", m.goName, f.goName, f.num, m.goName)
		}
		if slices.Contains(m.reservedNames, f.protoName) {
			return nil, fmt.Errorf("serde: field %s.%s uses name %q, which %s declares reserved; pick another name", m.goName, f.goName, f.protoName, m.goName)
		}
	}
	sort.Slice(m.fields, func(i, j int) bool { return m.fields[i].num < m.fields[j].num })
	for i := range m.fields {
		f := &m.fields[i]
		f.idx = i
		if f.oneof != nil {
			f.op = opOneof
			f.oneof.members = append(f.oneof.members, f)
			f.oneof.offsets = append(f.oneof.offsets, f.offset)
		}
	}
	m.index()
	return m, nil
}

// oneofMember checks that f, tagged oneof=group, can be a member: a pointer,
// whose nil says the member is not the one set.
func oneofMember(f *field, path, group string) error {
	switch f.card {
	case cPointer:
		return nil
	case cSlice, cMap:
		return fmt.Errorf("serde: field %s is in oneof %s but has type %s; protobuf oneofs cannot hold repeated fields or maps (put it in a struct and make a *struct the member)", path, group, f.typ)
	}
	return fmt.Errorf("serde: field %s is in oneof %s but has type %s; oneof members must be pointers (*%s), the set member being the one that is not nil", path, group, f.typ, f.typ)
}

// index builds the number lookup tables.
func (m *message) index() {
	m.fast = [128]*field{}
	m.allBits, m.sliceBits, m.ptrBits = 0, 0, 0
	for i := range m.fields {
		f := &m.fields[i]
		f.bit = 0
		if i < 64 {
			f.bit = 1 << uint(i)
			m.allBits |= f.bit
			switch f.card {
			case cSlice:
				m.sliceBits |= f.bit
			case cPointer:
				m.ptrBits |= f.bit
			}
		}
		if f.num >= 16 {
			continue
		}
		m.fast[f.num<<3|uint32(f.kind.wireType())] = f
		if f.card == cSlice && f.kind.packable() {
			m.fast[f.num<<3|wireBytes] = f
		}
	}
	maxNum := uint32(0)
	for _, f := range m.fields {
		if f.num < 256 && f.num > maxNum {
			maxNum = f.num
		}
	}
	m.byNum = make([]int16, maxNum+1)
	for i, f := range m.fields {
		if f.num < 256 {
			m.byNum[f.num] = int16(i + 1)
		}
	}
}

// lookup returns the field with number num, or nil. The table covers the
// usual small numbers and keeps this inlinable; larger ones are searched.
func (m *message) lookup(num uint64) *field {
	if num < uint64(len(m.byNum)) {
		if i := m.byNum[num]; i > 0 {
			return &m.fields[i-1]
		}
		return nil
	}
	return m.search(num)
}

func (m *message) search(num uint64) *field {
	lo, hi := 0, len(m.fields)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if uint64(m.fields[h].num) < num {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo < len(m.fields) && uint64(m.fields[lo].num) == num {
		return &m.fields[lo]
	}
	return nil
}

// fieldType fills f's cardinality and kind from its Go type.
func (c *compiler) fieldType(f *field, t reflect.Type, opts tagOptions, path string) error {
	switch {
	case t == timeType || t == durationType:
		f.card = cSingular
	case t.Kind() == reflect.Pointer:
		f.card = cPointer
		t = t.Elem()
		if t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8 || t.Kind() == reflect.Map {
			return fmt.Errorf("serde: field %s has type %s; pointers to pointers, slices and maps are not supported", path, f.typ)
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		f.card = cSlice
		t = t.Elem()
		if t.Kind() == reflect.Pointer {
			if t.Elem().Kind() != reflect.Struct {
				return fmt.Errorf("serde: field %s has type %s; slices of pointers must point to structs", path, f.typ)
			}
			f.elemPtr = true
		}
		f.elemSize = t.Size()
		if f.elemPtr {
			t = t.Elem()
		}
		if _, ok := c.customFor(t); !ok && (t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8 || t.Kind() == reflect.Map) {
			return fmt.Errorf("serde: field %s has type %s; protobuf has no repeated of repeated or of maps; wrap the inner value in a struct", path, f.typ)
		}
	case t.Kind() == reflect.Map:
		return c.mapField(f, t, opts, path)
	default:
		f.card = cSingular
	}
	f.elemType = t
	if f.card == cPointer || f.elemPtr {
		f.slot = nextChunkSlot.Add(1)
		f.sliceType = reflect.SliceOf(t)
	}
	if err := c.elemKind(f, t, opts, path); err != nil {
		return err
	}
	if f.card == cSlice && f.kind == kBytes && t.Kind() != reflect.Slice {
		return fmt.Errorf("serde: field %s: unsupported type %s", path, f.typ)
	}
	f.wt = f.kind.wireType()
	f.setTag()
	return nil
}

func (c *compiler) customFor(t reflect.Type) (*customCodec, bool) {
	if cc, ok := custom.Load(t); ok {
		return cc.(*customCodec), true
	}
	return nil, false
}

// elemKind sets f.kind and f.size for one element of Go type t.
func (c *compiler) elemKind(f *field, t reflect.Type, opts tagOptions, path string) error {
	if cc, ok := c.customFor(t); ok {
		f.kind, f.cust = kCustom, cc
		return opts.noEncoding(path, t)
	}
	switch t {
	case timeType:
		f.kind = kTime
		return opts.noEncoding(path, t)
	case durationType:
		f.kind = kDuration
		return opts.noEncoding(path, t)
	}
	f.size = uint8(t.Size())
	switch t.Kind() {
	case reflect.Bool:
		f.kind = kBool
		return opts.noEncoding(path, t)
	case reflect.Int8, reflect.Int16, reflect.Int32:
		f.kind = pick(opts, kInt32, kSint32, kSfixed32)
	case reflect.Int, reflect.Int64:
		f.kind = pick(opts, kInt64, kSint64, kSfixed64)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		if opts.zigzag {
			return fmt.Errorf("serde: field %s: zigzag applies to signed integers, not %s", path, t)
		}
		f.kind = pick(opts, kUint32, kUint32, kFixed32)
	case reflect.Uint, reflect.Uint64:
		if opts.zigzag {
			return fmt.Errorf("serde: field %s: zigzag applies to signed integers, not %s", path, t)
		}
		f.kind = pick(opts, kUint64, kUint64, kFixed64)
	case reflect.Float32:
		f.kind = kFloat
		return opts.noEncoding(path, t)
	case reflect.Float64:
		f.kind = kDouble
		return opts.noEncoding(path, t)
	case reflect.String:
		f.kind = kString
		return opts.noEncoding(path, t)
	case reflect.Slice:
		if t.Elem().Kind() != reflect.Uint8 {
			return fmt.Errorf("serde: field %s: unsupported type %s", path, t)
		}
		f.kind = kBytes
		return opts.noEncoding(path, t)
	case reflect.Struct:
		m, err := c.message(t)
		if err != nil {
			return err
		}
		f.kind, f.msg = kMessage, m
		return opts.noEncoding(path, t)
	default:
		return fmt.Errorf("serde: field %s has type %s, which has no protobuf mapping (supported: bool, integers, floats, string, []byte, structs, pointers, slices, maps, time.Time, time.Duration)", path, t)
	}
	return nil
}

func pick(o tagOptions, plain, zigzag, fixed kind) kind {
	switch {
	case o.zigzag:
		return zigzag
	case o.fixed:
		return fixed
	}
	return plain
}

// mapField compiles map[K]V as a repeated entry message {K key = 1; V value = 2}.
func (c *compiler) mapField(f *field, t reflect.Type, opts tagOptions, path string) error {
	f.card = cMap
	f.kind = kMessage
	f.wt = wireBytes
	f.elemType = t.Elem()
	if opts.zigzag || opts.fixed {
		return fmt.Errorf("serde: field %s: zigzag and fixed are not supported on maps", path)
	}
	kt := t.Key()
	switch kt.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		return fmt.Errorf("serde: field %s has key type %s; map keys must be integers, bool or string", path, kt)
	}
	if _, ok := c.customFor(kt); ok || kt == durationType {
		return fmt.Errorf("serde: field %s has key type %s; map keys must be plain integers, bool or string", path, kt)
	}
	key := &field{num: 1, goName: "key", protoName: "key", typ: kt, elemType: kt}
	if err := c.elemKind(key, kt, tagOptions{}, path+"[key]"); err != nil {
		return err
	}
	key.wt = key.kind.wireType()
	key.setTag()
	vt := t.Elem()
	val := &field{num: 2, goName: "value", protoName: "value", typ: vt, elemType: vt}
	if vt.Kind() == reflect.Pointer {
		if vt.Elem().Kind() != reflect.Struct || vt.Elem() == timeType {
			return fmt.Errorf("serde: field %s has value type %s; map values may be pointers to structs only", path, vt)
		}
		val.card = cPointer
		val.elemType = vt.Elem()
		vt = vt.Elem()
	} else if _, ok := c.customFor(vt); !ok && (vt.Kind() == reflect.Slice && vt.Elem().Kind() != reflect.Uint8 || vt.Kind() == reflect.Map) {
		return fmt.Errorf("serde: field %s has value type %s; protobuf map values cannot be repeated or maps; wrap it in a struct", path, vt)
	}
	if err := c.elemKind(val, vt, tagOptions{}, path+"[value]"); err != nil {
		return err
	}
	val.wt = val.kind.wireType()
	val.setTag()
	f.mapKey, f.mapVal = key, val
	f.mapOps = mapOpsFor(t, key, val)
	f.setTag()
	return nil
}

// tagOptions is a parsed proto struct tag.
type tagOptions struct {
	num    uint32
	zigzag bool
	fixed  bool
	name   string
	oneof  string // the group of a oneof member
}

func (o tagOptions) noEncoding(path string, t reflect.Type) error {
	if o.zigzag || o.fixed {
		return fmt.Errorf("serde: field %s: zigzag and fixed apply to integers, not %s", path, t)
	}
	return nil
}

// parseTag parses `N[,zigzag|fixed|name=x]`.
func parseTag(tag string) (tagOptions, error) {
	parts := strings.Split(tag, ",")
	n, err := strconv.ParseUint(strings.TrimSpace(parts[0]), 10, 32)
	if err != nil {
		return tagOptions{}, fmt.Errorf("tag %q: the field number %q is not a number", tag, parts[0])
	}
	if n < 1 || n > maxFieldNumber {
		return tagOptions{}, fmt.Errorf("tag %q: field number %d is out of range 1..%d", tag, n, maxFieldNumber)
	}
	if n >= firstReservedRange && n <= lastReservedRange {
		return tagOptions{}, fmt.Errorf("tag %q: field numbers %d..%d are reserved by protobuf", tag, firstReservedRange, lastReservedRange)
	}
	o := tagOptions{num: uint32(n)}
	for _, p := range parts[1:] {
		p = strings.TrimSpace(p)
		switch {
		case p == "zigzag":
			o.zigzag = true
		case p == "fixed":
			o.fixed = true
		case strings.HasPrefix(p, "name="):
			o.name = strings.TrimPrefix(p, "name=")
			if !validProtoName(o.name) {
				return tagOptions{}, fmt.Errorf("tag %q: %q is not a valid proto field name", tag, o.name)
			}
		case strings.HasPrefix(p, "oneof="):
			o.oneof = strings.TrimPrefix(p, "oneof=")
			if !isProtoIdent(o.oneof) {
				return tagOptions{}, fmt.Errorf("tag %q: oneof name %q is not a proto identifier (letters, digits and underscores, not starting with a digit)", tag, o.oneof)
			}
		default:
			return tagOptions{}, fmt.Errorf("tag %q: unknown option %q (want zigzag, fixed, name=x or oneof=group)", tag, p)
		}
	}
	if o.zigzag && o.fixed {
		return tagOptions{}, fmt.Errorf("tag %q: zigzag and fixed exclude each other", tag)
	}
	return o, nil
}

func validProtoName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || r < unicode.MaxASCII && unicode.IsLetter(r) || i > 0 && r >= '0' && r <= '9' {
			continue
		}
		return false
	}
	return true
}

// snakeCase turns a Go name into a proto field name: OrderID -> order_id.
func snakeCase(s string) string {
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
				i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1])) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// parseReserved reads the list of a `proto:"reserved=4,9-11,name=old_total"`
// tag on a blank field.
func (m *message) parseReserved(list string) error {
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if name, ok := strings.CutPrefix(item, "name="); ok {
			if !validProtoName(name) {
				return fmt.Errorf("%q is not a valid proto field name", name)
			}
			m.reservedNames = append(m.reservedNames, name)
			continue
		}
		lo, hi, isRange := strings.Cut(item, "-")
		from, err := strconv.ParseUint(lo, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a number, a range N-M or name=x", item)
		}
		to := from
		if isRange {
			if to, err = strconv.ParseUint(hi, 10, 32); err != nil || to < from {
				return fmt.Errorf("%q is not a range N-M with N <= M", item)
			}
		}
		if from < 1 || to > maxFieldNumber {
			return fmt.Errorf("%q is outside 1..%d", item, maxFieldNumber)
		}
		m.reserved = append(m.reserved, Range{From: uint32(from), To: uint32(to)})
	}
	return nil
}

func (m *message) isReservedNumber(n uint32) bool {
	for _, r := range m.reserved {
		if n >= r.From && n <= r.To {
			return true
		}
	}
	return false
}
