package serde

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// flatAll is a flat message (message.flat) with a field of every kind a
// flat message holds, numbers on both sides of 16 (one- and two-byte keys).
type flatAll struct {
	S   string    `proto:"1"`
	I64 int64     `proto:"2"`
	I32 int32     `proto:"3"`
	U32 uint32    `proto:"4"`
	B   bool      `proto:"5"`
	F64 float64   `proto:"6"`
	F32 float32   `proto:"7"`
	Sz  int64     `proto:"8,zigzag"`
	Fx  uint64    `proto:"9,fixed"`
	Raw []byte    `proto:"10"`
	I8  int8      `proto:"11"`
	Far string    `proto:"20"`
	In  flatInner `proto:"12"`
	In2 flatInner `proto:"13"`
}

// flatInner is a flat message nested in flatAll.
type flatInner struct {
	S string   `proto:"1"`
	N int64    `proto:"2"`
	M flatMost `proto:"3"`
}

// flatMost is the innermost flat message.
type flatMost struct {
	X uint32 `proto:"1"`
	S string `proto:"2"`
}

// flatParent holds flat messages the three ways decodeMessage hands them to
// decodeFlat: by value, repeated, and as a second occurrence (a merge).
type flatParent struct {
	One  flatAll   `proto:"1"`
	Many []flatAll `proto:"2"`
}

// setFlat sets message.flat on the plans of flatAll and the messages it
// holds.
func setFlat(m *message, flat bool) {
	m.flat = flat
	for i := range m.fields {
		if f := &m.fields[i]; f.op == opMessage {
			setFlat(f.msg, flat)
		}
	}
}

