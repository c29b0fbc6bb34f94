package serde_test

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy/serde"
)

type Status int32

const (
	StatusUnknown Status = iota
	StatusActive
)

type Inner struct {
	Name  string  `proto:"1"`
	Score float64 `proto:"2"`
	Deep  *Inner  `proto:"3"`
}

type Kitchen struct {
	B     bool          `proto:"1"`
	I     int           `proto:"2"`
	I8    int8          `proto:"3"`
	I16   int16         `proto:"4,zigzag"`
	I32   int32         `proto:"5"`
	I64   int64         `proto:"6,zigzag"`
	U     uint          `proto:"7"`
	U8    uint8         `proto:"8"`
	U16   uint16        `proto:"9,fixed"`
	U32   uint32        `proto:"10"`
	U64   uint64        `proto:"11,fixed"`
	SF32  int32         `proto:"12,fixed"`
	SF64  int64         `proto:"13,fixed"`
	F32   float32       `proto:"14"`
	F64   float64       `proto:"15"`
	S     string        `proto:"16"`
	Bytes []byte        `proto:"17"`
	St    Status        `proto:"18"`
	In    Inner         `proto:"19"`
	InP   *Inner        `proto:"20"`
	OptI  *int64        `proto:"21"`
	OptS  *string       `proto:"22"`
	OptB  *bool         `proto:"23"`
	T     time.Time     `proto:"24"`
	D     time.Duration `proto:"25"`
	TP    *time.Time    `proto:"26"`

	RI   []int32              `proto:"30"`
	RZ   []int64              `proto:"31,zigzag"`
	RF   []float64            `proto:"32"`
	RB   []bool               `proto:"33"`
	RS   []string             `proto:"34"`
	RBy  [][]byte             `proto:"35"`
	RIn  []Inner              `proto:"36"`
	RInP []*Inner             `proto:"37"`
	RSt  []Status             `proto:"38"`
	RFx  []uint32             `proto:"39,fixed"`
	RT   []time.Time          `proto:"40"`
	MSS  map[string]string    `proto:"50"`
	MIS  map[int64]string     `proto:"51"`
	MSI  map[string]*Inner    `proto:"52"`
	MBI  map[bool]int32       `proto:"53"`
	MUB  map[uint32][]byte    `proto:"54"`
	MIV  map[int32]Inner      `proto:"55"`
	MST  map[string]time.Time `proto:"56"`

	Skipped string `proto:"-"`
	private int
	Big     int64 `proto:"536870911"`
}

func sampleKitchen() Kitchen {
	i64 := int64(-7)
	s := "opt"
	f := false
	tp := time.Date(2026, 12, 2, 8, 0, 0, 123, time.UTC)
	return Kitchen{
		B: true, I: -1, I8: -128, I16: 32767, I32: math.MinInt32, I64: math.MinInt64,
		U: math.MaxUint64, U8: 255, U16: 65535, U32: math.MaxUint32, U64: math.MaxUint64,
		SF32: -5, SF64: math.MaxInt64, F32: float32(math.Inf(-1)), F64: math.Copysign(0, -1),
		S: "héllo, 世界", Bytes: []byte{0, 1, 2, 255}, St: StatusActive,
		In:   Inner{Name: "in", Deep: &Inner{Name: "deeper", Score: 1.5}},
		InP:  &Inner{},
		OptI: &i64, OptS: &s, OptB: &f,
		T: time.Date(1969, 7, 20, 20, 17, 40, 999999999, time.UTC), D: -90*time.Minute - 1, TP: &tp,
		RI: []int32{0, -1, 1 << 30}, RZ: []int64{math.MinInt64, 0, 5}, RF: []float64{math.Inf(1), 0},
		RB: []bool{true, false, true}, RS: []string{"", "a", "ü"}, RBy: [][]byte{{}, {1}},
		RIn: []Inner{{}, {Name: "x"}}, RInP: []*Inner{{Name: "p"}, {}}, RSt: []Status{1, 0, 1},
		RFx: []uint32{1, math.MaxUint32}, RT: []time.Time{{}, tp},
		MSS: map[string]string{"b": "2", "a": "1", "": ""},
		MIS: map[int64]string{-1: "neg", 0: "", 1 << 40: "big"},
		MSI: map[string]*Inner{"x": {Name: "vx"}, "y": {}},
		MBI: map[bool]int32{true: 1, false: 0},
		MUB: map[uint32][]byte{7: {7}, 0: nil},
		MIV: map[int32]Inner{3: {Score: 3}},
		MST: map[string]time.Time{"t": tp},
		Big: 42,
	}
}

