package serde_test

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/serde"
	"google.golang.org/protobuf/encoding/protowire"
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
		Name string           `proto:"1"`
		N    int8             `proto:"2"`
		U    uint16           `proto:"3"`
		In   *Inner           `proto:"4"`
		R    []int64          `proto:"5"`
		M    map[string]int64 `proto:"6"`
		MM   map[string]Inner `proto:"7"`
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
		// protobuf-go rejects these field numbers inside map entries and
		// groups too, not only at the top level of a message.
		{"map entry field zero", []byte{0x32, 0x02, 0x00, 0x01}, "invalid field number 0 in a map entry"},
		{"map entry field too big", []byte{0x32, 0x06, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00}, "invalid field number 536870912 in a map entry"},
		{"message map entry field zero", []byte{0x3a, 0x02, 0x00, 0x01}, "invalid field number 0 in a map entry"},
		{"group field zero", []byte{0x33, 0x00, 0x01, 0x34}, "invalid field number 0 in group 6"},
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
	// 10,050 levels of {2: {2: ...}} built by hand: deeper than serde (and
	// protobuf-go) accept.
	deep := []byte{}
	for i := 0; i < 10_050; i++ {
		deep = appendLenPrefixed(deep)
	}
	de := decodeErr[linked](t, deep)
	if !strings.Contains(de.Error(), "nesting deeper than 10000") {
		t.Fatalf("got %v", de)
	}
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

// TestWrongWireTypeIsUnknown: a known field that arrives with another wire
// type is an unknown field, as protobuf-go treats it: the field keeps its
// zero value, the bytes are kept in the message's Unknown field, and
// encoding writes them back.
func TestWrongWireTypeIsUnknown(t *testing.T) {
	type M struct {
		Name  string  `proto:"1"`
		N     int64   `proto:"2"`
		Vals  []int32 `proto:"3"`
		Inner *struct {
			A int32 `proto:"1"`
		} `proto:"4"`
		Rest serde.Unknown `proto:"unknown"`
	}
	c := serde.MustFor[M]()
	for _, tc := range []struct {
		name string
		in   []byte
		want M
	}{
		{"varint for a string", []byte{0x08, 0x01, 0x10, 0x05}, M{N: 5}},
		{"bytes for an int64", []byte{0x12, 0x01, 'x', 0x0a, 0x01, 'a'}, M{Name: "a"}},
		{"fixed32 for a repeated int32", []byte{0x1d, 1, 2, 3, 4, 0x18, 0x07}, M{Vals: []int32{7}}},
		{"varint for a message", []byte{0x20, 0x03}, M{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got M
			if err := c.Decode(tc.in, &got); err != nil {
				t.Fatal(err)
			}
			if got.Name != tc.want.Name || got.N != tc.want.N || len(got.Vals) != len(tc.want.Vals) || got.Inner != nil {
				t.Fatalf("decoded %+v, want %+v", got, tc.want)
			}
			for i := range got.Vals {
				if got.Vals[i] != tc.want.Vals[i] {
					t.Fatalf("decoded %+v, want %+v", got, tc.want)
				}
			}
			if len(got.Rest) == 0 {
				t.Fatal("the mistyped field was not kept as unknown")
			}
			out, err := c.Append(nil, &got)
			if err != nil {
				t.Fatal(err)
			}
			var again M
			if err := c.Decode(out, &again); err != nil || !bytes.Equal(again.Rest, got.Rest) {
				t.Fatalf("round trip: %v, unknown % x, want % x", err, again.Rest, got.Rest)
			}
		})
	}
}

// TestDurationOverflow: a Duration whose seconds and nanos together pass
// the range of time.Duration is an error, not a wrapped negative value; the
// extremes that fit decode exactly.
func TestDurationOverflow(t *testing.T) {
	type D struct {
		D time.Duration `proto:"1"`
	}
	c := serde.MustFor[D]()
	for _, tc := range []struct {
		sec, nanos int64
		ok         bool
	}{
		{9223372036, 854775807, true},
		{9223372036, 854775808, false},
		{-9223372036, -854775808, true},
		{-9223372036, -854775809, false},
		{9223372037, 0, false},
	} {
		var d D
		err := c.Decode(timeField(tc.sec, tc.nanos), &d)
		if tc.ok {
			want := time.Duration(tc.sec)*time.Second + time.Duration(tc.nanos)
			if err != nil || d.D != want {
				t.Errorf("%ds %dns: %v, %d; want %d", tc.sec, tc.nanos, err, d.D, want)
			}
		} else if err == nil || !strings.Contains(err.Error(), "does not fit time.Duration") {
			t.Errorf("%ds %dns: want an overflow error, got %v (%d)", tc.sec, tc.nanos, err, d.D)
		}
	}
}

