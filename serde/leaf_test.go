package serde

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"
)

// leafAll is a leaf message (message.leaf) with a field of every kind a leaf
// holds, numbers on both sides of 16 (one- and two-byte keys).
type leafAll struct {
	S   string  `proto:"1"`
	I64 int64   `proto:"2"`
	I32 int32   `proto:"3"`
	U32 uint32  `proto:"4"`
	B   bool    `proto:"5"`
	F64 float64 `proto:"6"`
	F32 float32 `proto:"7"`
	Sz  int64   `proto:"8,zigzag"`
	Fx  uint64  `proto:"9,fixed"`
	Raw []byte  `proto:"10"`
	I8  int8    `proto:"11"`
	Far string  `proto:"20"`
}

// leafParent holds leaf messages the three ways decodeMessage hands them to
// decodeLeaf: by value, repeated, and as a second occurrence (a merge).
type leafParent struct {
	One  leafAll   `proto:"1"`
	Many []leafAll `proto:"2"`
}

// TestDecodeLeafMatchesDecodeMessage decodes mutations of valid leaf
// messages with decodeLeaf and with decodeMessage, into fresh and used
// values, and demands the same values and the same errors, paths and
// offsets included.
func TestDecodeLeafMatchesDecodeMessage(t *testing.T) {
	pm, err := planFor(reflect.TypeFor[leafParent]())
	if err != nil {
		t.Fatal(err)
	}
	m := pm.fields[0].msg
	if !m.leaf || pm.leaf {
		t.Fatalf("leafAll leaf = %v, leafParent leaf = %v; want true, false", m.leaf, pm.leaf)
	}
	c := MustFor[leafAll]()
	r := rand.New(rand.NewPCG(3, 4))
	strs := []string{"", "EUR", "prod-00001234-0007", "é", "a\x00b", string(make([]byte, 200)), "long enough to pass the sixteen bytes"}
	for round := range 20000 {
		v := leafAll{
			S: strs[r.IntN(len(strs))], I64: r.Int64() >> r.IntN(64), I32: int32(r.Uint32()) >> r.IntN(32),
			U32: r.Uint32() >> r.IntN(32), B: r.IntN(2) == 1, F64: r.Float64(), Sz: r.Int64() >> r.IntN(64) * int64(1-2*r.IntN(2)),
			Fx: r.Uint64(), Raw: []byte(strs[r.IntN(len(strs))]), I8: int8(r.IntN(256) - 128), Far: strs[r.IntN(len(strs))],
		}
		if r.IntN(4) == 0 {
			v.F32 = 1.5
		}
		b, err := c.Append(nil, &v)
		if err != nil {
			t.Fatal(err)
		}
		// Mutations: bytes changed, cut, or appended, or an unknown field.
		for range r.IntN(3) {
			switch k := r.IntN(4); {
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
		prev := leafAll{S: "old", I64: 9, Raw: []byte("old"), Far: "old"}
		for _, merge := range []bool{false, true} {
			got, want := prev, prev
			d1, d2 := &decoder{src: b}, &decoder{src: b}
			e1 := d1.decodeLeaf(m, unsafe.Pointer(&got), 0, len(b), 1, merge)
			e2 := d2.decodeMessage(m, unsafe.Pointer(&want), 0, len(b), 1, merge)
			if (e1 == nil) != (e2 == nil) || e1 != nil && e1.Error() != e2.Error() {
				t.Fatalf("round %d merge %v: decodeLeaf error %v, decodeMessage error %v (input % x)", round, merge, e1, e2, b)
			}
			var de1, de2 *decodeErr
			if errors.As(e1, &de1) && errors.As(e2, &de2) && (de1.offset != de2.offset || !reflect.DeepEqual(de1.segs, de2.segs)) {
				t.Fatalf("round %d: error at %d %v, want at %d %v", round, de1.offset, de1.segs, de2.offset, de2.segs)
			}
			if e1 == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d merge %v: decodeLeaf gave\n%+v\ndecodeMessage\n%+v\n(input % x)", round, merge, got, want, b)
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
		var p1, p2 leafParent
		d1, d2 := &decoder{src: pb}, &decoder{src: pb}
		e1 := d1.decodeMessage(pm, unsafe.Pointer(&p1), 0, len(pb), 0, false)
		pm.fields[0].msg.leaf, pm.fields[1].msg.leaf = false, false
		e2 := d2.decodeMessage(pm, unsafe.Pointer(&p2), 0, len(pb), 0, false)
		pm.fields[0].msg.leaf, pm.fields[1].msg.leaf = true, true
		if (e1 == nil) != (e2 == nil) || e1 != nil && finishDecode(e1, pm).Error() != finishDecode(e2, pm).Error() {
			t.Fatalf("round %d: in a parent, with decodeLeaf error %v, without %v", round, e1, e2)
		}
		if e1 == nil && !reflect.DeepEqual(p1, p2) {
			t.Fatalf("round %d: in a parent, with decodeLeaf\n%+v\nwithout\n%+v", round, p1, p2)
		}
	}
}