// normalize maps values that protobuf cannot tell apart to one form: a
// []byte of length zero is nil, a map value's empty []byte is nil.
func normalize(k *Kitchen) {
	for i := range k.RBy {
		if len(k.RBy[i]) == 0 {
			k.RBy[i] = nil
		}
	}
	for key, v := range k.MUB {
		if len(v) == 0 {
			k.MUB[key] = nil
		}
	}
	k.Skipped = ""
}

func roundTrip[T any](t *testing.T, v *T) (*T, []byte) {
	t.Helper()
	c, err := serde.For[T]()
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Append(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Size(v); n != len(b) {
		t.Fatalf("Size = %d, Append wrote %d bytes", n, len(b))
	}
	out := new(T)
	if err := c.Decode(b, out); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return out, b
}

func TestRoundTripKitchen(t *testing.T) {
	v := sampleKitchen()
	v.Skipped = "not written"
	got, b := roundTrip(t, &v)
	normalize(&v)
	normalize(got)
	// Time values come back in UTC; compare them with Equal, then drop them.
	if !got.T.Equal(v.T) || !got.TP.Equal(*v.TP) {
		t.Fatalf("times: got %v %v, want %v %v", got.T, got.TP, v.T, v.TP)
	}
	if !reflect.DeepEqual(got, &v) {
		t.Fatalf("round trip mismatch\n got %#v\nwant %#v", *got, v)
	}
	// Encoding is deterministic: the decoded copy encodes to the same bytes.
	_, b2 := roundTrip(t, got)
	if !bytes.Equal(b, b2) {
		t.Fatal("re-encoding the decoded value gave different bytes")
	}
}

func TestZeroValueIsEmptyButNestedValueIsPresent(t *testing.T) {
	var v Kitchen
	got, b := roundTrip(t, &v)
	// Only the nested message held by value (field 19) is written: key 0x9a 0x01, length 0.
	if want := []byte{0x9a, 0x01, 0x00}; !bytes.Equal(b, want) {
		t.Fatalf("zero Kitchen encodes to % x, want % x", b, want)
	}
	if !reflect.DeepEqual(*got, v) {
		t.Fatalf("zero round trip: got %#v", *got)
	}
}

func TestFloatEdges(t *testing.T) {
	type F struct {
		F32 float32   `proto:"1"`
		F64 float64   `proto:"2"`
		R   []float64 `proto:"3"`
	}
	nan := math.Float64frombits(0x7ff8000000000001)
	v := F{F32: float32(math.NaN()), F64: math.Copysign(0, -1), R: []float64{nan, math.SmallestNonzeroFloat64}}
	got, b := roundTrip(t, &v)
	if math.Float32bits(got.F32) != math.Float32bits(v.F32) || math.Float64bits(got.F64) != math.Float64bits(v.F64) {
		t.Fatalf("float bits changed: %v %v", got.F32, got.F64)
	}
	if math.Float64bits(got.R[0]) != math.Float64bits(nan) || got.R[1] != math.SmallestNonzeroFloat64 {
		t.Fatalf("repeated floats changed: %v", got.R)
	}
	// -0.0 is not the zero value: it must be on the wire.
	if len(b) == 0 || !bytes.Contains(b, []byte{0x11, 0, 0, 0, 0, 0, 0, 0, 0x80}) {
		t.Fatalf("-0.0 not written: % x", b)
	}
}

func TestNilVersusEmpty(t *testing.T) {
	type P struct {
		S  []int64          `proto:"1"`
		M  map[string]int64 `proto:"2"`
		P  *Inner           `proto:"3"`
		O  *int32           `proto:"4"`
		By []byte           `proto:"5"`
	}
	zero := int32(0)
	// An empty slice and map write nothing, like nil; a pointer to a zero
	// value is present.
	v := P{S: []int64{}, M: map[string]int64{}, P: &Inner{}, O: &zero, By: []byte{}}
	got, _ := roundTrip(t, &v)
	if got.S != nil || got.M != nil || got.By != nil {
		t.Fatalf("empty containers should decode as nil: %#v", got)
	}
	if got.P == nil || got.O == nil || *got.O != 0 {
		t.Fatalf("present pointers lost: %#v", got)
	}
	var n P
	got, b := roundTrip(t, &n)
	if len(b) != 0 || got.P != nil || got.O != nil {
		t.Fatalf("nil pointers should not be written: % x %#v", b, got)
	}
}

func TestExactBytes(t *testing.T) {
	// Hand-checked encodings, the protobuf spec's examples among them.
	type M struct {
		A int32   `proto:"1"`
		B string  `proto:"2"`
		C []int32 `proto:"4"`
		Z int32   `proto:"5,zigzag"`
		N int32   `proto:"6"`
	}
	v := M{A: 150, B: "testing", C: []int32{3, 270, 86942}, Z: -2, N: -1}
	c := serde.MustFor[M]()
	b, err := c.Append(nil, &v)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		0x08, 0x96, 0x01,
		0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g',
		0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05,
		0x28, 0x03,
		0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("got  % x\nwant % x", b, want)
	}
}

