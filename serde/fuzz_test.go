package serde_test

import (
	"bytes"
	"testing"

	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/serde"
)

// FuzzDecode feeds arbitrary bytes to Decode. Decode must never panic; when it
// accepts the input, the value must encode, and encoding must be a fixed
// point: decode(encode(v)) encodes to the same bytes again.
func FuzzDecode(f *testing.F) {
	order := datagen.SampleOrder(1)
	b, _ := serde.MustFor[datagen.OrderCreatedEvent]().Append(nil, &order)
	f.Add(b)
	k := sampleKitchen()
	kb, _ := serde.MustFor[Kitchen]().Append(nil, &k)
	f.Add(kb)
	f.Add([]byte{0x0a, 0x02, 0xc3, 0x28})
	f.Add([]byte{0x33, 0x08, 0x07, 0x34})
	f.Add([]byte{0xa2, 0x06, 0x04, 0x08, 0x01, 0x10, 0x05})
	// Known fields with other wire types (kept as unknown fields).
	f.Add([]byte{0x08, 0x01, 0x12, 0x01, 'x', 0x1d, 1, 2, 3, 4, 0x20, 0x03})
	// A Timestamp-shaped body out of range, and deep nesting.
	f.Add([]byte{0x0a, 0x06, 0x08, 0x80, 0x80, 0x80, 0x80, 0x40})
	deep := []byte{}
	for range 300 {
		deep = appendLenPrefixed(deep)
	}
	f.Add(deep)
	f.Fuzz(func(t *testing.T, in []byte) {
		checkFixedPoint[datagen.OrderCreatedEvent](t, in)
		checkFixedPoint[Kitchen](t, in)
		checkFixedPoint[linked](t, in)
	})
}

func checkFixedPoint[T any](t *testing.T, in []byte) {
	c := serde.MustFor[T]()
	var v T
	if err := c.Decode(in, &v); err != nil {
		return
	}
	b1, err := c.Append(nil, &v)
	if err != nil {
		t.Fatalf("accepted input does not encode: %v", err)
	}
	if c.Size(&v) != len(b1) {
		t.Fatalf("Size %d != %d", c.Size(&v), len(b1))
	}
	var w T
	if err := c.Decode(b1, &w); err != nil {
		t.Fatalf("own encoding does not decode: %v", err)
	}
	b2, err := c.Append(nil, &w)
	if err != nil || !bytes.Equal(b1, b2) {
		t.Fatalf("encoding is not a fixed point:\n% x\n% x", b1, b2)
	}
}
