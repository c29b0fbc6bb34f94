package serde_test

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/serde/internal/testpb"
)

// The interoperability suite: goAll mirrors testpb.All (internal/testpb/
// all.proto) field for field, and random values of it must encode to the
// bytes protoc-gen-go's code writes and decode from any bytes it reads.

const interopRounds = 500

// goColor mirrors the enum testpb.Color: a named int32.
type goColor int32

type goLeaf struct {
	Name  string  `proto:"1"`
	Value int64   `proto:"2,zigzag"`
	Nums  []int32 `proto:"3"`
	Data  []byte  `proto:"4"`
}

type goMiddle struct {
	Leaf    goLeaf            `proto:"1"` // by value: always written
	Leaves  []goLeaf          `proto:"2"`
	ByName  map[string]goLeaf `proto:"3,name=by_name"`
	ID      int32             `proto:"4,name=id"`
	OptLeaf *goLeaf           `proto:"5,name=opt_leaf"`
}

type goNested struct {
	A      int32     `proto:"1"`
	B      string    `proto:"2"`
	Middle *goMiddle `proto:"3"`
	Color  goColor   `proto:"4"`
	Tags   []string  `proto:"5"`
}

type goAll struct {
	FBool     bool    `proto:"1"`
	FInt32    int32   `proto:"2"`
	FInt64    int64   `proto:"3"`
	FUint32   uint32  `proto:"4"`
	FUint64   uint64  `proto:"5"`
	FSint32   int32   `proto:"6,zigzag"`
	FSint64   int64   `proto:"7,zigzag"`
	FFixed32  uint32  `proto:"8,fixed"`
	FFixed64  uint64  `proto:"9,fixed"`
	FSfixed32 int32   `proto:"10,fixed"`
	FSfixed64 int64   `proto:"11,fixed"`
	FFloat    float32 `proto:"12"`
	FDouble   float64 `proto:"13"`
	FString   string  `proto:"14"`
	FBytes    []byte  `proto:"15"`
	FEnum     goColor `proto:"16"`

	FInt8        int8   `proto:"17"`
	FInt16       int16  `proto:"18"`
	FInt         int    `proto:"19"`
	FUint8       uint8  `proto:"20"`
	FUint16      uint16 `proto:"21"`
	FUint        uint   `proto:"22"`
	FSint8       int8   `proto:"23,zigzag"`
	FSfixedInt   int    `proto:"24,fixed"`
	FFixedUint16 uint16 `proto:"25,fixed"`
	FFixedUint   uint   `proto:"26,fixed"`

	NestedValue goNested  `proto:"30"`
	NestedPtr   *goNested `proto:"31"`
	LeafPtr     *goLeaf   `proto:"32"`

	OptInt64   *int64   `proto:"40"`
	OptString  *string  `proto:"41"`
	OptBool    *bool    `proto:"42"`
	OptDouble  *float64 `proto:"43"`
	OptUint32  *uint32  `proto:"44"`
	OptSint32  *int32   `proto:"45,zigzag"`
	OptFixed64 *uint64  `proto:"46,fixed"`
	OptFloat   *float32 `proto:"47"`
	OptEnum    *goColor `proto:"48"`
	OptBytes   *[]byte  `proto:"49"`

	RBool     []bool    `proto:"50"`
	RInt32    []int32   `proto:"51"`
	RInt64    []int64   `proto:"52"`
	RUint32   []uint32  `proto:"53"`
	RUint64   []uint64  `proto:"54"`
	RSint32   []int32   `proto:"55,zigzag"`
	RSint64   []int64   `proto:"56,zigzag"`
	RFixed32  []uint32  `proto:"57,fixed"`
	RFixed64  []uint64  `proto:"58,fixed"`
	RSfixed32 []int32   `proto:"59,fixed"`
	RSfixed64 []int64   `proto:"60,fixed"`
	RFloat    []float32 `proto:"61"`
	RDouble   []float64 `proto:"62"`
	REnum     []goColor `proto:"63"`
	RInt8     []int8    `proto:"64"`
	RInt16    []int16   `proto:"65"`
	RInt      []int     `proto:"66"`
	RUint16   []uint16  `proto:"67"`
	RUint     []uint    `proto:"68"`

	RString    []string        `proto:"70"`
	RBytes     [][]byte        `proto:"71"`
	RNested    []goNested      `proto:"72"`
	RLeafPtr   []*goLeaf       `proto:"73"`
	RTimestamp []time.Time     `proto:"74"`
	RDuration  []time.Duration `proto:"75"`

	MStringString    map[string]string       `proto:"80"`
	MInt32Int64      map[int32]int64         `proto:"81"`
	MInt64Nested     map[int64]goNested      `proto:"82"`
	MBoolString      map[bool]string         `proto:"83"`
	MUint64Bytes     map[uint64][]byte       `proto:"84"`
	MInt16String     map[int16]string        `proto:"85"`
	MUintDouble      map[uint]float64        `proto:"86"`
	MStringLeafPtr   map[string]*goLeaf      `proto:"87"`
	MUint32Enum      map[uint32]goColor      `proto:"88"`
	MInt32Float      map[int32]float32       `proto:"89"`
	MIntInt          map[int]int             `proto:"90"`
	MStringBool      map[string]bool         `proto:"91"`
	MUint8Uint16     map[uint8]uint16        `proto:"92"`
	MStringTimestamp map[string]time.Time    `proto:"93"`
	MInt64Duration   map[int64]time.Duration `proto:"94"`

	Timestamp time.Time     `proto:"100"`
	Duration  time.Duration `proto:"101"`

	FHigh string `proto:"536870911"`
}

// goPartial knows a few of All's fields and keeps the rest as unknown.
type goPartial struct {
	FInt32        int32             `proto:"2"`
	FDouble       float64           `proto:"13"`
	FString       string            `proto:"14"`
	NestedPtr     *goNested         `proto:"31"`
	OptString     *string           `proto:"41"`
	RSint64       []int64           `proto:"56,zigzag"`
	RString       []string          `proto:"70"`
	MStringString map[string]string `proto:"80"`
	Timestamp     time.Time         `proto:"100"`
	Rest          serde.Unknown     `proto:"unknown"`
}

// ---- Go <-> pb conversion ----

func mapSlice[S, D any](s []S, f func(S) D) []D {
	if s == nil {
		return nil
	}
	d := make([]D, len(s))
	for i, v := range s {
		d[i] = f(v)
	}
	return d
}

func mapMap[K comparable, V any, K2 comparable, V2 any](m map[K]V, fk func(K) K2, fv func(V) V2) map[K2]V2 {
	if m == nil {
		return nil
	}
	d := make(map[K2]V2, len(m))
	for k, v := range m {
		d[fk(k)] = fv(v)
	}
	return d
}