func TestLongNestedLength(t *testing.T) {
	// A nested message longer than 127 bytes needs a two-byte length, and
	// one over 16383 bytes a three-byte one: the body must move intact.
	for _, n := range []int{126, 127, 128, 200, 16383, 16384, 70000} {
		v := Kitchen{In: Inner{Name: strings.Repeat("x", n)}}
		got, _ := roundTrip(t, &v)
		if got.In.Name != v.In.Name {
			t.Fatalf("n=%d: name of length %d came back with length %d", n, n, len(got.In.Name))
		}
	}
}

func TestDecodeReuseEqualsFresh(t *testing.T) {
	c := serde.MustFor[Kitchen]()
	full := sampleKitchen()
	small := Kitchen{S: "only", RI: []int32{9}, MSS: map[string]string{"k": "v"}, InP: &Inner{Name: "p"}}
	var empty Kitchen
	inputs := []*Kitchen{&full, &small, &empty, &full, &small, &full}
	var reused Kitchen
	for i, in := range inputs {
		b, err := c.Append(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		var fresh Kitchen
		if err := c.Decode(b, &fresh); err != nil {
			t.Fatal(err)
		}
		if err := c.Decode(b, &reused); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fresh, reused) {
			t.Fatalf("input %d: reused value differs from fresh\nfresh  %#v\nreused %#v", i, fresh, reused)
		}
	}
}

func TestDecodeReusesMemory(t *testing.T) {
	c := serde.MustFor[Kitchen]()
	v := sampleKitchen()
	b, _ := c.Append(nil, &v)
	var out Kitchen
	if err := c.Decode(b, &out); err != nil {
		t.Fatal(err)
	}
	items, inp, mss := &out.RIn[0], out.InP, reflect.ValueOf(out.MSS).UnsafePointer()
	if err := c.Decode(b, &out); err != nil {
		t.Fatal(err)
	}
	if &out.RIn[0] != items || out.InP != inp || reflect.ValueOf(out.MSS).UnsafePointer() != mss {
		t.Fatal("Decode into a used value did not reuse its slice, pointer target or map")
	}
}

func TestMergeRepeatedMessageOccurrences(t *testing.T) {
	// protobuf merges two occurrences of one message field.
	type W struct {
		In Inner `proto:"1"`
	}
	b := []byte{0x0a, 0x03, 0x0a, 0x01, 'a', 0x0a, 0x09, 0x11, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f}
	var w W
	if err := serde.MustFor[W]().Decode(b, &w); err != nil {
		t.Fatal(err)
	}
	if w.In.Name != "a" || w.In.Score != 1 {
		t.Fatalf("merge lost a field: %#v", w.In)
	}
}

