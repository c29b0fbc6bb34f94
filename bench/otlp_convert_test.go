package bench

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Values move between the otlpserde structs and protobuf messages (OTLP's
// generated code, or otlpvt's) by reflection, matching fields by their proto
// numbers, so one converter serves every OTLP message and both generated
// packages. It is independent of serde: it reads only the struct tags'
// numbers.

// goField is a struct field with its proto number and oneof group.
type goField struct {
	index int
	num   protoreflect.FieldNumber
	oneof string
}

// goFields lists the tagged fields of t, skipping blank (reserved) ones.
func goFields(t reflect.Type) []goField {
	var out []goField
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("proto")
		if sf.Name == "_" || tag == "" || tag == "-" || tag == "unknown" {
			continue
		}
		parts := strings.Split(tag, ",")
		n, err := strconv.Atoi(parts[0])
		if err != nil {
			panic(fmt.Sprintf("%s.%s: tag %q", t, sf.Name, tag))
		}
		f := goField{index: i, num: protoreflect.FieldNumber(n)}
		for _, p := range parts[1:] {
			if g, ok := strings.CutPrefix(p, "oneof="); ok {
				f.oneof = g
			}
		}
		out = append(out, f)
	}
	return out
}

// toPB sets the fields of m from the Go struct gv.
func otlpToPB(gv reflect.Value, m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for _, gf := range goFields(gv.Type()) {
		fd := fields.ByNumber(gf.num)
		if fd == nil {
			panic(fmt.Sprintf("%s has no field %d", m.Descriptor().FullName(), gf.num))
		}
		fv := gv.Field(gf.index)
		switch {
		case fd.IsList():
			list := m.Mutable(fd).List()
			for j := range fv.Len() {
				list.Append(elemToPB(fd, fv.Index(j), list.NewElement))
			}
		case fv.Kind() == reflect.Pointer:
			if !fv.IsNil() {
				m.Set(fd, elemToPB(fd, fv.Elem(), func() protoreflect.Value { return m.NewField(fd) }))
			}
		default:
			m.Set(fd, scalarToPB(fd, fv))
		}
	}
}

func elemToPB(fd protoreflect.FieldDescriptor, v reflect.Value, newMsg func() protoreflect.Value) protoreflect.Value {
	if fd.Message() == nil {
		return scalarToPB(fd, v)
	}
	pv := newMsg()
	otlpToPB(v, pv.Message())
	return pv
}

func scalarToPB(fd protoreflect.FieldDescriptor, v reflect.Value) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(v.Bool())
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(v.Int()))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(v.Int()))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(v.Int())
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(v.Uint()))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(v.Uint())
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(v.Float()))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(v.Float())
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(v.String())
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(bytes.Clone(v.Bytes()))
	}
	panic("unhandled kind " + fd.Kind().String())
}

// ---- random values ----

// otlpGen fills otlpserde structs with random values by reflection, biased
// to the edges (zero, limits, -0, NaN, empty and nil containers, non-ASCII
// strings): each oneof gets none or one member, set to a zero value now and
// then (it is still written); singular messages are nil or not.
type otlpGen struct{ r *rand.Rand }

func newOTLPGen(seed uint64) *otlpGen {
	return &otlpGen{r: rand.New(rand.NewPCG(seed, 0x07e1))}
}

func (g *otlpGen) chance(p float64) bool { return g.r.Float64() < p }

// maxGenDepth bounds the nesting of messages (AnyValue is recursive).
const maxGenDepth = 7

// fill sets the struct v (addressable) to a random value.
func (g *otlpGen) fill(v reflect.Value, depth int) {
	fields := goFields(v.Type())
	groups := map[string][]goField{}
	var order []string
	for _, f := range fields {
		if f.oneof == "" {
			g.value(v.Field(f.index), depth)
			continue
		}
		if _, ok := groups[f.oneof]; !ok {
			order = append(order, f.oneof)
		}
		groups[f.oneof] = append(groups[f.oneof], f)
	}
	for _, name := range order {
		members := groups[name]
		k := g.r.IntN(len(members) + 1)
		if k == len(members) {
			continue // none set
		}
		fv := v.Field(members[k].index)
		fv.Set(reflect.New(fv.Type().Elem()))
		if g.chance(0.15) {
			continue // the zero value, set
		}
		if fv.Type().Elem().Kind() == reflect.Struct && depth >= maxGenDepth {
			continue
		}
		g.value(fv.Elem(), depth+1)
	}
}

