package serde_test

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/serde"
)

func decodeErr[T any](t *testing.T, b []byte) *serde.DecodeError {
	t.Helper()
	var v T
	err := serde.MustFor[T]().Decode(b, &v)
	if err == nil {
		t.Fatalf("Decode(% x) succeeded, want an error", b)
	}
	var de *serde.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("Decode error %v is a %T, want *serde.DecodeError", err, err)
	}
	return de
}

func TestTruncatedInputNeverPanics(t *testing.T) {
	v := datagen.SampleOrder(3)
	c := serde.MustFor[datagen.OrderCreatedEvent]()
	b, _ := c.Append(nil, &v)
	var out datagen.OrderCreatedEvent
	failures := 0
	for n := 0; n < len(b); n++ {
		err := c.Decode(b[:n], &out)
		if err == nil {
			continue // cut at a field boundary of the top message: a valid shorter message
		}
		failures++
		var de *serde.DecodeError
		if !errors.As(err, &de) || de.Offset < 0 || de.Offset > n {
			t.Fatalf("prefix %d: error %v has offset outside the input", n, err)
		}
	}
	if failures < len(b)/2 {
		t.Fatalf("only %d of %d prefixes failed: truncation is not detected", failures, len(b))
	}
}

func TestMalformedInputs(t *testing.T) {
	type S struct {
		Name string  `proto:"1"`
		N    int8    `proto:"2"`
		U    uint16  `proto:"3"`
		In   *Inner  `proto:"4"`
		R    []int64 `proto:"5"`
	}
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"overlong varint", []byte{0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, "varint longer than 10 bytes"},
		{"eleven byte varint", []byte{0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, "varint longer"},
		{"truncated varint", []byte{0x10, 0x80}, "truncated"},
		{"length past end", []byte{0x0a, 0x05, 'a', 'b'}, "runs past the end"},
		{"huge length", []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, "runs past the end"},
		{"wrong wire type", []byte{0x08, 0x01}, "wire type 0, but the field is string"},
		{"invalid utf8", []byte{0x0a, 0x02, 0xc3, 0x28}, "invalid UTF-8"},
		{"int8 overflow", []byte{0x10, 0x80, 0x01}, "overflows the field's Go type int8"},
		{"int8 underflow", []byte{0x10, 0xfe, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "overflows"},
		{"uint16 overflow", []byte{0x18, 0x80, 0x80, 0x04}, "overflows the field's Go type uint16"},
		{"field number zero", []byte{0x00, 0x01}, "invalid field number 0"},
		{"invalid wire type", []byte{0x4f}, "invalid wire type 7"},
		{"end group without start", []byte{0x4c}, "end-group 9 without a start"},
		{"unclosed group", []byte{0x33, 0x08, 0x01}, "inside group 6"},
		{"nested truncation", []byte{0x22, 0x03, 0x0a, 0x05, 'x'}, "runs past the end"},
		{"packed run bad fixed", []byte{0x2a, 0x02, 0x80, 0x80}, "truncated"},
		{"nested wrong wire", []byte{0x22, 0x02, 0x11, 0x00}, "truncated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			de := decodeErr[S](t, c.in)
			if !strings.Contains(de.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", de.Error(), c.want)
			}
			if de.Offset < 0 || de.Offset > len(c.in) {
				t.Fatalf("offset %d outside input of %d bytes", de.Offset, len(c.in))
			}
		})
	}
}

func TestDecodeErrorNamesPathAndOffset(t *testing.T) {
	v := datagen.SampleOrder(1)
	v.Items[3].SKU = "SKU-MARK"
	b, _ := serde.MustFor[datagen.OrderCreatedEvent]().Append(nil, &v)
	at := bytes.Index(b, []byte("SKU-MARK"))
	b[at+4] = 0xff
	de := decodeErr[datagen.OrderCreatedEvent](t, b)
	if de.Path != "OrderCreatedEvent.items[3].sku" || de.Numbers != "3.2" || de.Offset != at {
		t.Fatalf("got path %q numbers %q offset %d, want OrderCreatedEvent.items[3].sku 3.2 %d (%v)", de.Path, de.Numbers, de.Offset, at, de)
	}
	if !strings.Contains(de.Error(), "OrderCreatedEvent.items[3].sku (3.2)") {
		t.Fatalf("message %q does not name the field", de.Error())
	}
}

func TestNestingLimitOnDecode(t *testing.T) {
	// 150 levels of {2: {2: ...}} built by hand: deeper than serde accepts.
	body := []byte{0x08, 0x01}
	for i := 0; i < 150; i++ {
		body = append([]byte{0x12, byte(len(body))}, body...)
		if len(body) > 120 {
			break
		}
	}
	// Lengths above 127 need a multi-byte prefix; build deep input properly.
	deep := []byte{}
	for i := 0; i < 150; i++ {
		deep = appendLenPrefixed(deep)
	}
	de := decodeErr[linked](t, deep)
	if !strings.Contains(de.Error(), "nesting deeper than 100") {
		t.Fatalf("got %v", de)
	}
	_ = body
}

func appendLenPrefixed(inner []byte) []byte {
	out := []byte{0x12}
	n := len(inner)
	for n >= 0x80 {
		out = append(out, byte(n)|0x80)
		n >>= 7
	}
	out = append(out, byte(n))
	return append(out, inner...)
}

func TestUnknownFieldsSkipped(t *testing.T) {
	type S struct {
		A int32 `proto:"1"`
	}
	// Unknown varint, fixed64, bytes, fixed32 and a group around the known field.
	b := []byte{
		0x10, 0x96, 0x01,
		0x19, 1, 2, 3, 4, 5, 6, 7, 8,
		0x08, 0x2a,
		0x22, 0x02, 'h', 'i',
		0x2d, 1, 2, 3, 4,
		0x33, 0x08, 0x07, 0x34,
	}
	var s S
	if err := serde.MustFor[S]().Decode(b, &s); err != nil || s.A != 42 {
		t.Fatalf("got %+v, %v", s, err)
	}
}

func TestDecodeMemoryBounded(t *testing.T) {
	// 200 000 empty line items claim nothing but still cost an element each:
	// the allocation must stay a small multiple of the input.
	in := bytes.Repeat([]byte{0x1a, 0x00}, 200_000)
	var v datagen.OrderCreatedEvent
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := serde.MustFor[datagen.OrderCreatedEvent]().Decode(in, &v); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if len(v.Items) != 200_000 {
		t.Fatalf("decoded %d items", len(v.Items))
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	elem := uint64(len(in) / 2 * 112) // one OrderLineItem per 2 input bytes
	if allocated > 2*elem {
		t.Fatalf("allocated %d bytes for %d input bytes (elements need %d)", allocated, len(in), elem)
	}
}
