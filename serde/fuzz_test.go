package serde_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/serde/internal/testpb"
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
	addOneofSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		checkFixedPoint[datagen.OrderCreatedEvent](t, in)
		checkFixedPoint[Kitchen](t, in)
		checkFixedPoint[linked](t, in)
		checkFixedPoint[ooAll](t, in)
	})
}

// addOneofSeeds adds encodings of ooAll: random values, and members of one
// oneof repeated and interleaved with other fields.
func addOneofSeeds(f *testing.F) {
	c := serde.MustFor[ooAll]()
	g := newGen(21)
	for range 8 {
		v := g.ooAll(0)
		b, _ := c.Append(nil, &v)
		f.Add(b)
	}
	f.Add([]byte{0x9a, 0x02, 2, 0x10, 5, 0x38, 9, 0x20, 1, 0x9a, 0x02, 3, 0x0a, 1, 'q', 0x12, 1, 'n', 0x70, 3})
	f.Add([]byte{0x42, 4, 0x10, 1, 0x1a, 0, 0x82, 1, 2, 0x18, 1})
}

// FuzzOneofInterop decodes arbitrary bytes as ooAll with serde and as
// testpb.OneofAll with protobuf-go: both must accept or both reject, and
// agree on the value (which member of each oneof is set, above all). The
// one difference allowed is documented: serde refuses a Timestamp outside
// years 1 to 9999 and a Duration that time.Duration cannot hold, which
// protobuf-go reads.
func FuzzOneofInterop(f *testing.F) {
	addOneofSeeds(f)
	c := serde.MustFor[ooAll]()
	f.Fuzz(func(t *testing.T, in []byte) {
		var got ooAll
		serr := c.Decode(in, &got)
		var pb testpb.OneofAll
		perr := proto.Unmarshal(in, &pb)
		if serr != nil && perr == nil && outOfRangeTime(serr) {
			return
		}
		if (serr == nil) != (perr == nil) {
			t.Fatalf("serde: %v; protobuf-go: %v", serr, perr)
		}
		if serr != nil {
			return
		}
		var want ooAll
		ooFromPB(pb.ProtoReflect(), reflect.ValueOf(&want).Elem())
		if d := diffGo(&want, &got); d != "" {
			t.Fatalf("serde and protobuf-go decode differently: %s", d)
		}
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
	// Into a buffer with room, so the encoder's fast path runs from the
	// first op.
	b2, err := c.Append(make([]byte, 0, 2*len(b1)+64), &w)
	if err != nil || !bytes.Equal(b1, b2) {
		t.Fatalf("encoding is not a fixed point:\n% x\n% x", b1, b2)
	}
}

// outOfRangeTime reports whether err is serde's refusal of a Timestamp or
// Duration outside the range it maps to time.Time or time.Duration.
func outOfRangeTime(err error) bool {
	var de *serde.DecodeError
	if !errors.As(err, &de) {
		return false
	}
	return strings.HasPrefix(de.Reason, "timestamp ") && strings.Contains(de.Reason, "is outside") ||
		strings.HasPrefix(de.Reason, "duration ") && strings.Contains(de.Reason, "does not fit")
}