func TestWrapperTypes(t *testing.T) {
	i := int64(-3)
	got, b := roundTrip(t, &i)
	if *got != -3 || !bytes.Equal(b, []byte{0x08, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}) {
		t.Fatalf("int64 wrapper: %d % x", *got, b)
	}
	s := "key"
	gs, b := roundTrip(t, &s)
	if *gs != "key" || !bytes.Equal(b, []byte{0x0a, 3, 'k', 'e', 'y'}) {
		t.Fatalf("string wrapper: %q % x", *gs, b)
	}
	sl := []string{"a", "b"}
	gsl, _ := roundTrip(t, &sl)
	if !reflect.DeepEqual(*gsl, sl) {
		t.Fatalf("slice wrapper: %v", *gsl)
	}
}

type linked struct {
	V    int32   `proto:"1"`
	Next *linked `proto:"2"`
}

func chain(n int) *linked {
	var head *linked
	for i := 0; i < n; i++ {
		head = &linked{V: int32(i + 1), Next: head}
	}
	return head
}

func TestDeepNesting(t *testing.T) {
	c := serde.MustFor[linked]()
	ok := chain(10_000) // protobuf-go's limit
	b, err := c.Append(nil, ok)
	if err != nil {
		t.Fatalf("10,000 levels should encode: %v", err)
	}
	var got linked
	if err := c.Decode(b, &got); err != nil {
		t.Fatalf("10,000 levels should decode: %v", err)
	}
	depth := 0
	for p := &got; p != nil; p = p.Next {
		depth++
	}
	if depth != 10_000 {
		t.Fatalf("decoded %d levels, want 10000", depth)
	}
	if _, err := c.Append(nil, chain(10_002)); err == nil || !strings.Contains(err.Error(), "nesting deeper than 10000") {
		t.Fatalf("10,002 levels: want a nesting error, got %v", err)
	}
	cyc := &linked{V: 1}
	cyc.Next = cyc
	if _, err := c.Append(nil, cyc); err == nil {
		t.Fatal("a cycle must fail to encode, not loop forever")
	}
}

func TestInvalidUTF8IsAnEncodeError(t *testing.T) {
	v := Kitchen{RIn: []Inner{{}, {Name: "ok"}, {Name: "bad\xff"}}}
	_, err := serde.MustFor[Kitchen]().Append(nil, &v)
	var ee *serde.EncodeError
	if err == nil || !asEncodeError(err, &ee) || ee.Path != "Kitchen.RIn[2].Name" {
		t.Fatalf("want EncodeError at Kitchen.RIn[2].Name, got %v", err)
	}
	m := Kitchen{MSS: map[string]string{"k": "\xc0"}}
	if _, err := serde.MustFor[Kitchen]().Append(nil, &m); err == nil {
		t.Fatal("invalid UTF-8 in a map value must fail")
	}
}

func asEncodeError(err error, target **serde.EncodeError) bool {
	e, ok := err.(*serde.EncodeError)
	*target = e
	return ok
}

func TestUnknownFieldsKept(t *testing.T) {
	type Full struct {
		A int32  `proto:"1"`
		B string `proto:"2"`
		C []byte `proto:"3"`
	}
	type Partial struct {
		A    int32         `proto:"1"`
		Rest serde.Unknown `proto:"unknown"`
	}
	full := Full{A: 1, B: "keep me", C: []byte{9}}
	b, _ := serde.MustFor[Full]().Append(nil, &full)
	var p Partial
	if err := serde.MustFor[Partial]().Decode(b, &p); err != nil {
		t.Fatal(err)
	}
	out, err := serde.MustFor[Partial]().Append(nil, &p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, b) {
		t.Fatalf("relay changed the bytes:\n got % x\nwant % x", out, b)
	}
	// Decoding again resets the unknown bytes instead of appending.
	if err := serde.MustFor[Partial]().Decode(b, &p); err != nil || len(p.Rest) != len(b)-2 {
		t.Fatalf("unknown bytes not reset on reuse: %d bytes, err %v", len(p.Rest), err)
	}
}

type hot struct{ X, Y int32 }

// hotCodec writes two fixed32 fields; it stands in for a hand-tuned codec.
type hotCodec struct{ calls *int }

func (h hotCodec) Append(dst []byte, v *hot) ([]byte, error) {
	*h.calls++
	dst = append(dst, 0x0d)
	dst = append(dst, byte(v.X), byte(v.X>>8), byte(v.X>>16), byte(v.X>>24))
	dst = append(dst, 0x15)
	return append(dst, byte(v.Y), byte(v.Y>>8), byte(v.Y>>16), byte(v.Y>>24)), nil
}

