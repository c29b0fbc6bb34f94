package serde_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/eddyflow/eddy/serde"
)

// These tests cover the encode program's inlined loops (repeated structs held
// by value): nesting, empty and long elements, recursion and error paths.

type progLeaf struct {
	S string `proto:"1"`
	N int64  `proto:"2"`
}

type progMid struct {
	Leaves []progLeaf `proto:"1"`
	Tag    string     `proto:"2"`
	One    progLeaf   `proto:"3"`
	Q      int32      `proto:"4"`
}

type progTop struct {
	Mids []progMid         `proto:"1"`
	Tree []progTree        `proto:"2"`
	M    map[string]string `proto:"3"`
}

type progTree struct {
	V    int32      `proto:"1"`
	Kids []progTree `proto:"2"`
}

func TestProgNestedLoops(t *testing.T) {
	c := serde.MustFor[progTop]()
	long := strings.Repeat("x", 300)
	v := progTop{
		Mids: []progMid{
			{},
			{Leaves: []progLeaf{{S: "a", N: 1}, {}, {S: long, N: -1}}, Tag: "é", One: progLeaf{S: "ünïcode", N: 1 << 40}, Q: -5},
			{Leaves: []progLeaf{{S: strings.Repeat("y", 31)}, {S: strings.Repeat("z", 33)}}},
		},
		Tree: []progTree{{V: 1, Kids: []progTree{{V: 2, Kids: []progTree{{V: 3}}}, {}}}},
		M:    map[string]string{"b": "2", "a": "1", "": "", "long": long, "é": "ü"},
	}
	b, err := c.Append(nil, &v)
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Size(&v); n != len(b) {
		t.Fatalf("Size %d, Append wrote %d", n, len(b))
	}
	var got progTop
	if err := c.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	// Empty elements decode as zero values, which is what they were.
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, v)
	}
	// Appending after existing bytes leaves them alone.
	b2, err := c.Append([]byte("prefix"), &v)
	if err != nil || string(b2[:6]) != "prefix" || string(b2[6:]) != string(b) {
		t.Fatalf("append after a prefix: %v", err)
	}
}

func TestProgErrorPaths(t *testing.T) {
	c := serde.MustFor[progTop]()
	cases := []struct {
		v    progTop
		path string
	}{
		{progTop{Mids: []progMid{{}, {Leaves: []progLeaf{{}, {S: "bad\xff"}}}}}, "progTop.Mids[1].Leaves[1].S"},
		{progTop{Mids: []progMid{{}, {}, {Tag: "\xc0"}}}, "progTop.Mids[2].Tag"},
		{progTop{Mids: []progMid{{One: progLeaf{S: strings.Repeat("a", 40) + "\xff"}}}}, "progTop.Mids[0].One.S"},
	}
	for _, tc := range cases {
		_, err := c.Append(nil, &tc.v)
		var ee *serde.EncodeError
		if err == nil || !asEncodeError(err, &ee) || ee.Path != tc.path {
			t.Errorf("want EncodeError at %s, got %v", tc.path, err)
		}
	}
}

// Pointers to structs are inlined in the encode program too (opPtr).

type progPtrLeaf struct {
	S       string        `proto:"1"`
	Next    *progPtrLeaf  `proto:"2"` // recursive: not inlined into itself
	Unknown serde.Unknown `proto:"unknown"`
}

type progPtrElem struct {
	P *progPtrLeaf `proto:"1"`
	N int32        `proto:"2"`
}

type progPtrTop struct {
	One   *progPtrLeaf  `proto:"1"`
	Elems []progPtrElem `proto:"2"`
	After string        `proto:"3"`
}

func TestProgPointers(t *testing.T) {
	c := serde.MustFor[progPtrTop]()
	long := strings.Repeat("p", 200)
	v := progPtrTop{
		One: &progPtrLeaf{S: "a", Next: &progPtrLeaf{S: long}, Unknown: serde.Unknown{0x50, 0x07}}, // field 10, varint 7
		Elems: []progPtrElem{
			{},
			{P: &progPtrLeaf{}},
			{P: &progPtrLeaf{S: long, Next: &progPtrLeaf{S: "b"}}, N: 3},
			{N: -1},
		},
		After: "z",
	}
	b, err := c.Append(nil, &v)
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Size(&v); n != len(b) {
		t.Fatalf("Size %d, Append wrote %d", n, len(b))
	}
	var got progPtrTop
	if err := c.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, v)
	}
	// A nil pointer writes nothing; a pointer to a zero struct an empty
	// message: the two elements differ by the two bytes of P's key and length.
	e0, _ := c.Append(nil, &progPtrTop{Elems: v.Elems[:1]})
	e1, _ := c.Append(nil, &progPtrTop{Elems: v.Elems[1:2]})
	if len(e1) != len(e0)+2 {
		t.Errorf("nil pointer element %x, empty struct element %x", e0, e1)
	}

	bad := []struct {
		v    progPtrTop
		path string
	}{
		{progPtrTop{One: &progPtrLeaf{S: "\xff"}}, "progPtrTop.One.S"},
		{progPtrTop{One: &progPtrLeaf{Next: &progPtrLeaf{S: "\xff"}}}, "progPtrTop.One.Next.S"},
		{progPtrTop{Elems: []progPtrElem{{}, {P: &progPtrLeaf{S: "ok"}}, {P: &progPtrLeaf{S: "bad\xc0"}}}}, "progPtrTop.Elems[2].P.S"},
	}
	for _, tc := range bad {
		_, err := c.Append(nil, &tc.v)
		var ee *serde.EncodeError
		if err == nil || !asEncodeError(err, &ee) || ee.Path != tc.path {
			t.Errorf("want EncodeError at %s, got %v", tc.path, err)
		}
	}
}

