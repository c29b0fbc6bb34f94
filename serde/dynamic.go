package serde

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// DynamicMessage is a message decoded by DecodeDynamic: its fields in the
// order of its schema (then unknown fields in the order met), with their
// values. It marshals to JSON as an object in that order.
type DynamicMessage struct {
	Name   string // the schema's message name
	Fields []DynamicField
}

// DynamicField is one field of a DynamicMessage. Value is, by kind: bool;
// int64 for int32, int64, sint32, sint64, sfixed32, sfixed64 and enum;
// uint64 for uint32, uint64, fixed32, fixed64; float32; float64; string;
// []byte for bytes and custom kinds; time.Time for Timestamp;
// time.Duration for Duration; *DynamicMessage for messages (nil for an
// absent singular message). Repeated fields hold []any, maps DynamicMap.
// An absent singular scalar holds its zero value, an absent optional field
// is left out. A field the schema does not know has Name "" and holds its
// raw value: uint64 for varints and fixed64, uint32 for fixed32, []byte.
type DynamicField struct {
	Name   string
	Number uint32
	Value  any
}

// DynamicMap is a decoded map field: its entries in the order met, a key
// met again replacing the earlier entry's value (as protobuf decoders do).
type DynamicMap []DynamicMapEntry

// DynamicMapEntry is one entry of a DynamicMap; Key is a bool, int64,
// uint64 or string.
type DynamicMapEntry struct {
	Key, Value any
}

// Get returns the value of the field named name, and whether there is one.
func (m *DynamicMessage) Get(name string) (any, bool) {
	if m == nil {
		return nil, false
	}
	for _, f := range m.Fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return nil, false
}

// DecodeDynamic decodes the protobuf bytes b of the root message of s
// without its Go type, using only the schema: what a tool does with
// state whose job code it does not have. It never panics on bad input; its
// errors name the field path and byte offset. A known field that arrives
// with another wire type is kept as an unknown field, as Decode does.
func DecodeDynamic(s Schema, b []byte) (*DynamicMessage, error) {
	msgs := make(map[string]*Message, len(s.Messages))
	for i := range s.Messages {
		msgs[s.Messages[i].Name] = &s.Messages[i]
	}
	root := msgs[s.Root]
	if root == nil {
		return nil, fmt.Errorf("serde: schema root %q is not among its %d messages", s.Root, len(s.Messages))
	}
	d := dynDecoder{msgs: msgs, src: b}
	m, err := d.message(root, 0, len(b), 0)
	if err != nil {
		return nil, err
	}
	return m, nil
}

type dynDecoder struct {
	msgs map[string]*Message
	src  []byte
}

// message decodes src[start:end] as m.
func (d *dynDecoder) message(m *Message, start, end, depth int) (*DynamicMessage, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("serde: %s at byte %d: nested more than %d levels", m.Name, start, maxDepth)
	}
	out := &DynamicMessage{Name: m.Name, Fields: make([]DynamicField, len(m.Fields))}
	present := make([]bool, len(m.Fields))
	for i, f := range m.Fields {
		out.Fields[i] = DynamicField{Name: f.Name, Number: f.Number}
	}
	var unknown []DynamicField
	for i := start; i < end; {
		tagAt := i
		num, wt, n := protowire.ConsumeTag(d.src[i:end])
		if n < 0 {
			return nil, fmt.Errorf("serde: %s: field key at byte %d: %v", m.Name, tagAt, protowire.ParseError(n))
		}
		i += n
		fi := fieldIndex(m, uint32(num))
		if fi >= 0 && wireMatches(&m.Fields[fi], wt) {
			f := &m.Fields[fi]
			next, err := d.field(f, &out.Fields[fi], present[fi], wt, i, end, depth)
			if err != nil {
				return nil, fmt.Errorf("serde: %s.%s (%d) at byte %d: %w", m.Name, f.Name, f.Number, tagAt, unwrapSerde(err))
			}
			present[fi] = true
			i = next
			continue
		}
		v, next, err := d.unknown(num, wt, i, end)
		if err != nil {
			return nil, fmt.Errorf("serde: %s: field %d at byte %d: %w", m.Name, num, tagAt, err)
		}
		unknown = append(unknown, DynamicField{Number: uint32(num), Value: v})
		i = next
	}
	// Defaults for what was absent; optional fields absent are left out.
	kept := out.Fields[:0]
	for i, f := range m.Fields {
		if !present[i] {
			if f.Card == Optional {
				continue
			}
			out.Fields[i].Value = d.zero(&f)
		} else if f.Card == Map {
			out.Fields[i].Value = dedupMap(out.Fields[i].Value.(DynamicMap))
		}
		kept = append(kept, out.Fields[i])
	}
	out.Fields = append(kept, unknown...)
	return out, nil
}