func (h hotCodec) Decode(src []byte, v *hot) error {
	*v = hot{}
	if len(src) == 10 {
		v.X = int32(uint32(src[1]) | uint32(src[2])<<8 | uint32(src[3])<<16 | uint32(src[4])<<24)
		v.Y = int32(uint32(src[6]) | uint32(src[7])<<8 | uint32(src[8])<<16 | uint32(src[9])<<24)
	}
	return nil
}

func (h hotCodec) Size(*hot) int { return 10 }

func TestRegisterCustomCodec(t *testing.T) {
	calls := 0
	serde.Register[hot](hotCodec{calls: &calls})
	c, err := serde.For[hot]()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(hotCodec); !ok {
		t.Fatalf("For returned %T, want the registered codec", c)
	}
	type holder struct {
		H  hot   `proto:"1"`
		HS []hot `proto:"2"`
	}
	v := holder{H: hot{1, -2}, HS: []hot{{3, 4}}}
	got, b := roundTrip(t, &v)
	if !reflect.DeepEqual(*got, v) || calls != 2 {
		t.Fatalf("custom codec round trip: %#v (calls %d)", *got, calls)
	}
	if b[0] != 0x0a || b[1] != 10 {
		t.Fatalf("custom codec field not length-prefixed: % x", b)
	}
}

func TestCompileErrors(t *testing.T) {
	type noTag struct {
		A int `proto:"1"`
		B int
	}
	type dup struct {
		A int `proto:"1"`
		B int `proto:"1"`
	}
	type zero struct {
		A int `proto:"0"`
	}
	type tooBig struct {
		A int `proto:"536870912"`
	}
	type reserved struct {
		A int `proto:"19500"`
	}
	type badOpt struct {
		A int `proto:"1,packed"`
	}
	type zigzagUint struct {
		A uint32 `proto:"1,zigzag"`
	}
	type fixedString struct {
		A string `proto:"1,fixed"`
	}
	type iface struct {
		A any `proto:"1"`
	}
	type nested2 struct {
		A [][]int `proto:"1"`
	}
	type floatKey struct {
		A map[float64]int `proto:"1"`
	}
	type sliceVal struct {
		A map[string][]int `proto:"1"`
	}
	type badInner struct {
		In struct{ X int } `proto:"1"`
	}
	cases := []struct {
		name string
		err  func() error
		want string
	}{
		{"missing tag", errOf[noTag], "noTag.B has no proto tag"},
		{"duplicate", errOf[dup], "both use number 1"},
		{"zero", errOf[zero], "out of range"},
		{"too big", errOf[tooBig], "out of range"},
		{"reserved", errOf[reserved], "reserved by protobuf"},
		{"bad option", errOf[badOpt], `unknown option "packed"`},
		{"zigzag uint", errOf[zigzagUint], "zigzag applies to signed"},
		{"fixed string", errOf[fixedString], "apply to integers"},
		{"interface", errOf[iface], "no protobuf mapping"},
		{"slice of slices", errOf[nested2], "repeated of repeated"},
		{"float key", errOf[floatKey], "map keys must be"},
		{"slice map value", errOf[sliceVal], "map values cannot be repeated"},
		{"nested error names path", errOf[badInner], ".X has no proto tag"},
	}
	for _, c := range cases {
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func errOf[T any]() error {
	_, err := serde.For[T]()
	return err
}

func TestInvalidUTF8EveryPositionAndLength(t *testing.T) {
	type S struct {
		S string `proto:"1"`
	}
	c := serde.MustFor[S]()
	for n := 1; n < 40; n++ {
		for at := 0; at < n; at++ {
			b := []byte(strings.Repeat("a", n))
			b[at] = 0xff
			if _, err := c.Append(nil, &S{S: string(b)}); err == nil {
				t.Fatalf("length %d, bad byte at %d: encoded without error", n, at)
			}
		}
		if _, err := c.Append(nil, &S{S: strings.Repeat("é", n)}); err != nil {
			t.Fatalf("valid non-ASCII string of %d runes rejected: %v", n, err)
		}
	}
}