func id[T any](v T) T { return v }

func conv[S, D ~int8 | ~int16 | ~int32 | ~int64 | ~int | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint](v S) D {
	return D(v)
}

func ptrConv[S, D any](p *S, f func(S) D) *D {
	if p == nil {
		return nil
	}
	v := f(*p)
	return &v
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func timeToPB(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func timeFromPB(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

func leafToPB(l goLeaf) *testpb.Leaf {
	return &testpb.Leaf{Name: l.Name, Value: l.Value, Nums: slices.Clone(l.Nums), Data: cloneBytes(l.Data)}
}

func leafPtrToPB(l *goLeaf) *testpb.Leaf {
	if l == nil {
		return nil
	}
	return leafToPB(*l)
}

func leafFromPB(l *testpb.Leaf) goLeaf {
	if l == nil {
		return goLeaf{}
	}
	return goLeaf{Name: l.Name, Value: l.Value, Nums: slices.Clone(l.Nums), Data: cloneBytes(l.Data)}
}

func leafPtrFromPB(l *testpb.Leaf) *goLeaf {
	if l == nil {
		return nil
	}
	v := leafFromPB(l)
	return &v
}

func middleToPB(m *goMiddle) *testpb.Middle {
	if m == nil {
		return nil
	}
	return &testpb.Middle{
		Leaf:    leafToPB(m.Leaf),
		Leaves:  mapSlice(m.Leaves, leafToPB),
		ByName:  mapMap(m.ByName, id[string], leafToPB),
		Id:      m.ID,
		OptLeaf: leafPtrToPB(m.OptLeaf),
	}
}

func middleFromPB(m *testpb.Middle) *goMiddle {
	if m == nil {
		return nil
	}
	return &goMiddle{
		Leaf:    leafFromPB(m.Leaf),
		Leaves:  mapSlice(m.Leaves, leafFromPB),
		ByName:  mapMap(m.ByName, id[string], leafFromPB),
		ID:      m.Id,
		OptLeaf: leafPtrFromPB(m.OptLeaf),
	}
}

func nestedToPB(n goNested) *testpb.Nested {
	return &testpb.Nested{
		A:      n.A,
		B:      n.B,
		Middle: middleToPB(n.Middle),
		Color:  testpb.Color(n.Color),
		Tags:   slices.Clone(n.Tags),
	}
}

func nestedPtrToPB(n *goNested) *testpb.Nested {
	if n == nil {
		return nil
	}
	return nestedToPB(*n)
}

func nestedFromPB(n *testpb.Nested) goNested {
	if n == nil {
		return goNested{}
	}
	return goNested{
		A:      n.A,
		B:      n.B,
		Middle: middleFromPB(n.Middle),
		Color:  goColor(n.Color),
		Tags:   slices.Clone(n.Tags),
	}
}

func nestedPtrFromPB(n *testpb.Nested) *goNested {
	if n == nil {
		return nil
	}
	v := nestedFromPB(n)
	return &v
}

func toPB(v *goAll) *testpb.All {
	p := &testpb.All{
		FBool:     v.FBool,
		FInt32:    v.FInt32,
		FInt64:    v.FInt64,
		FUint32:   v.FUint32,
		FUint64:   v.FUint64,
		FSint32:   v.FSint32,
		FSint64:   v.FSint64,
		FFixed32:  v.FFixed32,
		FFixed64:  v.FFixed64,
		FSfixed32: v.FSfixed32,
		FSfixed64: v.FSfixed64,
		FFloat:    v.FFloat,
		FDouble:   v.FDouble,
		FString:   v.FString,
		FBytes:    cloneBytes(v.FBytes),
		FEnum:     testpb.Color(v.FEnum),

		FInt8:        int32(v.FInt8),
		FInt16:       int32(v.FInt16),
		FInt:         int64(v.FInt),
		FUint8:       uint32(v.FUint8),
		FUint16:      uint32(v.FUint16),
		FUint:        uint64(v.FUint),
		FSint8:       int32(v.FSint8),
		FSfixedInt:   int64(v.FSfixedInt),
		FFixedUint16: uint32(v.FFixedUint16),
		FFixedUint:   uint64(v.FFixedUint),

		NestedValue: nestedToPB(v.NestedValue),
		NestedPtr:   nestedPtrToPB(v.NestedPtr),
		LeafPtr:     leafPtrToPB(v.LeafPtr),

		OptInt64:   ptrConv(v.OptInt64, id[int64]),
		OptString:  ptrConv(v.OptString, id[string]),
		OptBool:    ptrConv(v.OptBool, id[bool]),
		OptDouble:  ptrConv(v.OptDouble, id[float64]),
		OptUint32:  ptrConv(v.OptUint32, id[uint32]),
		OptSint32:  ptrConv(v.OptSint32, id[int32]),
		OptFixed64: ptrConv(v.OptFixed64, id[uint64]),
		OptFloat:   ptrConv(v.OptFloat, id[float32]),
		OptEnum:    ptrConv(v.OptEnum, conv[goColor, testpb.Color]),

		RBool:     slices.Clone(v.RBool),
		RInt32:    slices.Clone(v.RInt32),
		RInt64:    slices.Clone(v.RInt64),
		RUint32:   slices.Clone(v.RUint32),
		RUint64:   slices.Clone(v.RUint64),
		RSint32:   slices.Clone(v.RSint32),
		RSint64:   slices.Clone(v.RSint64),
		RFixed32:  slices.Clone(v.RFixed32),
		RFixed64:  slices.Clone(v.RFixed64),
		RSfixed32: slices.Clone(v.RSfixed32),
		RSfixed64: slices.Clone(v.RSfixed64),
		RFloat:    slices.Clone(v.RFloat),
		RDouble:   slices.Clone(v.RDouble),
		REnum:     mapSlice(v.REnum, conv[goColor, testpb.Color]),
		RInt8:     mapSlice(v.RInt8, conv[int8, int32]),
		RInt16:    mapSlice(v.RInt16, conv[int16, int32]),
		RInt:      mapSlice(v.RInt, conv[int, int64]),
		RUint16:   mapSlice(v.RUint16, conv[uint16, uint32]),
		RUint:     mapSlice(v.RUint, conv[uint, uint64]),

		RString:    slices.Clone(v.RString),
		RBytes:     mapSlice(v.RBytes, cloneBytes),
		RNested:    mapSlice(v.RNested, nestedToPB),
		RLeafPtr:   mapSlice(v.RLeafPtr, leafPtrToPB),
		RTimestamp: mapSlice(v.RTimestamp, timestamppb.New),
		RDuration:  mapSlice(v.RDuration, durationpb.New),

		MStringString:  mapMap(v.MStringString, id[string], id[string]),
		MInt32Int64:    mapMap(v.MInt32Int64, id[int32], id[int64]),
		MInt64Nested:   mapMap(v.MInt64Nested, id[int64], nestedToPB),
		MBoolString:    mapMap(v.MBoolString, id[bool], id[string]),
		MUint64Bytes:   mapMap(v.MUint64Bytes, id[uint64], cloneBytes),
		MInt16String:   mapMap(v.MInt16String, conv[int16, int32], id[string]),
		MUintDouble:    mapMap(v.MUintDouble, conv[uint, uint64], id[float64]),
		MStringLeafPtr: mapMap(v.MStringLeafPtr, id[string], leafPtrToPB),
		MUint32Enum:    mapMap(v.MUint32Enum, id[uint32], conv[goColor, testpb.Color]),
		MInt32Float:    mapMap(v.MInt32Float, id[int32], id[float32]),
		MIntInt:        mapMap(v.MIntInt, conv[int, int64], conv[int, int64]),
		MStringBool:    mapMap(v.MStringBool, id[string], id[bool]),
		MUint8Uint16:   mapMap(v.MUint8Uint16, conv[uint8, uint32], conv[uint16, uint32]),
		// Map entries always hold their value: a zero time.Duration is
		// an empty Duration message.
		MStringTimestamp: mapMap(v.MStringTimestamp, id[string], timestamppb.New),
		MInt64Duration:   mapMap(v.MInt64Duration, id[int64], durationpb.New),

		Timestamp: timeToPB(v.Timestamp),
		FHigh:     v.FHigh,
	}
	if v.OptBytes != nil {
		// Presence of a proto3 optional bytes field is a non-nil slice.
		p.OptBytes = append([]byte{}, *v.OptBytes...)
	}
	if v.Duration != 0 {
		p.Duration = durationpb.New(v.Duration)
	}
	return p
}

func fromPB(p *testpb.All) goAll {
	v := goAll{
		FBool:     p.FBool,
		FInt32:    p.FInt32,
		FInt64:    p.FInt64,
		FUint32:   p.FUint32,
		FUint64:   p.FUint64,
		FSint32:   p.FSint32,
		FSint64:   p.FSint64,
		FFixed32:  p.FFixed32,
		FFixed64:  p.FFixed64,
		FSfixed32: p.FSfixed32,
		FSfixed64: p.FSfixed64,
		FFloat:    p.FFloat,
		FDouble:   p.FDouble,
		FString:   p.FString,
		FBytes:    cloneBytes(p.FBytes),
		FEnum:     goColor(p.FEnum),

		FInt8:        int8(p.FInt8),
		FInt16:       int16(p.FInt16),
		FInt:         int(p.FInt),
		FUint8:       uint8(p.FUint8),
		FUint16:      uint16(p.FUint16),
		FUint:        uint(p.FUint),
		FSint8:       int8(p.FSint8),
		FSfixedInt:   int(p.FSfixedInt),
		FFixedUint16: uint16(p.FFixedUint16),
		FFixedUint:   uint(p.FFixedUint),

		NestedValue: nestedFromPB(p.NestedValue),
		NestedPtr:   nestedPtrFromPB(p.NestedPtr),
		LeafPtr:     leafPtrFromPB(p.LeafPtr),

		OptInt64:   ptrConv(p.OptInt64, id[int64]),
		OptString:  ptrConv(p.OptString, id[string]),
		OptBool:    ptrConv(p.OptBool, id[bool]),
		OptDouble:  ptrConv(p.OptDouble, id[float64]),
		OptUint32:  ptrConv(p.OptUint32, id[uint32]),
		OptSint32:  ptrConv(p.OptSint32, id[int32]),
		OptFixed64: ptrConv(p.OptFixed64, id[uint64]),
		OptFloat:   ptrConv(p.OptFloat, id[float32]),
		OptEnum:    ptrConv(p.OptEnum, conv[testpb.Color, goColor]),

		RBool:     slices.Clone(p.RBool),
		RInt32:    slices.Clone(p.RInt32),
		RInt64:    slices.Clone(p.RInt64),
		RUint32:   slices.Clone(p.RUint32),
		RUint64:   slices.Clone(p.RUint64),
		RSint32:   slices.Clone(p.RSint32),
		RSint64:   slices.Clone(p.RSint64),
		RFixed32:  slices.Clone(p.RFixed32),
		RFixed64:  slices.Clone(p.RFixed64),
		RSfixed32: slices.Clone(p.RSfixed32),
		RSfixed64: slices.Clone(p.RSfixed64),
		RFloat:    slices.Clone(p.RFloat),
		RDouble:   slices.Clone(p.RDouble),
		REnum:     mapSlice(p.REnum, conv[testpb.Color, goColor]),
		RInt8:     mapSlice(p.RInt8, conv[int32, int8]),
		RInt16:    mapSlice(p.RInt16, conv[int32, int16]),
		RInt:      mapSlice(p.RInt, conv[int64, int]),
		RUint16:   mapSlice(p.RUint16, conv[uint32, uint16]),
		RUint:     mapSlice(p.RUint, conv[uint64, uint]),

		RString:    slices.Clone(p.RString),
		RBytes:     mapSlice(p.RBytes, cloneBytes),
		RNested:    mapSlice(p.RNested, nestedFromPB),
		RLeafPtr:   mapSlice(p.RLeafPtr, leafPtrFromPB),
		RTimestamp: mapSlice(p.RTimestamp, (*timestamppb.Timestamp).AsTime),
		RDuration:  mapSlice(p.RDuration, (*durationpb.Duration).AsDuration),

		MStringString:    mapMap(p.MStringString, id[string], id[string]),
		MInt32Int64:      mapMap(p.MInt32Int64, id[int32], id[int64]),
		MInt64Nested:     mapMap(p.MInt64Nested, id[int64], nestedFromPB),
		MBoolString:      mapMap(p.MBoolString, id[bool], id[string]),
		MUint64Bytes:     mapMap(p.MUint64Bytes, id[uint64], cloneBytes),
		MInt16String:     mapMap(p.MInt16String, conv[int32, int16], id[string]),
		MUintDouble:      mapMap(p.MUintDouble, conv[uint64, uint], id[float64]),
		MStringLeafPtr:   mapMap(p.MStringLeafPtr, id[string], leafPtrFromPB),
		MUint32Enum:      mapMap(p.MUint32Enum, id[uint32], conv[testpb.Color, goColor]),
		MInt32Float:      mapMap(p.MInt32Float, id[int32], id[float32]),
		MIntInt:          mapMap(p.MIntInt, conv[int64, int], conv[int64, int]),
		MStringBool:      mapMap(p.MStringBool, id[string], id[bool]),
		MUint8Uint16:     mapMap(p.MUint8Uint16, conv[uint32, uint8], conv[uint32, uint16]),
		MStringTimestamp: mapMap(p.MStringTimestamp, id[string], (*timestamppb.Timestamp).AsTime),
		MInt64Duration:   mapMap(p.MInt64Duration, id[int64], (*durationpb.Duration).AsDuration),

		Timestamp: timeFromPB(p.Timestamp),
		FHigh:     p.FHigh,
	}
	if p.OptBytes != nil {
		b := cloneBytes(p.OptBytes)
		v.OptBytes = &b
	}
	if p.Duration != nil {
		v.Duration = p.Duration.AsDuration()
	}
	return v
}

// ---- random values ----

// gen produces random values biased towards the edges of each type: zero,
// the limits, varint length boundaries, NaNs, -0, empty and nil containers.
type gen struct{ r *rand.Rand }

func newGen(seed uint64) *gen { return &gen{r: rand.New(rand.NewPCG(seed, 0x5e1de))} }

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

// signed returns an integer that fits in bits bits, two's complement.
func (g *gen) signed(bits int) int64 {
	maxV := int64(uint64(1)<<(bits-1) - 1)
	minV := -maxV - 1
	switch g.r.IntN(5) {
	case 0:
		return 0
	case 1:
		edges := []int64{1, -1, minV, maxV, minV + 1, maxV - 1, 63, 64, -64, -65,
			127, 128, -128, -129, 255, 256, 8191, 8192, 16383, 16384, -16385,
			math.MaxInt32, math.MinInt32, math.MaxInt32 + 1, math.MinInt32 - 1, 1 << 35, -(1 << 49)}
		v := edges[g.r.IntN(len(edges))]
		if v < minV || v > maxV {
			return maxV
		}
		return v
	}
	width := 1 + g.r.IntN(bits)
	u := g.r.Uint64() >> (64 - width)
	if width == bits {
		return int64(u<<(64-bits)) >> (64 - bits)
	}
	if g.r.IntN(2) == 0 {
		return -int64(u) - 1
	}
	return int64(u)
}

// unsigned returns an integer that fits in bits bits.
func (g *gen) unsigned(bits int) uint64 {
	maxV := uint64(math.MaxUint64) >> (64 - bits)
	switch g.r.IntN(5) {
	case 0:
		return 0
	case 1:
		edges := []uint64{1, maxV, maxV - 1, 127, 128, 255, 256, 16383, 16384,
			math.MaxInt32, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, 1 << 63, 1 << 56}
		v := edges[g.r.IntN(len(edges))]
		if v > maxV {
			return maxV
		}
		return v
	}
	width := 1 + g.r.IntN(bits)
	return g.r.Uint64() >> (64 - width)
}

func (g *gen) f64() float64 {
	switch g.r.IntN(6) {
	case 0:
		return 0
	case 1:
		edges := []float64{math.Copysign(0, -1), 1, -1, 0.1, math.Inf(1), math.Inf(-1), math.NaN(),
			math.Float64frombits(0x7ff0000000000001), math.Float64frombits(0xfff8000000000000),
			math.Float64frombits(0x7fffffffffffffff), math.MaxFloat64, -math.MaxFloat64,
			math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64}
		return edges[g.r.IntN(len(edges))]
	case 2:
		return math.Float64frombits(g.r.Uint64())
	}
	return g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(20)-5))
}

func (g *gen) f32() float32 {
	switch g.r.IntN(6) {
	case 0:
		return 0
	case 1:
		edges := []float32{float32(math.Copysign(0, -1)), 1, -1, 0.1, float32(math.Inf(1)), float32(math.Inf(-1)),
			float32(math.NaN()), math.Float32frombits(0x7f800001), math.Float32frombits(0xffc00000),
			math.Float32frombits(0x7fffffff), math.MaxFloat32, -math.MaxFloat32,
			math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32}
		return edges[g.r.IntN(len(edges))]
	case 2:
		return math.Float32frombits(g.r.Uint32())
	}
	return float32(g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(12)-3)))
}