type progOneofKinds struct {
	B *bool    `proto:"1,oneof=v"`
	I *int64   `proto:"2,oneof=v"`
	D *float64 `proto:"3,oneof=v"`
	S *string  `proto:"4,oneof=v"`
}

// TestProgOneofNarrowMembers checks that the encoder reads a oneof member
// with its own width: a *bool pointing into a struct whose next bytes are
// set must still write 1, not the bytes around it.
func TestProgOneofNarrowMembers(t *testing.T) {
	c := serde.MustFor[progOneofKinds]()
	var around struct {
		B    bool
		Rest [7]byte
	}
	around.B = true
	around.Rest = [7]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	// With room in the buffer, as the encoder's fast loop needs.
	b, err := c.Append(make([]byte, 0, 256), &progOneofKinds{B: &around.B})
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0x08, 0x01}; string(b) != string(want) {
		t.Fatalf("bool member: got %x, want %x", b, want)
	}
	i, d, s := int64(-1), 2.5, ""
	for _, tc := range []struct {
		v    progOneofKinds
		want []byte
	}{
		{progOneofKinds{I: &i}, []byte{0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{progOneofKinds{D: &d}, []byte{0x19, 0, 0, 0, 0, 0, 0, 0x04, 0x40}},
		{progOneofKinds{S: &s}, []byte{0x22, 0x00}},
	} {
		b, err := c.Append(make([]byte, 0, 256), &tc.v)
		if err != nil || string(b) != string(tc.want) {
			t.Errorf("got %x (%v), want %x", b, err, tc.want)
		}
	}
}

// progWide is a body of up to 162 bytes made of strings of at most 30
// bytes, all of which the fast loop writes itself.
type progWide struct {
	A string `proto:"1"`
	B string `proto:"2"`
	C string `proto:"3"`
	D string `proto:"4"`
	E string `proto:"5"`
	N int64  `proto:"6"`
}

type progSiblings struct {
	A progWide `proto:"1"`
	B progWide `proto:"2"`
	C progWide `proto:"3"`
	N int32    `proto:"4"`
}

// TestProgSiblings covers structs held by value side by side, whose opEnd
// and the next opBegin the fast loop runs as one op: bodies on both sides of
// 128 bytes (a length of two bytes moves the body), written into buffers of
// every capacity, so that the fast loop stops at every op and the general
// loop goes on from there. The bytes must be protobuf's.
func TestProgSiblings(t *testing.T) {
	c := serde.MustFor[progSiblings]()
	body := func(w progWide) []byte {
		var b []byte
		for i, s := range []string{w.A, w.B, w.C, w.D, w.E} {
			if s != "" {
				b = protowire.AppendTag(b, protowire.Number(i+1), protowire.BytesType)
				b = protowire.AppendString(b, s)
			}
		}
		if w.N != 0 {
			b = protowire.AppendTag(b, 6, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(w.N))
		}
		return b
	}
	// wide returns a progWide whose body is n bytes long (n = 0, or 2 to 162).
	wide := func(n int, x string) progWide {
		var w progWide
		for _, p := range []*string{&w.A, &w.B, &w.C, &w.D, &w.E} {
			if n >= 2 {
				k := min(n-2, 30)
				*p = strings.Repeat(x, k)
				n -= 2 + k
			}
		}
		return w
	}
	sizes := []int{0, 2, 100, 126, 127, 128, 129, 150, 160}
	for _, a := range sizes {
		for _, bsz := range sizes {
			for _, csz := range []int{0, 127, 128} {
				v := progSiblings{A: wide(a, "a"), B: wide(bsz, "b"), C: wide(csz, "c"), N: int32(a)}
				var want []byte
				for i, w := range []progWide{v.A, v.B, v.C} {
					want = protowire.AppendTag(want, protowire.Number(i+1), protowire.BytesType)
					want = protowire.AppendBytes(want, body(w))
				}
				if v.N != 0 {
					want = protowire.AppendTag(want, 4, protowire.VarintType)
					want = protowire.AppendVarint(want, uint64(v.N))
				}
				for room := 0; room <= len(want)+100; room++ {
					got, err := c.Append(make([]byte, 0, room), &v)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("bodies of %d, %d, %d bytes, buffer of %d: got\n% x\nwant\n% x", a, bsz, csz, room, got, want)
					}
				}
			}
		}
	}
}
