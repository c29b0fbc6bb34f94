package inspect

import (
	"fmt"
	"strings"

	"github.com/eddyflow/eddy/serde"
)

// SchemaText renders a stored schema as .proto-like text: every message,
// the root first, with each field's cardinality, kind, name and number,
// and the Go types the schema records as comments. It is for people; the
// exact form is `eddy schema show`'s JSON.
func SchemaText(s serde.Schema) string {
	var b strings.Builder
	for i, m := range s.Messages {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "message %s {", m.Name)
		var notes []string
		if m.GoName != "" {
			notes = append(notes, m.GoName)
		}
		if m.Wrapper {
			notes = append(notes, "wrapper of a non-struct type")
		}
		if m.KeepsUnknown {
			notes = append(notes, "keeps unknown fields")
		}
		if len(notes) > 0 {
			fmt.Fprintf(&b, "  // %s", strings.Join(notes, "; "))
		}
		b.WriteByte('\n')
		for _, f := range m.Fields {
			fmt.Fprintf(&b, "  %s %s = %d;", fieldType(f), f.Name, f.Number)
			if c := fieldComment(f); c != "" {
				fmt.Fprintf(&b, "  // %s", c)
			}
			b.WriteByte('\n')
		}
		for _, r := range m.Reserved {
			if r.From == r.To {
				fmt.Fprintf(&b, "  reserved %d;\n", r.From)
			} else {
				fmt.Fprintf(&b, "  reserved %d to %d;\n", r.From, r.To)
			}
		}
		if len(m.ReservedNames) > 0 {
			fmt.Fprintf(&b, "  reserved %q;\n", m.ReservedNames)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

func kindName(k serde.Kind, typ string) string {
	switch k {
	case serde.KindMessage, serde.KindEnum:
		return typ
	case serde.KindCustom:
		return "bytes"
	}
	return k.String()
}

func fieldType(f serde.Field) string {
	elem := kindName(f.Kind, f.Type)
	switch f.Card {
	case serde.Optional:
		return "optional " + elem
	case serde.Repeated:
		return "repeated " + elem
	case serde.Map:
		return fmt.Sprintf("map<%s, %s>", f.MapKey, elem)
	}
	return elem
}

func fieldComment(f serde.Field) string {
	var c []string
	if f.GoType != "" && f.GoType != kindName(f.Kind, f.Type) && !naturalGoType[f.Kind.String()+" "+f.GoType] {
		c = append(c, "Go "+f.GoType)
	}
	if f.Codec != nil {
		c = append(c, fmt.Sprintf("custom codec %s v%d", f.Codec.Name, f.Codec.Version))
	}
	return strings.Join(c, ", ")
}

// naturalGoType lists the Go types a kind maps from that go without saying.
var naturalGoType = map[string]bool{
	"double float64": true, "float float32": true, "int64 int": true, "bytes []uint8": true,
}