// quietF32 is f32 with NaNs made quiet. protobuf-go passes float map values
// through a float64, which sets the quiet bit of a signaling NaN, so
// it would not write a signaling NaN map value as its bits.
func (g *gen) quietF32() float32 {
	f := g.f32()
	if f != f {
		f = math.Float32frombits(math.Float32bits(f) | 0x00400000)
	}
	return f
}

// length is a small length, now and then one past a varint boundary.
func (g *gen) length() int {
	switch {
	case g.chance(0.45):
		return 0
	case g.chance(0.85):
		return 1 + g.r.IntN(4)
	case g.chance(0.7):
		return 5 + g.r.IntN(20)
	}
	return []int{127, 128, 129, 200}[g.r.IntN(4)]
}

// count is the number of elements of a repeated message or map field.
func (g *gen) count() int {
	if g.chance(0.5) {
		return 0
	}
	return 1 + g.r.IntN(3)
}

var runePools = [][2]rune{
	{'a', 'z'}, {' ', '~'}, {0, 0x1f}, {0x80, 0x7ff}, {0x800, 0xd7ff}, {0xe000, 0xffff}, {0x10000, 0x10ffff},
}

func (g *gen) str() string {
	switch g.r.IntN(6) {
	case 0:
		return ""
	case 1:
		edges := []string{"a", "é", "日本語", "🙂", "\x00", "nul\x00inside", "\u2028", "\uffff", "\U0010ffff",
			strings.Repeat("x", 127), strings.Repeat("y", 128), strings.Repeat("ü", 100), strings.Repeat("z", 16384)}
		return edges[g.r.IntN(len(edges))]
	}
	n := g.length()
	var sb strings.Builder
	pool := runePools[g.r.IntN(len(runePools))]
	for range n {
		if g.chance(0.1) {
			pool = runePools[g.r.IntN(len(runePools))]
		}
		sb.WriteRune(pool[0] + rune(g.r.IntN(int(pool[1]-pool[0]+1))))
	}
	s := sb.String()
	if !utf8.ValidString(s) {
		panic("generated invalid UTF-8")
	}
	return s
}

