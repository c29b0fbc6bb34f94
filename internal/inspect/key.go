package inspect

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/eddyflow/eddy/serde"
)

// stringWrapper reports whether a key schema is that of a string type
// (including named string types), whose keys the runtime stores as their
// bytes rather than serde-encoded (runtime.KeyEncoder).
func stringWrapper(s serde.Schema) (*serde.Field, bool) {
	root := s.Message(s.Root)
	if root == nil || !root.Wrapper || len(root.Fields) != 1 {
		return nil, false
	}
	f := &root.Fields[0]
	return f, f.Number == 1 && f.Card == serde.Singular && f.Kind == serde.KindString
}

// ParseKey turns the text of a key into the bytes the runtime stores and
// hashes for it, according to the operator's key schema: a string key is
// its text; a key of a scalar type (an integer, bool) is parsed and
// encoded as serde encodes it, a message with the value as field 1. Keys
// of struct types cannot be given as text.
func ParseKey(keySchema serde.Schema, text string) ([]byte, error) {
	if _, ok := stringWrapper(keySchema); ok {
		return []byte(text), nil
	}
	root := keySchema.Message(keySchema.Root)
	if root == nil || !root.Wrapper || len(root.Fields) != 1 || root.Fields[0].Card != serde.Singular {
		return nil, fmt.Errorf("keys of type %s are messages; only string, integer and bool keys can be given (dump all keys instead)", goName(keySchema))
	}
	f := root.Fields[0]
	var (
		v   uint64
		err error
	)
	switch f.Kind {
	case serde.KindBool:
		var b bool
		if b, err = strconv.ParseBool(text); b {
			v = 1
		}
	case serde.KindInt32, serde.KindInt64, serde.KindSint32, serde.KindSint64, serde.KindSfixed32, serde.KindSfixed64, serde.KindEnum:
		bits := int(f.Bits)
		if bits == 0 {
			bits = 64
			if f.Kind == serde.KindInt32 || f.Kind == serde.KindSint32 || f.Kind == serde.KindSfixed32 || f.Kind == serde.KindEnum {
				bits = 32
			}
		}
		var n int64
		n, err = strconv.ParseInt(text, 10, bits)
		switch f.Kind {
		case serde.KindSint32, serde.KindSint64:
			v = protowire.EncodeZigZag(n)
		case serde.KindSfixed32:
			v = uint64(uint32(int32(n)))
		default:
			v = uint64(n)
		}
	case serde.KindUint32, serde.KindUint64, serde.KindFixed32, serde.KindFixed64:
		bits := int(f.Bits)
		if bits == 0 {
			bits = 64
			if f.Kind == serde.KindUint32 || f.Kind == serde.KindFixed32 {
				bits = 32
			}
		}
		v, err = strconv.ParseUint(text, 10, bits)
	default:
		return nil, fmt.Errorf("keys of kind %s (type %s) cannot be given as text (dump all keys instead)", f.Kind, goName(keySchema))
	}
	if err != nil {
		return nil, fmt.Errorf("does not parse as a key of type %s: %v", goName(keySchema), err.(*strconv.NumError).Err)
	}
	if v == 0 {
		return []byte{}, nil // zero is not written
	}
	switch f.Kind.WireType() {
	case int(protowire.Fixed32Type):
		return protowire.AppendFixed32(protowire.AppendTag(nil, 1, protowire.Fixed32Type), uint32(v)), nil
	case int(protowire.Fixed64Type):
		return protowire.AppendFixed64(protowire.AppendTag(nil, 1, protowire.Fixed64Type), v), nil
	}
	return protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), v), nil
}

func goName(s serde.Schema) string {
	if m := s.Message(s.Root); m != nil && m.GoName != "" {
		return m.GoName
	}
	return s.Root
}
