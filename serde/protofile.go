package serde

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"unicode"
)

// ProtoFile returns a proto3 .proto file declaring the messages of the given
// Go types (values or pointers, e.g. ProtoFile("shop.v1", OrderCreatedEvent{})),
// and every message they reach, so that programs in other languages can read
// and write the bytes of Codec[T] with their own protobuf library.
//
// Messages are those of SchemaOfType, sorted by name; fields are in number
// order, and a oneof is declared where its lowest-numbered member falls,
// unless that would put it before a oneof the Go struct declares first: a
// oneof's place among the others decides where protobuf writes its member,
// so the file keeps the Go order. Two different Go types that map to the
// same proto name are an error.
//
// A Go enum (a defined int32 type) becomes a top-level enum. Reflection
// cannot see the names of Go constants, so the enum declares only
// <NAME>_UNSPECIFIED = 0 (proto3 enums are open: every other number still
// decodes), unless the type has a method
//
//	EnumValues() map[string]int32
//
// on its value receiver, whose names and numbers are declared instead (the
// zero value first, then by number; <NAME>_UNSPECIFIED = 0 is added when
// no name has the number 0).
//
// A field whose type has a registered codec (see Register) is declared as
// bytes: the codec writes arbitrary bytes inside the field.
func ProtoFile(pkg string, types ...any) (string, error) {
	if !validProtoPackage(pkg) {
		return "", fmt.Errorf("serde: ProtoFile: package %q is not a dotted proto identifier such as shop.v1", pkg)
	}
	if len(types) == 0 {
		return "", fmt.Errorf("serde: ProtoFile: no types given")
	}
	b := &protoFileBuilder{pkg: pkg, msgs: map[string]*pfMessage{}, enums: map[string]*pfEnum{}}
	for i, v := range types {
		if v == nil {
			return "", fmt.Errorf("serde: ProtoFile: argument %d is nil; pass a value or pointer of the type", i+1)
		}
		t := reflect.TypeOf(v)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if err := b.addType(t, fmt.Sprintf("argument %d", i+1)); err != nil {
			return "", err
		}
	}
	return b.render()
}

// protoFileBuilder collects the messages and enums of a .proto file.
type protoFileBuilder struct {
	pkg   string
	msgs  map[string]*pfMessage
	enums map[string]*pfEnum
}

// pfMessage is a message with the Go type it comes from and how ProtoFile
// reached it, for errors.
type pfMessage struct {
	m   Message
	typ reflect.Type
	via string
}

// pfEnum is a top-level enum declared for a Go enum type.
type pfEnum struct {
	name   string
	typ    reflect.Type
	via    string
	values []pfEnumValue
	named  bool // the values come from an EnumValues method
}

type pfEnumValue struct {
	name string
	num  int32
}

// protoEnumValuer is implemented by Go enum types that name their values.
type protoEnumValuer interface {
	EnumValues() map[string]int32
}

// addType adds the messages of t's schema. The schema names messages only;
// their Go types (needed to tell apart two types of the same name and to find
// the values of enums) come from walking t's fields alongside the schema.
func (b *protoFileBuilder) addType(t reflect.Type, arg string) error {
	s, err := SchemaOfType(t)
	if err != nil {
		return fmt.Errorf("%w (ProtoFile %s)", err, arg)
	}
	byName := make(map[string]*Message, len(s.Messages))
	for i := range s.Messages {
		byName[s.Messages[i].Name] = &s.Messages[i]
	}
	type pending struct {
		name string
		typ  reflect.Type
		via  string
	}
	root := fmt.Sprintf("%s (%s)", arg, fullGoTypeName(t))
	queue := []pending{{s.Root, t, root}}
	seen := map[string]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p.name] {
			continue
		}
		seen[p.name] = true
		m := byName[p.name]
		if m == nil {
			return fmt.Errorf("serde: ProtoFile: the schema of %s lacks message %s", t, p.name)
		}
		if err := b.addMessage(*m, p.typ, p.via); err != nil {
			return err
		}
		for _, f := range m.Fields {
			if f.Kind != KindMessage && f.Kind != KindEnum {
				continue
			}
			et, err := fieldElemType(m, p.typ, &f)
			if err != nil {
				return err
			}
			via := fmt.Sprintf("field %s.%s of %s", m.Name, f.Name, root)
			if f.Kind == KindMessage {
				queue = append(queue, pending{f.Type, et, via})
			} else if err := b.addEnum(f.Type, et, via); err != nil {
				return err
			}
		}
	}
	for _, m := range s.Messages {
		if !seen[m.Name] {
			return fmt.Errorf("serde: ProtoFile: message %s of the schema of %s is not reachable from its root", m.Name, t)
		}
	}
	return nil
}