func (g *gen) bytes() []byte {
	switch g.r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, g.length())
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}

func (g *gen) color() goColor {
	if g.chance(0.7) {
		return goColor(g.r.IntN(4))
	}
	return goColor(g.signed(32)) // open enum: unknown values too
}

// Timestamps span the range google.protobuf.Timestamp allows.
const (
	minTimestampSec = -62135596800 // 0001-01-01T00:00:00Z, the zero time.Time
	maxTimestampSec = 253402300799 // 9999-12-31T23:59:59Z
)

// timestamp returns a time that is not the zero time.Time.
func (g *gen) timestamp() time.Time {
	var sec, nsec int64
	switch g.r.IntN(6) {
	case 0: // the epoch: a present, empty Timestamp message
	case 1:
		edges := [][2]int64{{minTimestampSec, 1}, {maxTimestampSec, 999999999}, {-1, 0}, {-1, 999999999},
			{0, 1}, {1, 0}, {minTimestampSec + 1, 0}}
		e := edges[g.r.IntN(len(edges))]
		sec, nsec = e[0], e[1]
	default:
		sec = minTimestampSec + 1 + g.r.Int64N(maxTimestampSec-minTimestampSec)
		if g.chance(0.7) {
			nsec = g.r.Int64N(1e9)
		}
	}
	t := time.Unix(sec, nsec)
	switch g.r.IntN(3) {
	case 0:
		t = t.UTC()
	case 1:
		t = t.In(time.FixedZone("X", 3600*(g.r.IntN(27)-12)))
	}
	return t
}

