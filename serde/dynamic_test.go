package serde_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/serde"
)

// TestDecodeDynamicKitchen: every kind, cardinality and encoding option of
// the kitchen-sink type reads back, by schema alone, as the value encoded.
func TestDecodeDynamicKitchen(t *testing.T) {
	k := sampleKitchen()
	b, err := serde.MustFor[Kitchen]().Append(nil, &k)
	if err != nil {
		t.Fatal(err)
	}
	s, err := serde.SchemaOf[Kitchen]()
	if err != nil {
		t.Fatal(err)
	}
	m, err := serde.DecodeDynamic(s, b)
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) any {
		v, ok := m.Get(name)
		if !ok {
			t.Fatalf("no field %s in %s", name, jsonOf(t, m))
		}
		return v
	}
	tp := time.Date(2026, 12, 2, 8, 0, 0, 123, time.UTC)
	for name, want := range map[string]any{
		"b": true, "i": int64(-1), "i8": int64(-128), "i16": int64(32767), "i32": int64(math.MinInt32),
		"i64": int64(math.MinInt64), "u": uint64(math.MaxUint64), "u8": uint64(255), "u16": uint64(65535),
		"u32": uint64(math.MaxUint32), "u64": uint64(math.MaxUint64), "sf32": int64(-5), "sf64": int64(math.MaxInt64),
		"f32": float32(math.Inf(-1)), "s": "héllo, 世界", "st": int64(StatusActive), "opt_i": int64(-7), "opt_s": "opt",
		"opt_b": false, "t": time.Date(1969, 7, 20, 20, 17, 40, 999999999, time.UTC), "d": -90*time.Minute - 1, "tp": tp,
		"big": int64(42),
	} {
		if got := get(name); got != want {
			t.Errorf("%s = %#v, want %#v", name, got, want)
		}
	}
	if got := get("bytes").([]byte); string(got) != "\x00\x01\x02\xff" {
		t.Errorf("bytes = % x", got)
	}
	in := get("in").(*serde.DynamicMessage)
	deep, _ := in.Get("deep")
	if name, _ := deep.(*serde.DynamicMessage).Get("name"); name != "deeper" {
		t.Errorf("in.deep.name = %v", name)
	}
	for name, want := range map[string]string{
		"ri": "[0,-1,1073741824]", "rz": "[-9223372036854775808,0,5]", "rf": `["Infinity",0]`, "rb": "[true,false,true]",
		"rs": `["","a","ü"]`, "r_fx": "[1,4294967295]", "mis": `{"-1":"neg","0":"","1099511627776":"big"}`,
		"mbi": `{"false":0,"true":1}`, "msi": `{"x":{"name":"vx","score":0},"y":{"name":"","score":0}}`,
	} {
		if got := string(serde.AppendDynamicJSON(nil, get(name))); got != want && !sameJSONSet(got, want) {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	// The whole value is valid JSON.
	var anyv any
	if err := json.Unmarshal(jsonOf(t, m), &anyv); err != nil {
		t.Fatalf("JSON form does not parse: %v\n%s", err, jsonOf(t, m))
	}
}

// sameJSONSet compares two JSON objects regardless of key order (map
// fields keep the order met, which is the encoder's sorted order, but a
// test should not depend on it).
func sameJSONSet(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func jsonOf(t *testing.T, m *serde.DynamicMessage) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeDynamicDefaultsAndErrors: absent fields get their zero values
// (optional ones are left out), unknown fields are kept by number, a
// repeated map key keeps the last value, and damage is an error naming
// the field and offset.
func TestDecodeDynamicDefaultsAndErrors(t *testing.T) {
	s, _ := serde.SchemaOf[Kitchen]()
	m, err := serde.DecodeDynamic(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get("opt_i"); ok {
		t.Fatal("absent optional field present")
	}
	if v, _ := m.Get("i32"); v != int64(0) {
		t.Fatalf("absent i32 = %#v", v)
	}
	// Field 99 unknown (varint 5); map 51 with key 1 twice.
	in := []byte{0x98, 0x06, 0x05, 0x9a, 0x03, 0x05, 0x08, 0x01, 0x12, 0x01, 'a', 0x9a, 0x03, 0x05, 0x08, 0x01, 0x12, 0x01, 'b'}
	m, err = serde.DecodeDynamic(s, in)
	if err != nil {
		t.Fatal(err)
	}
	js := string(jsonOf(t, m))
	if !strings.Contains(js, `"#99":5`) || !strings.Contains(js, `"mis":{"1":"b"}`) {
		t.Fatalf("unknown field or map: %s", js)
	}
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{[]byte{0x82, 0x01, 0x02, 0xc3, 0x28}, "Kitchen.s (16) at byte 0: invalid UTF-8"},
		{[]byte{0x9a, 0x01, 0x05, 0x0a}, "Kitchen.in (19) at byte 0"},
		{[]byte{0x08}, "Kitchen.b (1) at byte 0"},
		{[]byte{0xff}, "field key at byte 0"},
	} {
		_, err := serde.DecodeDynamic(s, c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("% x: %v, want %q", c.in, err, c.want)
		}
	}
}

// FuzzDecodeDynamic: DecodeDynamic never panics, its JSON form is valid
// JSON, and it accepts whatever Decode accepts for the same type.
func FuzzDecodeDynamic(f *testing.F) {
	order := datagen.SampleOrder(1)
	b, _ := serde.MustFor[datagen.OrderCreatedEvent]().Append(nil, &order)
	f.Add(b)
	k := sampleKitchen()
	kb, _ := serde.MustFor[Kitchen]().Append(nil, &k)
	f.Add(kb)
	f.Add([]byte{0x0a, 0x06, 0x08, 0x80, 0x80, 0x80, 0x80, 0x40})
	orderSchema, _ := serde.SchemaOf[datagen.OrderCreatedEvent]()
	kitchenSchema, _ := serde.SchemaOf[Kitchen]()
	linkedSchema, _ := serde.SchemaOf[linked]()
	f.Fuzz(func(t *testing.T, in []byte) {
		checkDynamic[datagen.OrderCreatedEvent](t, orderSchema, in)
		checkDynamic[Kitchen](t, kitchenSchema, in)
		checkDynamic[linked](t, linkedSchema, in)
	})
}

func checkDynamic[T any](t *testing.T, s serde.Schema, in []byte) {
	m, err := serde.DecodeDynamic(s, in)
	var v T
	if serr := serde.MustFor[T]().Decode(in, &v); serr == nil && err != nil {
		t.Fatalf("Decode accepts what DecodeDynamic refuses: %v", err)
	}
	if err != nil {
		return
	}
	js, _ := json.Marshal(m)
	if !json.Valid(js) {
		t.Fatalf("invalid JSON: %s", js)
	}
}