// dedupMap keeps one entry per key, at the place of its first, with the
// value of its last (a later entry replaces an earlier one in protobuf).
func dedupMap(mp DynamicMap) DynamicMap {
	if len(mp) < 2 {
		return mp
	}
	at := make(map[any]int, len(mp))
	out := mp[:0]
	for _, e := range mp {
		if j, ok := at[e.Key]; ok {
			out[j].Value = e.Value
			continue
		}
		at[e.Key] = len(out)
		out = append(out, e)
	}
	return out
}

// unwrapSerde drops the "serde: " prefix of a nested error, so that a path
// reads "serde: A.b (2) at byte 3: B.c (1) at byte 1: …".
func unwrapSerde(err error) error {
	s := err.Error()
	if len(s) > 7 && s[:7] == "serde: " {
		return errors.New(s[7:])
	}
	return err
}

func fieldIndex(m *Message, num uint32) int {
	for i := range m.Fields {
		if m.Fields[i].Number == num {
			return i
		}
	}
	return -1
}

// wireMatches reports whether wire type wt can carry field f: its
// element's type, or bytes for a packed repeated scalar.
func wireMatches(f *Field, wt protowire.Type) bool {
	want := protowire.Type(f.Kind.WireType())
	if f.Card == Map {
		return wt == protowire.BytesType
	}
	if wt == want {
		return true
	}
	return f.Card == Repeated && wt == protowire.BytesType && want != protowire.BytesType
}

// field decodes one occurrence of f starting at src[i] (after its tag) into
// out and returns where it ends.
func (d *dynDecoder) field(f *Field, out *DynamicField, seen bool, wt protowire.Type, i, end, depth int) (int, error) {
	switch f.Card {
	case Map:
		b, n := protowire.ConsumeBytes(d.src[i:end])
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		k, v, err := d.entry(f, i+n-len(b), i+n, depth)
		if err != nil {
			return 0, err
		}
		mp, _ := out.Value.(DynamicMap)
		if !seen {
			mp = nil
		}
		out.Value = append(mp, DynamicMapEntry{Key: k, Value: v}) // duplicates go in dedupMap
		return i + n, nil
	case Repeated:
		list, _ := out.Value.([]any)
		if !seen {
			list = nil
		}
		if wt == protowire.BytesType && protowire.Type(f.Kind.WireType()) != protowire.BytesType {
			b, n := protowire.ConsumeBytes(d.src[i:end])
			if n < 0 {
				return 0, protowire.ParseError(n)
			}
			for j, e := i+n-len(b), i+n; j < e; {
				v, next, err := d.value(f.Kind, f.Type, protowire.Type(f.Kind.WireType()), j, e, depth)
				if err != nil {
					return 0, fmt.Errorf("[%d]: %w", len(list), err)
				}
				list = append(list, v)
				j = next
			}
			out.Value = list
			return i + n, nil
		}
		v, next, err := d.value(f.Kind, f.Type, wt, i, end, depth)
		if err != nil {
			return 0, fmt.Errorf("[%d]: %w", len(list), err)
		}
		out.Value = append(list, v)
		return next, nil
	}
	v, next, err := d.value(f.Kind, f.Type, wt, i, end, depth)
	if err != nil {
		return 0, err
	}
	out.Value = v
	return next, nil
}

// entry decodes a map entry message in src[start:end].
func (d *dynDecoder) entry(f *Field, start, end, depth int) (key, val any, err error) {
	haveKey, haveVal := false, false
	for i := start; i < end; {
		// Tags inside an entry are read as Decode reads them: any field
		// number other than 1 and 2 is skipped, 0 included.
		tag, n := protowire.ConsumeVarint(d.src[i:end])
		if n < 0 {
			return nil, nil, fmt.Errorf("map entry at byte %d: %v", i, protowire.ParseError(n))
		}
		num, wt := tag>>3, protowire.Type(tag&7)
		at := i
		i += n
		switch {
		case num == 1 && int(wt) == f.MapKey.WireType():
			key, i, err = d.value(f.MapKey, "", wt, i, end, depth)
			if err != nil {
				return nil, nil, fmt.Errorf("map key at byte %d: %w", at, err)
			}
			haveKey = true
		case num == 2 && int(wt) == f.Kind.WireType():
			val, i, err = d.value(f.Kind, f.Type, wt, i, end, depth)
			if err != nil {
				return nil, nil, fmt.Errorf("map value at byte %d: %w", at, err)
			}
			haveVal = true
		default:
			next, err := skipField(d.src, uint8(wt), num, i, end, depth)
			if err != nil {
				return nil, nil, fmt.Errorf("map entry field %d at byte %d: %v", num, at, err)
			}
			i = next
		}
	}
	if !haveKey {
		key = d.zeroKind(f.MapKey, "")
	}
	if !haveVal {
		if f.Kind == KindMessage {
			// An entry without its value holds the empty message.
			if mt := d.msgs[f.Type]; mt != nil {
				val, err = d.message(mt, end, end, depth+1)
				if err != nil {
					return nil, nil, err
				}
			}
		} else {
			val = d.zeroKind(f.Kind, f.Type)
		}
	}
	switch key.(type) {
	case bool, int64, uint64, string:
	default:
		return nil, nil, fmt.Errorf("map key of kind %s", f.MapKey)
	}
	return key, val, nil
}

