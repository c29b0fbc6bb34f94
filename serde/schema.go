package serde

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// Schema is the message tree of a Go type as serde encodes it: every message
// reachable from the root, with field numbers, names, kinds and cardinality.
// Eddy stores the schema of every type it writes next to the data and checks
// it on restore (see Check).
type Schema struct {
	Root     string    `proto:"1" json:"root"`     // proto name of the root message
	Messages []Message `proto:"2" json:"messages"` // the root first, then the others by name
}

// Message is one message of a Schema.
type Message struct {
	Name          string   `proto:"1" json:"name"`                 // proto name
	GoName        string   `proto:"2,name=go_name" json:"go_name"` // package-qualified Go type
	Fields        []Field  `proto:"3" json:"fields"`               // in number order
	Reserved      []Range  `proto:"4" json:"reserved,omitempty"`   // numbers declared reserved
	ReservedNames []string `proto:"5,name=reserved_names" json:"reserved_names,omitempty"`
	KeepsUnknown  bool     `proto:"6,name=keeps_unknown" json:"keeps_unknown,omitempty"` // has a serde.Unknown field
	Wrapper       bool     `proto:"7" json:"wrapper,omitempty"`                          // a non-struct type wrapped as field 1
	// Oneofs names the message's oneofs in declaration order, which is the
	// order their members are written in (after all other fields). Schemas
	// written before oneofs existed have none.
	Oneofs []string `proto:"8" json:"oneofs,omitempty"`
}

// Range is an inclusive range of field numbers.
type Range struct {
	From uint32 `proto:"1" json:"from"`
	To   uint32 `proto:"2" json:"to"`
}

// Field is one field of a Message.
type Field struct {
	Number uint32      `proto:"1" json:"number"`
	Name   string      `proto:"2" json:"name"`                 // proto name
	GoName string      `proto:"3,name=go_name" json:"go_name"` // Go field name
	Kind   Kind        `proto:"4" json:"kind"`                 // of the element (the map value for maps)
	Card   Cardinality `proto:"5" json:"card"`                 // singular, optional, repeated or map
	Type   string      `proto:"6" json:"type,omitempty"`       // message or enum name for Message and Enum kinds
	GoType string      `proto:"7,name=go_type" json:"go_type"` // Go element type, e.g. int16, datagen.Money
	Bits   uint32      `proto:"8" json:"bits,omitempty"`       // Go width of integer elements
	MapKey Kind        `proto:"9,name=map_key" json:"map_key,omitempty"`
	// KeyBits is the Go width of an integer map key.
	KeyBits uint32      `proto:"10,name=key_bits" json:"key_bits,omitempty"`
	Codec   *CodecState `proto:"11" json:"codec,omitempty"` // for Custom kinds
	// Oneof is the oneof the field is a member of, one of Message.Oneofs,
	// or "". Members have Card Optional.
	Oneof string `proto:"12" json:"oneof,omitempty"`
}

// CodecState records a custom codec (see Register) in a schema: its name and
// version, and optionally the bytes of its sample value, which let Check
// notice a layout change made without a version bump.
type CodecState struct {
	Name    string `proto:"1" json:"name"`
	Version uint32 `proto:"2" json:"version"`
	Sample  []byte `proto:"3" json:"sample,omitempty"`
}

// Kind is the protobuf type of a field element.
type Kind int32

// The kinds of Field.Kind and Field.MapKey.
const (
	KindInvalid Kind = iota
	KindBool
	KindInt32
	KindInt64
	KindUint32
	KindUint64
	KindSint32
	KindSint64
	KindFixed32
	KindFixed64
	KindSfixed32
	KindSfixed64
	KindFloat
	KindDouble
	KindString
	KindBytes
	KindMessage
	KindEnum
	KindTimestamp
	KindDuration
	KindCustom
)

var kindNames = [...]string{"invalid", "bool", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
	"fixed32", "fixed64", "sfixed32", "sfixed64", "float", "double", "string", "bytes",
	"message", "enum", "google.protobuf.Timestamp", "google.protobuf.Duration", "custom"}

// String returns the proto spelling of k.
func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int32(k))
	}
	return kindNames[k]
}