// TestTimestampRange: a Timestamp outside google.protobuf.Timestamp's range
// (years 1 to 9999, nanos in [0, 1e9)) is an error naming the field; the
// extremes decode exactly.
func TestTimestampRange(t *testing.T) {
	type T struct {
		At time.Time `proto:"1"`
	}
	c := serde.MustFor[T]()
	for _, tc := range []struct {
		sec, nanos int64
		ok         bool
	}{
		{-62135596800, 0, true},
		{253402300799, 999999999, true},
		{-62135596801, 0, false},
		{253402300800, 0, false},
		{0, -1, false},
		{0, 1e9, false},
	} {
		var v T
		err := c.Decode(timeField(tc.sec, tc.nanos), &v)
		if tc.ok {
			if want := time.Unix(tc.sec, tc.nanos).UTC(); err != nil || !v.At.Equal(want) {
				t.Errorf("%ds %dns: %v, %v; want %v", tc.sec, tc.nanos, err, v.At, want)
			}
		} else if err == nil || !strings.Contains(err.Error(), "timestamp") || !strings.Contains(err.Error(), "T.at (1)") {
			t.Errorf("%ds %dns: want a range error naming the field, got %v", tc.sec, tc.nanos, err)
		} else {
			t.Log(err)
		}
	}
}

// TestTimestampOutOfRangeDoesNotEncode: a time.Time that Decode would
// refuse is refused on encode, so state holding it fails its checkpoint
// instead of its restore.
func TestTimestampOutOfRangeDoesNotEncode(t *testing.T) {
	type T struct {
		At time.Time `proto:"1"`
	}
	c := serde.MustFor[T]()
	for _, at := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC)} {
		_, err := c.Append(nil, &T{At: at})
		var ee *serde.EncodeError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), "outside google.protobuf.Timestamp's range") {
			t.Errorf("%v: want an EncodeError, got %v", at, err)
		}
	}
	for _, at := range []time.Time{{}, time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)} {
		b, err := c.Append(nil, &T{At: at})
		var got T
		if err == nil {
			err = c.Decode(b, &got)
		}
		if err != nil || !got.At.Equal(at) {
			t.Errorf("%v: %v, %v", at, err, got.At)
		}
	}
}

// timeField is field 1 holding a Timestamp or Duration body of sec and
// nanos, written as protobuf does, whatever their range.
func timeField(sec, nanos int64) []byte {
	body := protowire.AppendTag(nil, 1, protowire.VarintType)
	body = protowire.AppendVarint(body, uint64(sec))
	body = protowire.AppendTag(body, 2, protowire.VarintType)
	body = protowire.AppendVarint(body, uint64(int32(nanos)))
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(b, body)
}

// TestMapEntryWrongWireType: in a map entry, a key or value with another
// wire type is skipped as protobuf-go skips it: the entry keeps the zero
// value in its place.
func TestMapEntryWrongWireType(t *testing.T) {
	type M struct {
		Tags map[string]int64 `proto:"1"`
		Subs map[string]*struct {
			A int32 `proto:"1"`
		} `proto:"2"`
	}
	in := []byte{
		0x0a, 0x06, 0x0a, 0x01, 'k', 0x12, 0x01, 'x', // Tags: {"k": bytes "x"}
		0x12, 0x05, 0x0a, 0x01, 's', 0x10, 0x07, // Subs: {"s": varint 7}
		0x0a, 0x04, 0x08, 0x01, 0x10, 0x03, // Tags: {varint 1 as the key, 3}
	}
	var got M
	if err := serde.MustFor[M]().Decode(in, &got); err != nil {
		t.Fatal(err)
	}
	if v, ok := got.Tags["k"]; !ok || v != 0 || len(got.Tags) != 2 || got.Tags[""] != 3 {
		t.Fatalf("Tags = %v, want {k: 0, \"\": 3}", got.Tags)
	}
	if s, ok := got.Subs["s"]; !ok || s == nil || s.A != 0 {
		t.Fatalf("Subs = %v, want {s: {}}", got.Subs)
	}
}