func (g *gen) duration() time.Duration {
	switch g.r.IntN(5) {
	case 0:
		return 0
	case 1:
		edges := []time.Duration{1, -1, math.MaxInt64, math.MinInt64, time.Second, -time.Second,
			999999999, -999999999, 1500 * time.Millisecond, -1500 * time.Millisecond}
		return edges[g.r.IntN(len(edges))]
	}
	return time.Duration(g.signed(64))
}

func genSlice[T any](g *gen, f func() T) []T {
	n := g.length()
	if n == 0 {
		if g.chance(0.5) {
			return nil
		}
		return []T{}
	}
	s := make([]T, n)
	for i := range s {
		s[i] = f()
	}
	return s
}

func genMap[K comparable, V any](g *gen, n int, k func() K, v func() V) map[K]V {
	if n == 0 {
		if g.chance(0.5) {
			return nil
		}
		return map[K]V{}
	}
	m := make(map[K]V, n)
	for range n {
		m[k()] = v()
	}
	return m
}

func genPtr[T any](g *gen, f func() T) *T {
	if g.chance(0.4) {
		return nil
	}
	if g.chance(0.3) {
		return new(T) // present, zero
	}
	v := f()
	return &v
}

func (g *gen) leaf() goLeaf {
	return goLeaf{
		Name:  g.str(),
		Value: g.signed(64),
		Nums:  genSlice(g, func() int32 { return int32(g.signed(32)) }),
		Data:  g.bytes(),
	}
}

func (g *gen) middle() goMiddle {
	var m goMiddle
	if g.chance(0.7) {
		m.Leaf = g.leaf()
	}
	if n := g.count(); n > 0 || g.chance(0.5) {
		m.Leaves = make([]goLeaf, n)
		for i := range m.Leaves {
			m.Leaves[i] = g.leaf()
		}
	}
	m.ByName = genMap(g, g.count(), g.str, g.leaf)
	m.ID = int32(g.signed(32))
	m.OptLeaf = genPtr(g, g.leaf)
	return m
}

func (g *gen) nested() goNested {
	return goNested{
		A:      int32(g.signed(32)),
		B:      g.str(),
		Middle: genPtr(g, g.middle),
		Color:  g.color(),
		Tags:   genSlice(g, g.str),
	}
}

func (g *gen) i8() int8      { return int8(g.signed(8)) }
func (g *gen) i16() int16    { return int16(g.signed(16)) }
func (g *gen) i32() int32    { return int32(g.signed(32)) }
func (g *gen) i64() int64    { return g.signed(64) }
func (g *gen) int() int      { return int(g.signed(64)) }
func (g *gen) u8() uint8     { return uint8(g.unsigned(8)) }
func (g *gen) u16() uint16   { return uint16(g.unsigned(16)) }
func (g *gen) u32() uint32   { return uint32(g.unsigned(32)) }
func (g *gen) u64() uint64   { return g.unsigned(64) }
func (g *gen) uint() uint    { return uint(g.unsigned(64)) }
func (g *gen) boolean() bool { return g.r.IntN(2) == 1 }