// fieldElemType finds the Go element type of field f of message m, whose Go
// type is mt: the struct field's type without its pointer, slice or map.
func fieldElemType(m *Message, mt reflect.Type, f *Field) (reflect.Type, error) {
	ft := mt // a wrapper's one field holds the whole type
	if !m.Wrapper {
		if mt.Kind() != reflect.Struct {
			return nil, fmt.Errorf("serde: ProtoFile: message %s has Go type %s, which is not a struct", m.Name, mt)
		}
		found := false
		for i := 0; i < mt.NumField(); i++ {
			if sf := mt.Field(i); sf.Name == f.GoName {
				ft, found = sf.Type, true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("serde: ProtoFile: Go type %s has no field %s for %s.%s", mt, f.GoName, m.Name, f.Name)
		}
	}
	switch f.Card {
	case Optional:
		ft = ft.Elem()
	case Repeated, Map:
		if ft = ft.Elem(); ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
	}
	if ft.String() != f.GoType {
		return nil, fmt.Errorf("serde: ProtoFile: field %s.%s has Go element type %s, but its schema says %s", m.Name, f.Name, ft, f.GoType)
	}
	return ft, nil
}

func (b *protoFileBuilder) addMessage(m Message, t reflect.Type, via string) error {
	if prev, ok := b.msgs[m.Name]; ok {
		if prev.typ == t {
			return nil
		}
		return nameCollision("message", m.Name, prev.typ, prev.via, t, via)
	}
	if prev, ok := b.enums[m.Name]; ok {
		return nameCollision("message and enum", m.Name, prev.typ, prev.via, t, via)
	}
	if !isProtoIdent(m.Name) {
		return fmt.Errorf("serde: ProtoFile: Go type %s (%s) gives message name %q, which is not a proto identifier", fullGoTypeName(t), via, m.Name)
	}
	b.msgs[m.Name] = &pfMessage{m: m, typ: t, via: via}
	return nil
}

func (b *protoFileBuilder) addEnum(name string, t reflect.Type, via string) error {
	if prev, ok := b.enums[name]; ok {
		if prev.typ == t {
			return nil
		}
		return nameCollision("enum", name, prev.typ, prev.via, t, via)
	}
	if prev, ok := b.msgs[name]; ok {
		return nameCollision("message and enum", name, prev.typ, prev.via, t, via)
	}
	if !isProtoIdent(name) {
		return fmt.Errorf("serde: ProtoFile: Go type %s (%s) gives enum name %q, which is not a proto identifier", fullGoTypeName(t), via, name)
	}
	e := &pfEnum{name: name, typ: t, via: via}
	if err := e.fillValues(); err != nil {
		return err
	}
	b.enums[name] = e
	return nil
}

func nameCollision(what, name string, t1 reflect.Type, via1 string, t2 reflect.Type, via2 string) error {
	n1, n2 := fullGoTypeName(t1), fullGoTypeName(t2)
	same := ""
	if n1 == n2 {
		same = " (two distinct types with the same name, e.g. declared in different functions)"
	}
	return fmt.Errorf("serde: ProtoFile: Go types %s (%s) and %s (%s) both map to proto %s %s%s; rename one",
		n1, via1, n2, via2, what, name, same)
}

// fullGoTypeName is the Go type with its full package path.
func fullGoTypeName(t reflect.Type) string {
	if t.Name() != "" && t.PkgPath() != "" {
		return t.PkgPath() + "." + t.Name()
	}
	return t.String()
}

// fillValues reads the enum's values from its EnumValues method, or declares
// only the unspecified zero value.
func (e *pfEnum) fillValues() error {
	unspecified := strings.ToUpper(snakeCase(e.name)) + "_UNSPECIFIED"
	ev, ok := reflect.Zero(e.typ).Interface().(protoEnumValuer)
	if !ok {
		e.values = []pfEnumValue{{unspecified, 0}}
		return nil
	}
	e.named = true
	hasZero := false
	for name, num := range ev.EnumValues() {
		if !isProtoIdent(name) {
			return fmt.Errorf("serde: ProtoFile: %s.EnumValues names value %q, which is not a proto identifier", fullGoTypeName(e.typ), name)
		}
		e.values = append(e.values, pfEnumValue{name, num})
		hasZero = hasZero || num == 0
	}
	if !hasZero {
		for _, v := range e.values {
			if v.name == unspecified {
				return fmt.Errorf("serde: ProtoFile: %s.EnumValues has no value 0 and gives %s the number %d; proto3 enums need a first value 0 (name it %s or add another with 0)",
					fullGoTypeName(e.typ), unspecified, v.num, unspecified)
			}
		}
		e.values = append(e.values, pfEnumValue{unspecified, 0})
	}
	// proto3: the first value must be 0; the rest follow by number.
	sort.Slice(e.values, func(i, j int) bool {
		a, b := e.values[i], e.values[j]
		if (a.num == 0) != (b.num == 0) {
			return a.num == 0
		}
		if a.num != b.num {
			return a.num < b.num
		}
		return a.name < b.name
	})
	// protoc rejects values whose names are equal once the enum's name prefix,
	// case and underscores are ignored, unless they are aliases.
	canon := map[string]pfEnumValue{}
	for _, v := range e.values {
		c := enumValueCanon(v.name, e.name)
		if prev, dup := canon[c]; dup && prev.num != v.num {
			return fmt.Errorf("serde: ProtoFile: values %s (%d) and %s (%d) of enum %s (Go %s) differ only in case, underscores or the enum name prefix, which protoc rejects",
				prev.name, prev.num, v.name, v.num, e.name, fullGoTypeName(e.typ))
		}
		canon[c] = v
	}
	return nil
}

// aliased reports whether two values share a number.
func (e *pfEnum) aliased() bool {
	for i := 1; i < len(e.values); i++ {
		for j := 0; j < i; j++ {
			if e.values[i].num == e.values[j].num {
				return true
			}
		}
	}
	return false
}

// enumValueCanon is protoc's comparison form of an enum value name: the enum
// name prefix removed (ignoring case and underscores, unless nothing would be
// left), then upper camel case with the underscores dropped.
func enumValueCanon(value, enum string) string {
	rest := value
	j := 0
	for i := 0; i < len(value); i++ {
		if value[i] == '_' {
			continue
		}
		for j < len(enum) && enum[j] == '_' {
			j++
		}
		if j == len(enum) {
			if r := strings.TrimLeft(value[i:], "_"); r != "" {
				rest = r
			}
			break
		}
		if unicode.ToLower(rune(value[i])) != unicode.ToLower(rune(enum[j])) {
			break
		}
		j++
	}
	var b strings.Builder
	upper := true
	for _, r := range rest {
		switch {
		case r == '_':
			upper = true
			continue
		case upper:
			r = unicode.ToUpper(r)
			upper = false
		default:
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// render writes the .proto text.
func (b *protoFileBuilder) render() (string, error) {
	// Top-level symbols share the package scope: messages, enums and the
	// values of every enum.
	top := map[string]string{}
	declare := func(name, what string) error {
		if prev, dup := top[name]; dup {
			return fmt.Errorf("serde: ProtoFile: %s and %s are both named %s; proto declares enum values in the package scope, next to messages and enums", prev, what, name)
		}
		top[name] = what
		return nil
	}
	msgNames := make([]string, 0, len(b.msgs))
	for name := range b.msgs {
		msgNames = append(msgNames, name)
		if err := declare(name, "message "+name); err != nil {
			return "", err
		}
	}
	enumNames := make([]string, 0, len(b.enums))
	for name := range b.enums {
		enumNames = append(enumNames, name)
		if err := declare(name, "enum "+name); err != nil {
			return "", err
		}
	}
	sort.Strings(msgNames)
	sort.Strings(enumNames)
	for _, name := range enumNames {
		for _, v := range b.enums[name].values {
			if err := declare(v.name, "value "+v.name+" of enum "+name); err != nil {
				return "", err
			}
		}
	}
	// google.protobuf.X is looked up from the innermost scope out; a symbol
	// or package component named google on the way would capture it.
	_, googleTop := top["google"]
	googleInPkg := false
	for i, c := range strings.Split(b.pkg, ".") {
		googleInPkg = googleInPkg || i > 0 && c == "google"
	}

	var body strings.Builder
	usesTimestamp, usesDuration := false, false
	for _, name := range msgNames {
		pm := b.msgs[name]
		m := pm.m
		fields := append([]Field(nil), m.Fields...)
		sort.Slice(fields, func(i, j int) bool { return fields[i].Number < fields[j].Number })
		scope, err := messageScope(&m, fields)
		if err != nil {
			return "", err
		}
		ref := func(n string) string {
			if scope[n] {
				return "." + b.pkg + "." + n
			}
			return n
		}
		wkt := func(n string) string {
			if scope["google"] || googleTop || googleInPkg {
				return ".google.protobuf." + n
			}
			return "google.protobuf." + n
		}
		typeName := func(k Kind, typ string) string {
			switch k {
			case KindMessage, KindEnum:
				return ref(typ)
			case KindTimestamp:
				usesTimestamp = true
				return wkt("Timestamp")
			case KindDuration:
				usesDuration = true
				return wkt("Duration")
			case KindCustom:
				return "bytes"
			}
			return k.String()
		}

		fmt.Fprintf(&body, "\n// Go type %s", fullGoTypeName(pm.typ))
		if m.Wrapper {
			body.WriteString(", wrapped as a message with one field")
		}
		body.WriteString(".\n")
		fmt.Fprintf(&body, "message %s {\n", m.Name)
		if r := protoReservedRanges(m.Reserved); r != "" {
			fmt.Fprintf(&body, "  reserved %s;\n", r)
		}
		if n := protoReservedNames(m.ReservedNames); n != "" {
			fmt.Fprintf(&body, "  reserved %s;\n", n)
		}
		for _, item := range protoLayout(m.Oneofs, fields) {
			if item.oneof == "" {
				writeProtoField(&body, "  ", item.fields[0], typeName)
				continue
			}
			fmt.Fprintf(&body, "  oneof %s {\n", item.oneof)
			for _, f := range item.fields {
				writeProtoField(&body, "    ", f, typeName)
			}
			body.WriteString("  }\n")
		}
		body.WriteString("}\n")
	}
	for _, name := range enumNames {
		e := b.enums[name]
		fmt.Fprintf(&body, "\n// Go type %s.\n", fullGoTypeName(e.typ))
		if !e.named {
			body.WriteString("// The Go type names no values (it has no EnumValues method); proto3 enums\n// are open, so every number decodes.\n")
		}
		fmt.Fprintf(&body, "enum %s {\n", e.name)
		if e.aliased() {
			body.WriteString("  option allow_alias = true;\n")
		}
		for _, v := range e.values {
			fmt.Fprintf(&body, "  %s = %d;\n", v.name, v.num)
		}
		body.WriteString("}\n")
	}

	var out strings.Builder
	out.WriteString("// Code generated by eddy serde.ProtoFile. DO NOT EDIT.\n\n")
	out.WriteString("syntax = \"proto3\";\n\n")
	fmt.Fprintf(&out, "package %s;\n", b.pkg)
	if usesDuration || usesTimestamp {
		out.WriteString("\n")
		if usesDuration {
			out.WriteString("import \"google/protobuf/duration.proto\";\n")
		}
		if usesTimestamp {
			out.WriteString("import \"google/protobuf/timestamp.proto\";\n")
		}
	}
	out.WriteString(body.String())
	return out.String(), nil
}

// protoItem is a field, or a oneof with its members, in a message body.
type protoItem struct {
	oneof  string
	fields []Field
}

// protoLayout orders a message body: fields by number, each oneof where its
// lowest-numbered member would be, but the oneofs in declaration order (a
// oneof's index in the .proto sets where protobuf writes its members), so a
// oneof declared before another with lower numbers comes first with them.
func protoLayout(oneofs []string, fields []Field) []protoItem {
	members := map[string][]Field{}
	for _, f := range fields {
		if f.Oneof != "" {
			members[f.Oneof] = append(members[f.Oneof], f)
		}
	}
	var items []protoItem
	next := 0 // the next field of fields to place
	placeUpTo := func(num uint32) {
		for ; next < len(fields) && fields[next].Number < num; next++ {
			if fields[next].Oneof == "" {
				items = append(items, protoItem{fields: fields[next : next+1]})
			}
		}
	}
	for _, g := range oneofs {
		if len(members[g]) == 0 {
			continue
		}
		placeUpTo(members[g][0].Number)
		items = append(items, protoItem{oneof: g, fields: members[g]})
	}
	placeUpTo(math.MaxUint32) // the rest
	return items
}

// writeProtoField writes one field declaration, with its comments, at indent.
func writeProtoField(body *strings.Builder, indent string, f Field, typeName func(Kind, string) string) {
	if f.Kind == KindCustom {
		name, version := f.GoType, uint32(0)
		if f.Codec != nil {
			name, version = f.Codec.Name, f.Codec.Version
		}
		fmt.Fprintf(body, "%s// custom codec %s v%d: opaque to other languages\n", indent, commentSafe(name), version)
	}
	if c := narrowIntComment(f); c != "" {
		fmt.Fprintf(body, "%s// %s\n", indent, c)
	}
	var decl string
	switch f.Card {
	case Optional:
		switch {
		case f.Oneof != "": // members have presence and take no label
			decl = typeName(f.Kind, f.Type)
		case f.Kind == KindMessage, f.Kind == KindTimestamp, f.Kind == KindDuration: // messages have presence
			decl = typeName(f.Kind, f.Type)
		default:
			decl = "optional " + typeName(f.Kind, f.Type)
		}
	case Repeated:
		decl = "repeated " + typeName(f.Kind, f.Type)
	case Map:
		key := f.MapKey
		if key == KindEnum { // map keys cannot be enums; the wire is the same
			key = KindInt32
		}
		decl = fmt.Sprintf("map<%s, %s>", key, typeName(f.Kind, f.Type))
	default:
		decl = typeName(f.Kind, f.Type)
	}
	fmt.Fprintf(body, "%s%s %s = %d;\n", indent, decl, f.Name, f.Number)
}

// messageScope returns the symbols a message declares inside itself: its
// fields, the entry types of its maps and the synthetic oneofs of its
// optional fields. It checks they are unique, as are the fields' JSON names.
func messageScope(m *Message, fields []Field) (map[string]bool, error) {
	scope := map[string]string{}
	add := func(sym, what string) error {
		if prev, dup := scope[sym]; dup {
			return fmt.Errorf("serde: ProtoFile: message %s declares %s twice: %s and %s", m.Name, sym, prev, what)
		}
		scope[sym] = what
		return nil
	}
	jsonNames := map[string]string{}
	for _, f := range fields {
		if !isProtoIdent(f.Name) || strings.Trim(f.Name, "_") == "" {
			return nil, fmt.Errorf("serde: ProtoFile: field %s.%s has name %q, which is not a proto identifier; set one with name=x in its tag", m.Name, f.GoName, f.Name)
		}
		what := fmt.Sprintf("field %s (Go %s)", f.Name, f.GoName)
		if err := add(f.Name, what); err != nil {
			return nil, err
		}
		js := protoJSONName(f.Name)
		if prev, dup := jsonNames[js]; dup {
			return nil, fmt.Errorf("serde: ProtoFile: fields %s and %s of message %s have the same JSON name %s, which protoc rejects in proto3", prev, f.Name, m.Name, js)
		}
		jsonNames[js] = f.Name
		switch {
		case f.Card == Map:
			js := protoJSONName(f.Name)
			entry := strings.ToUpper(js[:1]) + js[1:] + "Entry"
			if err := add(entry, "the entry type of map "+what); err != nil {
				return nil, err
			}
		case f.Oneof != "":
		case f.Card == Optional && f.Kind != KindMessage && f.Kind != KindTimestamp && f.Kind != KindDuration:
			if err := add("_"+f.Name, "the synthetic oneof of optional "+what); err != nil {
				return nil, err
			}
		}
	}
	for _, g := range m.Oneofs {
		if err := add(g, "oneof "+g); err != nil {
			return nil, err
		}
	}
	out := make(map[string]bool, len(scope))
	for sym := range scope {
		out[sym] = true
	}
	return out, nil
}

// protoJSONName is protoc's default JSON name of a field: underscores dropped,
// each letter after one upper-cased.
func protoJSONName(name string) string {
	var b strings.Builder
	upper := false
	for _, r := range name {
		if r == '_' {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// narrowIntComment notes Go integers narrower than their proto type, whose
// out-of-range values Decode rejects.
func narrowIntComment(f Field) string {
	desc := func(k Kind, bits uint32) string {
		if bits != 8 && bits != 16 {
			return ""
		}
		switch k {
		case KindInt32, KindSint32, KindSfixed32, KindEnum:
			return fmt.Sprintf("int%d: -%d..%d", bits, uint64(1)<<(bits-1), uint64(1)<<(bits-1)-1)
		case KindUint32, KindFixed32:
			return fmt.Sprintf("uint%d: 0..%d", bits, uint64(1)<<bits-1)
		}
		return ""
	}
	var parts []string
	if f.Card == Map {
		if d := desc(f.MapKey, f.KeyBits); d != "" {
			parts = append(parts, "keys Go "+d)
		}
		if d := desc(f.Kind, f.Bits); d != "" {
			parts = append(parts, "values Go "+d)
		}
	} else if d := desc(f.Kind, f.Bits); d != "" {
		parts = append(parts, "Go "+d)
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + " (Eddy rejects numbers outside the range)"
}

// protoReservedRanges writes ranges sorted and merged, as protoc rejects
// overlapping ones: "4, 9 to 11".
func protoReservedRanges(rs []Range) string {
	if len(rs) == 0 {
		return ""
	}
	rs = append([]Range(nil), rs...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].From < rs[j].From })
	merged := rs[:1]
	for _, r := range rs[1:] {
		last := &merged[len(merged)-1]
		if r.From <= last.To {
			last.To = max(last.To, r.To)
			continue
		}
		merged = append(merged, r)
	}
	parts := make([]string, len(merged))
	for i, r := range merged {
		if r.From == r.To {
			parts[i] = fmt.Sprint(r.From)
		} else {
			parts[i] = fmt.Sprintf("%d to %d", r.From, r.To)
		}
	}
	return strings.Join(parts, ", ")
}

// protoReservedNames writes the names quoted, without repeats.
func protoReservedNames(names []string) string {
	seen := map[string]bool{}
	var parts []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			parts = append(parts, fmt.Sprintf("%q", n))
		}
	}
	return strings.Join(parts, ", ")
}

// isProtoIdent reports whether s is a proto identifier: ASCII letters, digits
// and underscores, not starting with a digit.
func isProtoIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return true
}

func validProtoPackage(pkg string) bool {
	if pkg == "" {
		return false
	}
	for _, part := range strings.Split(pkg, ".") {
		if !isProtoIdent(part) {
			return false
		}
	}
	return true
}

// commentSafe keeps a name on one comment line.
func commentSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}