// value decodes one element of kind k that arrived with wire type wt.
func (d *dynDecoder) value(k Kind, typ string, wt protowire.Type, i, end, depth int) (any, int, error) {
	b := d.src[i:end]
	switch wt {
	case protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		switch k {
		case KindBool:
			return v != 0, i + n, nil
		case KindInt32, KindEnum:
			return int64(int32(v)), i + n, nil
		case KindInt64:
			return int64(v), i + n, nil
		case KindUint32:
			return uint64(uint32(v)), i + n, nil
		case KindUint64:
			return v, i + n, nil
		case KindSint32:
			return int64(int32(protowire.DecodeZigZag(v & math.MaxUint32))), i + n, nil
		case KindSint64:
			return protowire.DecodeZigZag(v), i + n, nil
		}
	case protowire.Fixed32Type:
		v, n := protowire.ConsumeFixed32(b)
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		switch k {
		case KindFixed32:
			return uint64(v), i + n, nil
		case KindSfixed32:
			return int64(int32(v)), i + n, nil
		case KindFloat:
			return math.Float32frombits(v), i + n, nil
		}
	case protowire.Fixed64Type:
		v, n := protowire.ConsumeFixed64(b)
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		switch k {
		case KindFixed64:
			return v, i + n, nil
		case KindSfixed64:
			return int64(v), i + n, nil
		case KindDouble:
			return math.Float64frombits(v), i + n, nil
		}
	case protowire.BytesType:
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		s, e := i+n-len(v), i+n
		switch k {
		case KindString:
			if !utf8.Valid(v) {
				return nil, 0, errors.New("invalid UTF-8")
			}
			return string(v), e, nil
		case KindBytes, KindCustom:
			return append([]byte{}, v...), e, nil
		case KindMessage:
			mt := d.msgs[typ]
			if mt == nil {
				return nil, 0, fmt.Errorf("message %q is not in the schema", typ)
			}
			m, err := d.message(mt, s, e, depth+1)
			if err != nil {
				return nil, 0, err
			}
			return m, e, nil
		case KindTimestamp, KindDuration:
			sec, nanos, err := secondsNanos(v)
			if err != nil {
				return nil, 0, err
			}
			if k == KindTimestamp {
				return time.Unix(sec, int64(nanos)).UTC(), e, nil
			}
			const maxSec = int64(math.MaxInt64 / time.Second)
			dur := time.Duration(sec) * time.Second
			if sec > maxSec || sec < -maxSec ||
				nanos > 0 && dur > math.MaxInt64-time.Duration(nanos) || nanos < 0 && dur < math.MinInt64-time.Duration(nanos) {
				return nil, 0, fmt.Errorf("duration of %ds %dns is out of range", sec, nanos)
			}
			return dur + time.Duration(nanos), e, nil
		}
	}
	return nil, 0, fmt.Errorf("wire type %d for kind %s", wt, k)
}

// secondsNanos decodes a google.protobuf.Timestamp or Duration body.
func secondsNanos(b []byte) (sec int64, nanos int32, err error) {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, 0, protowire.ParseError(n)
		}
		b = b[n:]
		if (num == 1 || num == 2) && wt == protowire.VarintType {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return 0, 0, protowire.ParseError(m)
			}
			if num == 1 {
				sec = int64(v)
			} else {
				nanos = int32(v)
			}
			b = b[m:]
			continue
		}
		m, err := skipField(b, uint8(wt), uint64(num), 0, len(b), 0)
		if err != nil {
			return 0, 0, errors.New(err.Error())
		}
		b = b[m:]
	}
	if nanos <= -1e9 || nanos >= 1e9 {
		return 0, 0, fmt.Errorf("nanos %d out of range", nanos)
	}
	return sec, nanos, nil
}