// MarshalText writes k as its proto spelling, for the JSON form of a Schema.
func (k Kind) MarshalText() ([]byte, error) {
	if k < 0 || int(k) >= len(kindNames) {
		return nil, fmt.Errorf("serde: invalid kind %d", int32(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText reads a kind written by MarshalText.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if n == string(b) {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("serde: unknown kind %q", b)
}

// WireType is the protobuf wire type of one element of kind k.
func (k Kind) WireType() int {
	switch k {
	case KindFixed32, KindSfixed32, KindFloat:
		return wireFixed32
	case KindFixed64, KindSfixed64, KindDouble:
		return wireFixed64
	case KindString, KindBytes, KindMessage, KindTimestamp, KindDuration, KindCustom:
		return wireBytes
	}
	return wireVarint
}

// Cardinality is how a field holds its elements.
type Cardinality int32

// The cardinalities of Field.Card.
const (
	Singular Cardinality = iota // implicit presence: zero is not written
	Optional                    // explicit presence: a pointer
	Repeated                    // a slice
	Map                         // a map; Field.MapKey is the key kind
)

var cardNames = [...]string{"singular", "optional", "repeated", "map"}

// String returns the name of c.
func (c Cardinality) String() string {
	if c < 0 || int(c) >= len(cardNames) {
		return fmt.Sprintf("Cardinality(%d)", int32(c))
	}
	return cardNames[c]
}

// MarshalText writes c by name.
func (c Cardinality) MarshalText() ([]byte, error) {
	if c < 0 || int(c) >= len(cardNames) {
		return nil, fmt.Errorf("serde: invalid cardinality %d", int32(c))
	}
	return []byte(cardNames[c]), nil
}

// UnmarshalText reads a cardinality written by MarshalText.
func (c *Cardinality) UnmarshalText(b []byte) error {
	for i, n := range cardNames {
		if n == string(b) {
			*c = Cardinality(i)
			return nil
		}
	}
	return fmt.Errorf("serde: unknown cardinality %q", b)
}

// SchemaOf returns the schema of T.
func SchemaOf[T any]() (Schema, error) {
	return SchemaOfType(reflect.TypeFor[T]())
}

// SchemaOfType returns the schema of t, for callers that hold a reflect.Type.
func SchemaOfType(t reflect.Type) (Schema, error) {
	if cc, ok := custom.Load(t); ok {
		// A registered codec for the root itself: one field holding it.
		c := cc.(*customCodec)
		m := Message{Name: protoMessageName(t), GoName: t.String(), Wrapper: true, Fields: []Field{{
			Number: 1, Name: "value", GoName: "value", Kind: KindCustom, GoType: t.String(), Codec: c.state(),
		}}}
		return Schema{Root: m.Name, Messages: []Message{m}}, nil
	}
	m, err := planFor(t)
	if err != nil {
		return Schema{}, err
	}
	b := schemaBuilder{byType: map[*message]string{}, names: map[string]reflect.Type{}}
	root, err := b.add(m)
	if err != nil {
		return Schema{}, err
	}
	s := Schema{Root: root}
	sort.Slice(b.out, func(i, j int) bool {
		if (b.out[i].Name == root) != (b.out[j].Name == root) {
			return b.out[i].Name == root
		}
		return b.out[i].Name < b.out[j].Name
	})
	s.Messages = b.out
	return s, nil
}

type schemaBuilder struct {
	byType map[*message]string
	names  map[string]reflect.Type // proto name -> Go type, to catch collisions
	out    []Message
}

// protoMessageName is the proto name of a Go type: its name without the
// package, or a sanitized form of its spelling for unnamed types.
func protoMessageName(t reflect.Type) string {
	if t.Name() != "" {
		name := t.Name()
		if i := strings.IndexByte(name, '['); i >= 0 { // generic instance
			name = name[:i] + "_" + sanitize(name[i:])
		}
		return name
	}
	return "Wrapped_" + sanitize(t.String())
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "_") {
			b.WriteByte('_')
		}
	}
	return strings.TrimSuffix(b.String(), "_")
}

func (b *schemaBuilder) add(m *message) (string, error) {
	if name, ok := b.byType[m]; ok {
		return name, nil
	}
	name := protoMessageName(m.typ)
	if other, dup := b.names[name]; dup && other != m.typ {
		return "", fmt.Errorf("serde: types %s and %s both map to proto message %s; rename one", other, m.typ, name)
	}
	b.names[name] = m.typ
	b.byType[m] = name
	sm := Message{Name: name, GoName: m.typ.String(), KeepsUnknown: m.hasUnkwn, Wrapper: m.synth,
		Reserved: append([]Range(nil), m.reserved...), ReservedNames: append([]string(nil), m.reservedNames...)}
	for _, g := range m.oneofs {
		sm.Oneofs = append(sm.Oneofs, g.name)
	}
	idx := len(b.out)
	b.out = append(b.out, sm)
	fields := make([]Field, 0, len(m.fields))
	for i := range m.fields {
		f := &m.fields[i]
		sf := Field{Number: f.num, Name: f.protoName, GoName: f.goName}
		if f.oneof != nil {
			sf.Oneof = f.oneof.name
		}
		switch f.card {
		case cPointer:
			sf.Card = Optional
		case cSlice:
			sf.Card = Repeated
		case cMap:
			sf.Card = Map
		}
		elem := f
		if f.card == cMap {
			sf.MapKey = exportKind(f.mapKey)
			sf.KeyBits = intBits(f.mapKey)
			elem = f.mapVal
		}
		sf.Kind = exportKind(elem)
		sf.Bits = intBits(elem)
		sf.GoType = elem.elemType.String()
		switch sf.Kind {
		case KindMessage:
			nested, err := b.add(elem.msg)
			if err != nil {
				return "", err
			}
			sf.Type = nested
		case KindEnum:
			sf.Type = protoMessageName(elem.elemType)
		case KindCustom:
			sf.Codec = elem.cust.state()
		}
		fields = append(fields, sf)
	}
	b.out[idx].Fields = fields
	return name, nil
}

// exportKind maps a compiled element to its schema kind. A defined Go type
// whose underlying type is int32 with the plain encoding is an enum.
func exportKind(f *field) Kind {
	switch f.kind {
	case kInt32:
		if t := f.elemType; t.Kind() == reflect.Int32 && t.PkgPath() != "" && t.Name() != "" {
			return KindEnum
		}
		return KindInt32
	case kTime:
		return KindTimestamp
	case kDuration:
		return KindDuration
	case kCustom:
		return KindCustom
	}
	return Kind(f.kind) + 1 // internal kinds up to kMessage line up with Kind-1
}

func intBits(f *field) uint32 {
	switch f.kind {
	case kInt32, kInt64, kUint32, kUint64, kSint32, kSint64, kFixed32, kFixed64, kSfixed32, kSfixed64:
		return uint32(f.size) * 8
	}
	return 0
}

// Message returns the message named name, or nil.
func (s *Schema) Message(name string) *Message {
	for i := range s.Messages {
		if s.Messages[i].Name == name {
			return &s.Messages[i]
		}
	}
	return nil
}

// Field returns the field numbered num, or nil.
func (m *Message) Field(num uint32) *Field {
	for i := range m.Fields {
		if m.Fields[i].Number == num {
			return &m.Fields[i]
		}
	}
	return nil
}

// IsReserved reports whether m declares num reserved.
func (m *Message) IsReserved(num uint32) bool {
	for _, r := range m.Reserved {
		if num >= r.From && num <= r.To {
			return true
		}
	}
	return false
}

// Validate checks that s is well formed: the root and every referenced
// message exist, numbers are in range and unique, kinds and cardinalities are
// known. Schemas read from storage are validated before use.
func (s *Schema) Validate() error {
	if s.Message(s.Root) == nil {
		return fmt.Errorf("serde: schema root %q is not among its %d messages", s.Root, len(s.Messages))
	}
	seenMsg := map[string]bool{}
	for _, m := range s.Messages {
		if m.Name == "" {
			return fmt.Errorf("serde: schema has a message without a name")
		}
		if seenMsg[m.Name] {
			return fmt.Errorf("serde: schema has two messages named %s", m.Name)
		}
		seenMsg[m.Name] = true
		if err := m.validateOneofs(); err != nil {
			return err
		}
		nums := map[uint32]bool{}
		for _, f := range m.Fields {
			where := fmt.Sprintf("%s.%s (%d)", m.Name, f.Name, f.Number)
			if f.Number < 1 || f.Number > maxFieldNumber {
				return fmt.Errorf("serde: schema field %s: number out of range", where)
			}
			if nums[f.Number] {
				return fmt.Errorf("serde: schema message %s uses number %d twice", m.Name, f.Number)
			}
			nums[f.Number] = true
			if f.Kind <= KindInvalid || int(f.Kind) >= len(kindNames) {
				return fmt.Errorf("serde: schema field %s: invalid kind %d", where, int32(f.Kind))
			}
			if f.Card < Singular || f.Card > Map {
				return fmt.Errorf("serde: schema field %s: invalid cardinality %d", where, int32(f.Card))
			}
			if f.Card == Map && (f.MapKey <= KindInvalid || f.MapKey > KindString || f.MapKey == KindFloat || f.MapKey == KindDouble) {
				return fmt.Errorf("serde: schema field %s: invalid map key kind %d", where, int32(f.MapKey))
			}
			if f.Kind == KindMessage && s.Message(f.Type) == nil {
				return fmt.Errorf("serde: schema field %s refers to message %q, which the schema lacks", where, f.Type)
			}
			if f.Kind == KindCustom && f.Codec == nil {
				return fmt.Errorf("serde: schema field %s has kind custom but no codec", where)
			}
		}
	}
	return nil
}

// validateOneofs checks that m's oneofs are named and declared once, have
// members, and that members are optional fields of a declared oneof.
func (m *Message) validateOneofs() error {
	members := map[string]int{}
	for _, g := range m.Oneofs {
		if !isProtoIdent(g) {
			return fmt.Errorf("serde: schema message %s: oneof name %q is not a proto identifier", m.Name, g)
		}
		if _, dup := members[g]; dup {
			return fmt.Errorf("serde: schema message %s declares oneof %s twice", m.Name, g)
		}
		members[g] = 0
	}
	for _, f := range m.Fields {
		if slices.Contains(m.Oneofs, f.Name) {
			return fmt.Errorf("serde: schema message %s has a field and a oneof both named %s", m.Name, f.Name)
		}
		if f.Oneof == "" {
			continue
		}
		where := fmt.Sprintf("%s.%s (%d)", m.Name, f.Name, f.Number)
		if _, ok := members[f.Oneof]; !ok {
			return fmt.Errorf("serde: schema field %s is in oneof %s, which the message does not declare", where, f.Oneof)
		}
		if f.Card != Optional {
			return fmt.Errorf("serde: schema field %s is in oneof %s but is %s, not optional", where, f.Oneof, f.Card)
		}
		members[f.Oneof]++
	}
	for _, g := range m.Oneofs {
		if members[g] == 0 {
			return fmt.Errorf("serde: schema message %s declares oneof %s without members", m.Name, g)
		}
	}
	return nil
}

// schemaMagic starts the binary form of a Schema; the byte after it is the
// format version.
const (
	schemaMagic   = "EDSC"
	schemaVersion = 1
)

// MarshalBinary encodes s: a magic word, a format version, the protobuf
// bytes of s and a CRC-32C of everything before it.
func (s Schema) MarshalBinary() ([]byte, error) {
	b := append([]byte(schemaMagic), schemaVersion)
	b, err := schemaCodec().Append(b, &s)
	if err != nil {
		return nil, err
	}
	return appendFixed32(b, crc32c(b)), nil
}

// UnmarshalBinary decodes bytes written by MarshalBinary and validates the
// result. Corrupt or truncated input is an error.
func (s *Schema) UnmarshalBinary(b []byte) error {
	if len(b) < len(schemaMagic)+1+4 {
		return fmt.Errorf("serde: schema blob of %d bytes is truncated", len(b))
	}
	if string(b[:len(schemaMagic)]) != schemaMagic {
		return fmt.Errorf("serde: not a schema blob (magic %q, want %q)", b[:len(schemaMagic)], schemaMagic)
	}
	if v := b[len(schemaMagic)]; v != schemaVersion {
		return fmt.Errorf("serde: schema blob format version %d, this build reads %d", v, schemaVersion)
	}
	body, sum := b[:len(b)-4], b[len(b)-4:]
	want, _ := consumeFixed32(sum)
	if got := crc32c(body); got != want {
		return fmt.Errorf("serde: schema blob checksum mismatch (stored %08x, computed %08x): corrupt or truncated", want, got)
	}
	var out Schema
	if err := schemaCodec().Decode(body[len(schemaMagic)+1:], &out); err != nil {
		return fmt.Errorf("serde: schema blob: %w", err)
	}
	if err := out.Validate(); err != nil {
		return err
	}
	*s = out
	return nil
}

// JSON returns s as indented JSON, for people.
func (s Schema) JSON() string {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Sprintf(`{"error": %q}`, err.Error())
	}
	return string(b)
}

// ParseSchema reads a schema in either form: JSON (as printed by JSON) or
// binary (as written by MarshalBinary).
func ParseSchema(b []byte) (Schema, error) {
	var s Schema
	trimmed := strings.TrimSpace(string(b))
	if strings.HasPrefix(trimmed, "{") {
		if err := json.Unmarshal(b, &s); err != nil {
			return Schema{}, fmt.Errorf("serde: schema JSON: %w", err)
		}
		if err := s.Validate(); err != nil {
			return Schema{}, err
		}
		return s, nil
	}
	err := s.UnmarshalBinary(b)
	return s, err
}

// Fingerprint is the SHA-256 of the schema's canonical protobuf encoding, in
// hex. The encoding is deterministic, so the same schema has the same
// fingerprint in every process and Go version.
func (s Schema) Fingerprint() string {
	b, err := schemaCodec().Append(nil, &s)
	if err != nil {
		return "invalid:" + err.Error()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func schemaCodec() Codec[Schema] {
	c, err := For[Schema]()
	if err != nil {
		panic("serde: the Schema type does not compile: " + err.Error()) // a bug in this package
	}
	return c
}