// value sets v (addressable) to a random value of its type.
func (g *otlpGen) value(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if g.chance(0.3) || v.Type().Elem().Kind() == reflect.Struct && depth >= maxGenDepth {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		g.value(v.Elem(), depth+1)
	case reflect.Struct:
		g.fill(v, depth)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes(g.bytes())
			return
		}
		n := g.count(depth)
		if n < 0 {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0)) // empty, not nil: written the same
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for j := range n {
			g.value(s.Index(j), depth+1)
		}
		v.Set(s)
	case reflect.String:
		v.SetString(g.str())
	case reflect.Bool:
		v.SetBool(g.r.IntN(2) == 1)
	case reflect.Int32, reflect.Int64:
		v.SetInt(g.signed(v.Type().Bits()))
	case reflect.Uint32, reflect.Uint64:
		v.SetUint(g.unsigned(v.Type().Bits()))
	case reflect.Float64:
		v.SetFloat(g.f64())
	default:
		panic("otlpGen: unhandled kind " + v.Kind().String())
	}
}

// count is the length of a repeated field: fewer the deeper it is; -1 is an
// empty non-nil slice.
func (g *otlpGen) count(depth int) int {
	switch {
	case g.chance(0.4):
		return 0
	case g.chance(0.1):
		return -1
	case depth > 4:
		return 1
	}
	return 1 + g.r.IntN(3)
}

func (g *otlpGen) signed(bits int) int64 {
	maxV := int64(uint64(1)<<(bits-1) - 1)
	switch g.r.IntN(5) {
	case 0:
		return 0
	case 1:
		edges := []int64{1, -1, -maxV - 1, maxV, 127, 128, -129, 16384, math.MaxInt32, math.MinInt32}
		return edges[g.r.IntN(len(edges))]
	}
	width := 1 + g.r.IntN(bits-1)
	u := int64(g.r.Uint64() >> (64 - width))
	if g.r.IntN(2) == 0 {
		return -u - 1
	}
	return u
}

func (g *otlpGen) unsigned(bits int) uint64 {
	maxV := uint64(math.MaxUint64) >> (64 - bits)
	switch g.r.IntN(5) {
	case 0:
		return 0
	case 1:
		edges := []uint64{1, maxV, 127, 128, 16383, 16384, math.MaxUint32}
		return min(edges[g.r.IntN(len(edges))], maxV)
	}
	return g.r.Uint64() >> (64 - 1 - g.r.IntN(bits))
}

func (g *otlpGen) f64() float64 {
	switch g.r.IntN(5) {
	case 0:
		return 0
	case 1:
		edges := []float64{math.Copysign(0, -1), 1, -1, 0.1, math.Inf(1), math.Inf(-1), math.NaN(),
			math.MaxFloat64, math.SmallestNonzeroFloat64}
		return edges[g.r.IntN(len(edges))]
	case 2:
		return math.Float64frombits(g.r.Uint64())
	}
	return g.r.NormFloat64() * 1000
}

func (g *otlpGen) str() string {
	switch g.r.IntN(6) {
	case 0:
		return ""
	case 1:
		edges := []string{"a", "é", "日本語", "🙂", "\x00", "service.name", strings.Repeat("x", 127), strings.Repeat("y", 128), strings.Repeat("ü", 100)}
		return edges[g.r.IntN(len(edges))]
	}
	n := g.r.IntN(40)
	var sb strings.Builder
	for range n {
		if g.chance(0.05) {
			sb.WriteRune(rune(0x80 + g.r.IntN(0x10000-0x80-0x800)))
		} else {
			sb.WriteByte(byte(' ' + g.r.IntN(95)))
		}
	}
	return strings.ToValidUTF8(sb.String(), "?")
}

func (g *otlpGen) bytes() []byte {
	switch g.r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, []int{8, 16, 1, 130}[g.r.IntN(4)])
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}