// TestDecodeFlatMatchesDecodeMessage decodes mutations of valid flat
// messages with decodeFlat and with decodeMessage (every message's flat
// unset), into fresh and used values, and demands the same values and the
// same errors, paths and offsets included.
func TestDecodeFlatMatchesDecodeMessage(t *testing.T) {
	pm, err := planFor(reflect.TypeFor[flatParent]())
	if err != nil {
		t.Fatal(err)
	}
	m := pm.fields[0].msg
	if !m.flat || pm.flat || !m.lookup(12).msg.flat || !m.lookup(12).msg.lookup(3).msg.flat {
		t.Fatalf("flatAll flat = %v, flatParent flat = %v; want true, false", m.flat, pm.flat)
	}
	c := MustFor[flatAll]()
	pc := MustFor[flatParent]()
	r := rand.New(rand.NewPCG(3, 4))
	strs := []string{"", "EUR", "prod-00001234-0007", "é", "a\x00b", string(make([]byte, 200)), "long enough to pass the sixteen bytes"}
	for round := range 20000 {
		v := flatAll{
			S: strs[r.IntN(len(strs))], I64: r.Int64() >> r.IntN(64), I32: int32(r.Uint32()) >> r.IntN(32),
			U32: r.Uint32() >> r.IntN(32), B: r.IntN(2) == 1, F64: r.Float64(), Sz: r.Int64() >> r.IntN(64) * int64(1-2*r.IntN(2)),
			Fx: r.Uint64(), Raw: []byte(strs[r.IntN(len(strs))]), I8: int8(r.IntN(256) - 128), Far: strs[r.IntN(len(strs))],
		}
		if r.IntN(4) == 0 {
			v.F32 = 1.5
		}
		if r.IntN(2) == 0 {
			v.In = flatInner{S: strs[r.IntN(len(strs))], N: r.Int64N(1000), M: flatMost{X: r.Uint32N(300), S: strs[r.IntN(len(strs))]}}
		}
		if r.IntN(3) == 0 {
			v.In2.M.X = 7
		}
		b, err := c.Append(nil, &v)
		if err != nil {
			t.Fatal(err)
		}
		// Mutations: bytes changed, cut, or appended, or an unknown field.
		for range r.IntN(3) {
			switch k := r.IntN(5); {
			case k == 3:
				// A second occurrence of a nested message: merged.
				extra, _ := c.Append(nil, &flatAll{In: flatInner{N: 5, M: flatMost{S: "again"}}})
				b = append(b, extra...)
			case k == 0 && len(b) > 0:
				b[r.IntN(len(b))] = byte(r.IntN(256))
			case k == 1 && len(b) > 0:
				b = b[:r.IntN(len(b))]
			case k == 2:
				b = append(b, byte(r.IntN(256)), byte(r.IntN(256)))
			default:
				b = append(b, 0x78, 0x05) // field 15, varint
			}
		}
		prev := flatAll{S: "old", I64: 9, Raw: []byte("old"), Far: "old", In: flatInner{S: "old", M: flatMost{X: 1}}}
		for _, merge := range []bool{false, true} {
			got, want := prev, prev
			d1, d2 := &decoder{src: b}, &decoder{src: b}
			e1 := d1.decodeFlat(m, unsafe.Pointer(&got), 0, len(b), 1, merge)
			setFlat(m, false)
			e2 := d2.decodeMessage(m, unsafe.Pointer(&want), 0, len(b), 1, merge)
			setFlat(m, true)
			if (e1 == nil) != (e2 == nil) || e1 != nil && finishDecode(e1, m).Error() != finishDecode(e2, m).Error() {
				t.Fatalf("round %d merge %v: decodeFlat error %v, decodeMessage error %v (input % x)", round, merge, e1, e2, b)
			}
			// Compared by their bytes: a float may be a NaN.
			if gb, wb := mustAppend(t, c, &got), mustAppend(t, c, &want); e1 == nil && !bytes.Equal(gb, wb) {
				t.Fatalf("round %d merge %v: decodeFlat gave\n%+v\ndecodeMessage\n%+v\n(input % x)", round, merge, got, want, b)
			}
		}
		// Through the parent: by value, repeated, and merged.
		var pb []byte
		pb = append(pb, 0x0a, byte(len(b)))
		pb = append(pb, b...)
		pb = append(pb, 0x12, byte(len(b)))
		pb = append(pb, b...)
		pb = append(pb, 0x0a, byte(len(b)))
		pb = append(pb, b...)
		if len(b) >= 0x80 {
			continue
		}
		var p1, p2 flatParent
		d1, d2 := &decoder{src: pb}, &decoder{src: pb}
		e1 := d1.decodeMessage(pm, unsafe.Pointer(&p1), 0, len(pb), 0, false)
		setFlat(m, false)
		e2 := d2.decodeMessage(pm, unsafe.Pointer(&p2), 0, len(pb), 0, false)
		setFlat(m, true)
		if (e1 == nil) != (e2 == nil) || e1 != nil && finishDecode(e1, pm).Error() != finishDecode(e2, pm).Error() {
			t.Fatalf("round %d: in a parent, with decodeFlat error %v, without %v", round, e1, e2)
		}
		if e1 == nil && !bytes.Equal(mustAppend(t, pc, &p1), mustAppend(t, pc, &p2)) {
			t.Fatalf("round %d: in a parent, with decodeFlat\n%+v\nwithout\n%+v", round, p1, p2)
		}
	}
}

func mustAppend[T any](t *testing.T, c Codec[T], v *T) []byte {
	t.Helper()
	b, err := c.Append(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeRejectsInvalidUTF8Anywhere puts a byte that is not UTF-8 at
// every position of strings of every length up to 40, in a flat message
// (decodeFlat) and in one that is not (decodeFrom): the decoders test short
// strings for ASCII in overlapping words, which must cover every byte.
func TestDecodeRejectsInvalidUTF8Anywhere(t *testing.T) {
	type notFlat struct {
		S string   `proto:"1"`
		R []string `proto:"2"`
	}
	fc, nc := MustFor[flatMost](), MustFor[notFlat]()
	for n := 1; n <= 40; n++ {
		for at := range n {
			s := []byte(strings.Repeat("a", n))
			s[at] = 0xff
			var fv flatMost
			if err := fc.Decode(append([]byte{0x12, byte(n)}, s...), &fv); err == nil || !strings.Contains(err.Error(), "invalid UTF-8") {
				t.Errorf("flat, %d bytes, 0xff at %d: error %v, want invalid UTF-8", n, at, err)
			}
			var nv notFlat
			if err := nc.Decode(append([]byte{0x0a, byte(n)}, s...), &nv); err == nil || !strings.Contains(err.Error(), "invalid UTF-8") {
				t.Errorf("not flat, %d bytes, 0xff at %d: error %v, want invalid UTF-8", n, at, err)
			}
		}
	}
}
