package serde_test

import (
	"testing"

	"github.com/eddyflow/eddy/serde"
)

type chunkValue struct {
	S *string  `proto:"1,oneof=v"`
	N *int64   `proto:"2,oneof=v"`
	L *chunkKV `proto:"3,oneof=v"`
}

type chunkKV struct {
	Key   string      `proto:"1"`
	Value *chunkValue `proto:"2"`
}

type chunkMsg struct {
	Attrs []chunkKV    `proto:"1"`
	Ptrs  []*chunkKV   `proto:"2"`
	One   *chunkKV     `proto:"3"`
	Vals  []chunkValue `proto:"4"`
}

func chunkSample(n int) chunkMsg {
	var m chunkMsg
	for i := range n {
		s, k := "v", int64(i)
		m.Attrs = append(m.Attrs, chunkKV{Key: "k", Value: &chunkValue{S: &s}})
		m.Ptrs = append(m.Ptrs, &chunkKV{Key: "p", Value: &chunkValue{N: &k}})
		m.Vals = append(m.Vals, chunkValue{L: &chunkKV{Key: "l"}})
	}
	m.One = &chunkKV{Key: "one"}
	return m
}

// TestDecodeChunkedTargets checks that pointer targets, which Decode
// allocates in chunks, are each a value of their own: decoded right, not
// shared between fields, elements or decodes, and no longer allocated one
// by one.
func TestDecodeChunkedTargets(t *testing.T) {
	c := serde.MustFor[chunkMsg]()
	const n = 100
	in := chunkSample(n)
	data, err := c.Append(nil, &in)
	if err != nil {
		t.Fatal(err)
	}
	var a, b chunkMsg
	if err := c.Decode(data, &a); err != nil {
		t.Fatal(err)
	}
	if err := c.Decode(data, &b); err != nil {
		t.Fatal(err)
	}
	// Writing through every pointer of a must change nothing in b, nor any
	// other target of a.
	for i := range a.Attrs {
		*a.Attrs[i].Value.S = "changed"
		a.Ptrs[i].Value.N = nil
		a.Vals[i].L.Key = "changed"
	}
	a.One.Key = "changed"
	for i := range n {
		if *a.Attrs[i].Value.S != "changed" || a.Ptrs[i].Key != "p" || a.Vals[i].L.Key != "changed" {
			t.Fatalf("a: element %d changed through another pointer: %+v %+v %+v", i, a.Attrs[i], a.Ptrs[i], a.Vals[i])
		}
		if *b.Attrs[i].Value.S != "v" || *b.Ptrs[i].Value.N != int64(i) || b.Vals[i].L.Key != "l" {
			t.Fatalf("b: element %d changed by writes to a", i)
		}
	}
	if b.One.Key != "one" {
		t.Fatalf("b.One changed by writes to a")
	}
	again, err := c.Append(nil, &b)
	if err != nil || string(again) != string(data) {
		t.Fatalf("b encodes differently from the input (err %v)", err)
	}

	// 5 targets per element (an attribute's chunkValue and *string, a
	// *chunkKV, its chunkValue and *int64, a *chunkKV in Vals) plus One:
	// one allocation each would be 501 allocations and more.
	allocs := testing.AllocsPerRun(20, func() {
		var v chunkMsg
		if err := c.Decode(data, &v); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("Decode of %d elements: %v allocations", n, allocs)
	if allocs > 100 {
		t.Errorf("Decode of %d elements: %v allocations, want chunked targets (at most 100)", n, allocs)
	}
}

// TestDecodeSinglePointer checks that a message with one pointer target
// allocates it alone: chunks start at one element.
func TestDecodeSinglePointer(t *testing.T) {
	c := serde.MustFor[chunkKV]()
	s := "x"
	data, err := c.Append(nil, &chunkKV{Key: "k", Value: &chunkValue{S: &s}})
	if err != nil {
		t.Fatal(err)
	}
	var v chunkKV
	if err := c.Decode(data, &v); err != nil {
		t.Fatal(err)
	}
	if v.Key != "k" || v.Value == nil || v.Value.S == nil || *v.Value.S != "x" {
		t.Fatalf("decoded %+v", v)
	}
	// The value itself (it escapes), the string arena, the chunkValue and
	// the *string.
	if allocs := testing.AllocsPerRun(20, func() {
		var v chunkKV
		_ = c.Decode(data, &v)
	}); allocs > 4 {
		t.Errorf("Decode: %v allocations, want at most 4", allocs)
	}
}