// unknown reads a field the schema does not know and returns its raw value.
func (d *dynDecoder) unknown(num protowire.Number, wt protowire.Type, i, end int) (any, int, error) {
	b := d.src[i:end]
	switch wt {
	case protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		return v, i + n, nil
	case protowire.Fixed32Type:
		v, n := protowire.ConsumeFixed32(b)
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		return v, i + n, nil
	case protowire.Fixed64Type:
		v, n := protowire.ConsumeFixed64(b)
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		return v, i + n, nil
	case protowire.BytesType:
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		return append([]byte{}, v...), i + n, nil
	}
	next, err := skipField(d.src, uint8(wt), uint64(num), i, end, 0) // a group, or an invalid wire type
	if err != nil {
		return nil, 0, errors.New(err.Error())
	}
	return append([]byte{}, d.src[i:next]...), next, nil
}

// zero is the value of an absent field.
func (d *dynDecoder) zero(f *Field) any {
	switch f.Card {
	case Repeated:
		return []any{}
	case Map:
		return DynamicMap{}
	}
	return d.zeroKind(f.Kind, f.Type)
}

func (d *dynDecoder) zeroKind(k Kind, typ string) any {
	switch k {
	case KindBool:
		return false
	case KindInt32, KindInt64, KindSint32, KindSint64, KindSfixed32, KindSfixed64, KindEnum:
		return int64(0)
	case KindUint32, KindUint64, KindFixed32, KindFixed64:
		return uint64(0)
	case KindFloat:
		return float32(0)
	case KindDouble:
		return float64(0)
	case KindString:
		return ""
	case KindBytes, KindCustom:
		return []byte{}
	case KindTimestamp:
		return time.Time{}
	case KindDuration:
		return time.Duration(0)
	}
	return (*DynamicMessage)(nil) // an absent message
}

// MarshalJSON writes m as a JSON object with its fields in order. Unknown
// fields are named by number ("#7"), bytes are base64, 64-bit integers
// are numbers, NaN and infinities are the strings "NaN", "Infinity" and
// "-Infinity", timestamps are RFC 3339 strings and durations Go's form
// ("1.5s").
func (m *DynamicMessage) MarshalJSON() ([]byte, error) {
	return AppendDynamicJSON(nil, m), nil
}

// MarshalJSON writes the map as a JSON object whose keys are the map keys
// as text.
func (mp DynamicMap) MarshalJSON() ([]byte, error) {
	return AppendDynamicJSON(nil, mp), nil
}

// AppendDynamicJSON appends the JSON form of a value of DecodeDynamic's
// result (see DynamicMessage.MarshalJSON) to dst.
func AppendDynamicJSON(dst []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...)
	case *DynamicMessage:
		if v == nil {
			return append(dst, "null"...)
		}
		dst = append(dst, '{')
		for i, f := range v.Fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			name := f.Name
			if name == "" {
				name = "#" + strconv.FormatUint(uint64(f.Number), 10)
			}
			dst = appendJSONString(dst, name)
			dst = append(dst, ':')
			dst = AppendDynamicJSON(dst, f.Value)
		}
		return append(dst, '}')
	case DynamicMap:
		dst = append(dst, '{')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, fmt.Sprint(e.Key))
			dst = append(dst, ':')
			dst = AppendDynamicJSON(dst, e.Value)
		}
		return append(dst, '}')
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendDynamicJSON(dst, e)
		}
		return append(dst, ']')
	case bool:
		return strconv.AppendBool(dst, v)
	case int64:
		return strconv.AppendInt(dst, v, 10)
	case uint64:
		return strconv.AppendUint(dst, v, 10)
	case uint32:
		return strconv.AppendUint(dst, uint64(v), 10)
	case float32:
		return appendJSONFloat(dst, float64(v), 32)
	case float64:
		return appendJSONFloat(dst, v, 64)
	case string:
		return appendJSONString(dst, v)
	case []byte:
		return appendJSONString(dst, base64.StdEncoding.EncodeToString(v))
	case time.Time:
		return appendJSONString(dst, v.Format(time.RFC3339Nano))
	case time.Duration:
		return appendJSONString(dst, v.String())
	}
	return appendJSONString(dst, fmt.Sprint(v))
}

func appendJSONFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

// appendJSONString quotes s as JSON: strconv.Quote's escapes (\x, \U) are
// not JSON, so control characters get \u escapes and the rest is UTF-8.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r < 0x20 || r == 0x2028 || r == 0x2029:
			dst = append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		default:
			dst = utf8.AppendRune(dst, r)
		}
	}
	return append(dst, '"')
}