// all returns a random goAll. Each field is left zero half of the time so
// that the many-field messages still exercise omission.
func (g *gen) all() goAll {
	var v goAll
	set := func(f func()) {
		if g.chance(0.5) {
			f()
		}
	}
	set(func() { v.FBool = g.boolean() })
	set(func() { v.FInt32 = g.i32() })
	set(func() { v.FInt64 = g.i64() })
	set(func() { v.FUint32 = g.u32() })
	set(func() { v.FUint64 = g.u64() })
	set(func() { v.FSint32 = g.i32() })
	set(func() { v.FSint64 = g.i64() })
	set(func() { v.FFixed32 = g.u32() })
	set(func() { v.FFixed64 = g.u64() })
	set(func() { v.FSfixed32 = g.i32() })
	set(func() { v.FSfixed64 = g.i64() })
	set(func() { v.FFloat = g.f32() })
	set(func() { v.FDouble = g.f64() })
	set(func() { v.FString = g.str() })
	set(func() { v.FBytes = g.bytes() })
	set(func() { v.FEnum = g.color() })

	set(func() { v.FInt8 = g.i8() })
	set(func() { v.FInt16 = g.i16() })
	set(func() { v.FInt = g.int() })
	set(func() { v.FUint8 = g.u8() })
	set(func() { v.FUint16 = g.u16() })
	set(func() { v.FUint = g.uint() })
	set(func() { v.FSint8 = g.i8() })
	set(func() { v.FSfixedInt = g.int() })
	set(func() { v.FFixedUint16 = g.u16() })
	set(func() { v.FFixedUint = g.uint() })

	set(func() { v.NestedValue = g.nested() })
	v.NestedPtr = genPtr(g, g.nested)
	v.LeafPtr = genPtr(g, g.leaf)

	v.OptInt64 = genPtr(g, g.i64)
	v.OptString = genPtr(g, g.str)
	v.OptBool = genPtr(g, g.boolean)
	v.OptDouble = genPtr(g, g.f64)
	v.OptUint32 = genPtr(g, g.u32)
	v.OptSint32 = genPtr(g, g.i32)
	v.OptFixed64 = genPtr(g, g.u64)
	v.OptFloat = genPtr(g, g.f32)
	v.OptEnum = genPtr(g, g.color)
	v.OptBytes = genPtr(g, g.bytes)

	set(func() { v.RBool = genSlice(g, g.boolean) })
	set(func() { v.RInt32 = genSlice(g, g.i32) })
	set(func() { v.RInt64 = genSlice(g, g.i64) })
	set(func() { v.RUint32 = genSlice(g, g.u32) })
	set(func() { v.RUint64 = genSlice(g, g.u64) })
	set(func() { v.RSint32 = genSlice(g, g.i32) })
	set(func() { v.RSint64 = genSlice(g, g.i64) })
	set(func() { v.RFixed32 = genSlice(g, g.u32) })
	set(func() { v.RFixed64 = genSlice(g, g.u64) })
	set(func() { v.RSfixed32 = genSlice(g, g.i32) })
	set(func() { v.RSfixed64 = genSlice(g, g.i64) })
	set(func() { v.RFloat = genSlice(g, g.f32) })
	set(func() { v.RDouble = genSlice(g, g.f64) })
	set(func() { v.REnum = genSlice(g, g.color) })
	set(func() { v.RInt8 = genSlice(g, g.i8) })
	set(func() { v.RInt16 = genSlice(g, g.i16) })
	set(func() { v.RInt = genSlice(g, g.int) })
	set(func() { v.RUint16 = genSlice(g, g.u16) })
	set(func() { v.RUint = genSlice(g, g.uint) })

	set(func() { v.RString = genSlice(g, g.str) })
	set(func() { v.RBytes = genSlice(g, g.bytes) })
	set(func() {
		v.RNested = make([]goNested, g.count())
		for i := range v.RNested {
			v.RNested[i] = g.nested()
		}
	})
	set(func() {
		v.RLeafPtr = make([]*goLeaf, g.count())
		for i := range v.RLeafPtr {
			l := g.leaf()
			v.RLeafPtr[i] = &l
		}
	})
	set(func() { v.RTimestamp = genSlice(g, g.timestamp) })
	set(func() { v.RDuration = genSlice(g, g.duration) })

	set(func() { v.MStringString = genMap(g, g.length()%8, g.str, g.str) })
	set(func() { v.MInt32Int64 = genMap(g, g.length()%8, g.i32, g.i64) })
	set(func() { v.MInt64Nested = genMap(g, g.count(), g.i64, g.nested) })
	set(func() { v.MBoolString = genMap(g, g.count(), g.boolean, g.str) })
	set(func() { v.MUint64Bytes = genMap(g, g.length()%8, g.u64, g.bytes) })
	set(func() { v.MInt16String = genMap(g, g.length()%8, g.i16, g.str) })
	set(func() { v.MUintDouble = genMap(g, g.length()%8, g.uint, g.f64) })
	set(func() {
		v.MStringLeafPtr = genMap(g, g.count(), g.str, func() *goLeaf { l := g.leaf(); return &l })
	})
	set(func() { v.MUint32Enum = genMap(g, g.length()%8, g.u32, g.color) })
	set(func() { v.MInt32Float = genMap(g, g.length()%8, g.i32, g.quietF32) })
	set(func() { v.MIntInt = genMap(g, g.length()%8, g.int, g.int) })
	set(func() { v.MStringBool = genMap(g, g.length()%8, g.str, g.boolean) })
	set(func() { v.MUint8Uint16 = genMap(g, g.length()%8, g.u8, g.u16) })
	set(func() { v.MStringTimestamp = genMap(g, g.count(), g.str, g.timestamp) })
	set(func() { v.MInt64Duration = genMap(g, g.count(), g.i64, g.duration) })

	set(func() { v.Timestamp = g.timestamp() })
	set(func() { v.Duration = g.duration() })
	set(func() { v.FHigh = g.str() })
	return v
}

// pb returns a random testpb.All: a random goAll converted, then changed in
// ways only the generated type can express (absent messages where Go holds
// a value, present-but-zero well-known types).
func (g *gen) pb() *testpb.All {
	v := g.all()
	p := toPB(&v)
	if g.chance(0.3) {
		p.NestedValue = nil
	}
	if p.NestedValue != nil && p.NestedValue.Middle != nil && g.chance(0.5) {
		p.NestedValue.Middle.Leaf = nil
	}
	if p.Duration == nil && g.chance(0.2) {
		p.Duration = &durationpb.Duration{}
	}
	if len(p.RNested) > 0 && g.chance(0.5) {
		p.RNested[0] = &testpb.Nested{}
	}
	return p
}

// ---- comparison ----

// diff returns the path of the first difference between a and b, with both
// values, or "" when they are equal. Floats compare by bits, times with
// Equal, nil and empty slices and maps are equal, pointers are not equal to
// nil.
func diff(path string, a, b reflect.Value) string {
	t := a.Type()
	if t == reflect.TypeFor[time.Time]() {
		ta, tb := a.Interface().(time.Time), b.Interface().(time.Time)
		if !ta.Equal(tb) || ta.IsZero() != tb.IsZero() {
			return fmt.Sprintf("%s: want %v, got %v", path, ta, tb)
		}
		return ""
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if d := diff(path+"."+t.Field(i).Name, a.Field(i), b.Field(i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return fmt.Sprintf("%s: want nil=%v, got nil=%v", path, a.IsNil(), b.IsNil())
			}
			return ""
		}
		return diff(path, a.Elem(), b.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				return fmt.Sprintf("%s: want %q, got %q", path, a.Bytes(), b.Bytes())
			}
			return ""
		}
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: want len %d, got len %d", path, a.Len(), b.Len())
		}
		for i := range a.Len() {
			if d := diff(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Map:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: want len %d, got len %d", path, a.Len(), b.Len())
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() {
				return fmt.Sprintf("%s: key %#v missing", path, k.Interface())
			}
			if d := diff(fmt.Sprintf("%s[%#v]", path, k.Interface()), a.MapIndex(k), bv); d != "" {
				return d
			}
		}
		return ""
	case reflect.Float32:
		if math.Float32bits(float32(a.Float())) != math.Float32bits(float32(b.Float())) {
			return fmt.Sprintf("%s: want %v (%#x), got %v (%#x)", path, a.Float(),
				math.Float32bits(float32(a.Float())), b.Float(), math.Float32bits(float32(b.Float())))
		}
		return ""
	case reflect.Float64:
		if math.Float64bits(a.Float()) != math.Float64bits(b.Float()) {
			return fmt.Sprintf("%s: want %v (%#x), got %v (%#x)", path, a.Float(),
				math.Float64bits(a.Float()), b.Float(), math.Float64bits(b.Float()))
		}
		return ""
	}
	if !a.Equal(b) {
		return fmt.Sprintf("%s: want %#v, got %#v", path, a.Interface(), b.Interface())
	}
	return ""
}

func diffGo[T any](want, got *T) string {
	return diff(reflect.TypeFor[T]().Name(), reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem())
}

// wireField is one top-level field of an encoded message.
type wireField struct {
	num   protowire.Number
	typ   protowire.Type
	raw   []byte // the whole field, key included
	value []byte // the payload of a length-delimited field
}

func splitFields(b []byte) ([]wireField, error) {
	var fs []wireField
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return fs, fmt.Errorf("bad key at offset %d: %w", off, protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[off+n:])
		if m < 0 {
			return fs, fmt.Errorf("bad value of field %d at offset %d: %w", num, off, protowire.ParseError(m))
		}
		f := wireField{num: num, typ: typ, raw: b[off : off+n+m]}
		if typ == protowire.BytesType {
			f.value, _ = protowire.ConsumeBytes(b[off+n:])
		}
		fs = append(fs, f)
		off += n + m
	}
	return fs, nil
}

func hexPrefix(b []byte) string {
	const limit = 96
	if len(b) > limit {
		return fmt.Sprintf("% x ... (%d bytes)", b[:limit], len(b))
	}
	return fmt.Sprintf("% x", b)
}

// wireDiff locates the first field where the serde bytes got differ from the
// protobuf bytes want, descending into message fields, and describes it.
func wireDiff(path string, want, got []byte, md protoreflect.MessageDescriptor) string {
	wf, err := splitFields(want)
	if err != nil {
		return fmt.Sprintf("%s: proto bytes do not parse: %v", path, err)
	}
	gf, gerr := splitFields(got)
	for i := 0; ; i++ {
		if i >= len(wf) && i >= len(gf) {
			if gerr != nil {
				return fmt.Sprintf("%s: serde bytes do not parse: %v", path, gerr)
			}
			return ""
		}
		if i >= len(gf) {
			if gerr != nil {
				return fmt.Sprintf("%s: serde bytes do not parse after %d fields: %v", path, i, gerr)
			}
			return fmt.Sprintf("%s: serde output lacks field %d (%s) and later ones; proto wrote: %s",
				path, wf[i].num, fieldName(md, wf[i].num), hexPrefix(wf[i].raw))
		}
		if i >= len(wf) {
			return fmt.Sprintf("%s: serde output has an extra field %d (%s): %s",
				path, gf[i].num, fieldName(md, gf[i].num), hexPrefix(gf[i].raw))
		}
		w, g := wf[i], gf[i]
		if bytes.Equal(w.raw, g.raw) {
			continue
		}
		name := fieldName(md, w.num)
		if w.num == g.num && w.typ == protowire.BytesType && g.typ == protowire.BytesType && md != nil {
			if fd := md.Fields().ByNumber(w.num); fd != nil && fd.Message() != nil {
				if d := wireDiff(fmt.Sprintf("%s.%s(#%d)", path, name, i), w.value, g.value, fd.Message()); d != "" {
					return d
				}
			}
		}
		return fmt.Sprintf("%s: field #%d differs: proto wrote field %d (%s), serde wrote field %d (%s)\n\tproto: %s\n\tserde: %s",
			path, i, w.num, name, g.num, fieldName(md, g.num), hexPrefix(w.raw), hexPrefix(g.raw))
	}
}

func fieldName(md protoreflect.MessageDescriptor, num protowire.Number) string {
	if md == nil {
		return "?"
	}
	if fd := md.Fields().ByNumber(num); fd != nil {
		return string(fd.Name())
	}
	return "unknown"
}

var allDesc = (&testpb.All{}).ProtoReflect().Descriptor()

// ---- wire rewriting ----

// rewrite re-encodes a valid message: packed repeated scalars written one
// element per key when unpack is set, and fields in descending number order
// (elements of one field keep their order) when reorder is set. Both are
// encodings every protobuf parser must accept.
func rewrite(b []byte, md protoreflect.MessageDescriptor, unpack, reorder bool) []byte {
	fs, err := splitFields(b)
	if err != nil {
		panic(err)
	}
	if reorder {
		slices.SortStableFunc(fs, func(x, y wireField) int { return cmp.Compare(y.num, x.num) })
	}
	var out []byte
	for _, f := range fs {
		var fd protoreflect.FieldDescriptor
		if md != nil {
			fd = md.Fields().ByNumber(f.num)
		}
		switch {
		case fd != nil && f.typ == protowire.BytesType && fd.IsList() && packedWireType(fd.Kind()) >= 0 && unpack:
			wt := protowire.Type(packedWireType(fd.Kind()))
			for p := f.value; len(p) > 0; {
				n := protowire.ConsumeFieldValue(f.num, wt, p)
				if n < 0 {
					panic("bad packed payload")
				}
				out = protowire.AppendTag(out, f.num, wt)
				out = append(out, p[:n]...)
				p = p[n:]
			}
		case fd != nil && f.typ == protowire.BytesType && fd.Message() != nil:
			out = protowire.AppendTag(out, f.num, f.typ)
			out = protowire.AppendBytes(out, rewrite(f.value, fd.Message(), unpack, reorder))
		default:
			out = append(out, f.raw...)
		}
	}
	return out
}

// packedWireType is the wire type of one element of a packable kind, or -1.
func packedWireType(k protoreflect.Kind) int {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Int64Kind,
		protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return int(protowire.VarintType)
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return int(protowire.Fixed32Type)
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return int(protowire.Fixed64Type)
	}
	return -1
}

// ---- tests ----

var deterministic = proto.MarshalOptions{Deterministic: true}

func mustCodec[T any](t *testing.T) serde.Codec[T] {
	t.Helper()
	c, err := serde.For[T]()
	if err != nil {
		t.Fatalf("serde.For[%s]: %v", reflect.TypeFor[T](), err)
	}
	return c
}

func TestInteropSerdeToProto(t *testing.T) {
	codec := mustCodec[goAll](t)
	g := newGen(1)
	prefix := []byte("prefix")
	failures := 0
	for i := range interopRounds {
		v := g.all()
		p := toPB(&v)
		want, err := deterministic.Marshal(p)
		if err != nil {
			t.Fatalf("value %d: proto.Marshal: %v", i, err)
		}
		got, err := codec.Append(slices.Clone(prefix), &v)
		if err != nil {
			t.Errorf("value %d: Append: %v", i, err)
			failures++
			continue
		}
		if !bytes.HasPrefix(got, prefix) {
			t.Errorf("value %d: Append overwrote dst: % x", i, got[:min(len(got), len(prefix))])
		}
		got = got[len(prefix):]
		// Into a buffer with room, the encoder takes its fast path
		// (appendFast) from the first op; it must write the same.
		if roomy, err := codec.Append(make([]byte, 0, 2*len(want)+64), &v); err != nil || !bytes.Equal(roomy, got) {
			t.Errorf("value %d: Append into a buffer with room differs (err %v):\n% x\n% x", i, err, roomy, got)
			failures++
		}
		if !bytes.Equal(got, want) {
			t.Errorf("value %d: serde bytes differ from proto.Marshal (%d vs %d bytes):\n%s",
				i, len(got), len(want), wireDiff("All", want, got, allDesc))
			failures++
		} else if n := codec.Size(&v); n != len(got) {
			t.Errorf("value %d: Size = %d, Append wrote %d bytes", i, n, len(got))
			failures++
		}
		back := &testpb.All{}
		if err := proto.Unmarshal(got, back); err != nil {
			t.Errorf("value %d: proto.Unmarshal of serde bytes: %v", i, err)
			failures++
		} else if !proto.Equal(back, p) {
			t.Errorf("value %d: proto.Unmarshal of serde bytes is not proto.Equal to the value", i)
			failures++
		}
		if failures >= 5 {
			t.Fatal("too many failures")
		}
	}
}

// decodeChecker decodes protobuf bytes with serde and compares the result
// with the expected Go value, stopping the test after five failures.
func decodeChecker(t *testing.T, codec serde.Codec[goAll]) func(i int, variant string, src []byte, want *goAll) {
	failures := 0
	return func(i int, variant string, src []byte, want *goAll) {
		t.Helper()
		var got goAll
		if err := codec.Decode(src, &got); err != nil {
			t.Errorf("value %d (%s): Decode: %v", i, variant, err)
			failures++
		} else if d := diffGo(want, &got); d != "" {
			t.Errorf("value %d (%s): Decode differs from the protobuf value:\n\t%s", i, variant, d)
			failures++
		}
		if failures >= 5 {
			t.Fatal("too many failures")
		}
	}
}

func TestInteropProtoToSerde(t *testing.T) {
	codec := mustCodec[goAll](t)
	g := newGen(2)
	check := decodeChecker(t, codec)
	for i := range interopRounds {
		p := g.pb()
		want := fromPB(p)

		det, err := deterministic.Marshal(p)
		if err != nil {
			t.Fatalf("value %d: proto.Marshal: %v", i, err)
		}
		check(i, "deterministic", det, &want)

		nondet, err := proto.Marshal(p)
		if err != nil {
			t.Fatalf("value %d: proto.Marshal: %v", i, err)
		}
		check(i, "proto.Marshal", nondet, &want)
		check(i, "unpacked", rewrite(det, allDesc, true, false), &want)
		check(i, "reordered", rewrite(det, allDesc, false, true), &want)

	}
}

// TestInteropMerge decodes two messages concatenated, which protobuf parses
// as their merge: scalars last wins, repeated fields append, message fields
// (Timestamp and Duration included) merge field by field, map entries with
// the same key replace.
func TestInteropMerge(t *testing.T) {
	codec := mustCodec[goAll](t)
	g := newGen(5)
	check := decodeChecker(t, codec)
	for i := range interopRounds {
		a, err := deterministic.Marshal(g.pb())
		if err != nil {
			t.Fatal(err)
		}
		b, err := deterministic.Marshal(g.pb())
		if err != nil {
			t.Fatal(err)
		}
		cat := append(a, b...)
		merged := &testpb.All{}
		if err := proto.Unmarshal(cat, merged); err != nil {
			t.Fatalf("value %d: proto.Unmarshal of the concatenation: %v", i, err)
		}
		want := fromPB(merged)
		check(i, "two messages concatenated", cat, &want)
	}
}

func TestInteropDecodeReuse(t *testing.T) {
	codec := mustCodec[goAll](t)
	g := newGen(3)
	var reused goAll
	failures := 0
	for i := range interopRounds {
		p := g.pb()
		src, err := deterministic.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var fresh goAll
		errFresh := codec.Decode(src, &fresh)
		errReused := codec.Decode(src, &reused)
		if errFresh != nil || errReused != nil {
			t.Errorf("value %d: Decode: fresh %v, reused %v", i, errFresh, errReused)
			failures++
		} else if d := diffGo(&fresh, &reused); d != "" {
			t.Errorf("value %d: decoding into a reused value differs from a fresh one:\n\t%s", i, d)
			failures++
		} else if want := fromPB(p); diffGo(&want, &reused) != "" {
			t.Errorf("value %d: reused decode differs from the protobuf value:\n\t%s", i, diffGo(&want, &reused))
			failures++
		}
		if failures >= 5 {
			t.Fatal("too many failures")
		}
	}
}

func TestInteropUnknownRelay(t *testing.T) {
	codec := mustCodec[goPartial](t)
	g := newGen(4)
	failures := 0
	for i := range interopRounds {
		p := g.pb()
		src, err := deterministic.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var part goPartial
		if err := codec.Decode(src, &part); err != nil {
			t.Errorf("value %d: Decode: %v", i, err)
			failures++
			continue
		}
		full := fromPB(p)
		known := goPartial{
			FInt32: full.FInt32, FDouble: full.FDouble, FString: full.FString, NestedPtr: full.NestedPtr,
			OptString: full.OptString, RSint64: full.RSint64, RString: full.RString,
			MStringString: full.MStringString, Timestamp: full.Timestamp, Rest: part.Rest,
		}
		if d := diffGo(&known, &part); d != "" {
			t.Errorf("value %d: known fields of the partial decode differ:\n\t%s", i, d)
			failures++
		}
		out, err := codec.Append(nil, &part)
		if err != nil {
			t.Errorf("value %d: Append: %v", i, err)
			failures++
			continue
		}
		back := &testpb.All{}
		if err := proto.Unmarshal(out, back); err != nil {
			t.Errorf("value %d: proto.Unmarshal of the relayed bytes: %v", i, err)
			failures++
		} else if !proto.Equal(back, p) {
			t.Errorf("value %d: relayed message is not proto.Equal to the original", i)
			failures++
		} else if again, err := deterministic.Marshal(back); err != nil || !bytes.Equal(again, src) {
			// proto.Equal does not tell -0 from +0; the bytes do.
			t.Errorf("value %d: relayed message re-marshals differently:\n%s", i, wireDiff("All", src, again, allDesc))
			failures++
		}
		if failures >= 5 {
			t.Fatal("too many failures")
		}
	}
}

// TestInteropRangeCheck feeds protobuf values that overflow the narrow Go
// integer fields: Decode must reject them rather than truncate.
func TestInteropRangeCheck(t *testing.T) {
	codec := mustCodec[goAll](t)
	cases := []*testpb.All{
		{FInt8: 128}, {FInt8: -129}, {FInt16: 1 << 15}, {FInt16: -1<<15 - 1},
		{FUint8: 256}, {FUint16: 1 << 16}, {FSint8: 200}, {FFixedUint16: 1 << 16},
		{RInt8: []int32{1, 300}}, {RInt16: []int32{-40000}}, {RUint16: []uint32{70000}},
	}
	for _, p := range cases {
		src, err := deterministic.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var v goAll
		if err := codec.Decode(src, &v); err == nil {
			t.Errorf("Decode of %v: no error, got %s", p, diffGo(&goAll{}, &v))
		}
	}
}
