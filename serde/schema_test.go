package serde_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/serde"
)

var updateGolden = flag.Bool("update-fingerprints", false, "rewrite testdata/schema/*.fingerprint")

func mustSchema[T any](t testing.TB) serde.Schema {
	t.Helper()
	s, err := serde.SchemaOf[T]()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSchemaOfOrder(t *testing.T) {
	s := mustSchema[datagen.OrderCreatedEvent](t)
	if s.Root != "OrderCreatedEvent" || s.Messages[0].Name != "OrderCreatedEvent" {
		t.Fatalf("root %q, first message %q", s.Root, s.Messages[0].Name)
	}
	var names []string
	for _, m := range s.Messages {
		names = append(names, m.Name)
	}
	if got := strings.Join(names, ","); got != "OrderCreatedEvent,Money,OrderLineItem,OrderMetadata" {
		t.Fatalf("messages %s", got)
	}
	items := s.Message("OrderCreatedEvent").Field(3)
	if items.Name != "items" || items.Kind != serde.KindMessage || items.Card != serde.Repeated || items.Type != "OrderLineItem" {
		t.Fatalf("items field: %+v", items)
	}
	tags := s.Message("OrderMetadata").Field(3)
	if tags.Card != serde.Map || tags.MapKey != serde.KindString || tags.Kind != serde.KindString {
		t.Fatalf("tags field: %+v", tags)
	}
	qty := s.Message("OrderLineItem").Field(3)
	if qty.Kind != serde.KindInt32 || qty.Bits != 32 || qty.GoType != "int32" {
		t.Fatalf("quantity field: %+v", qty)
	}
}

func TestSchemaKindsAndCardinality(t *testing.T) {
	s := mustSchema[Kitchen](t)
	k := s.Message("Kitchen")
	cases := map[uint32]struct {
		kind serde.Kind
		card serde.Cardinality
		bits uint32
	}{
		3:  {serde.KindInt32, serde.Singular, 8},
		4:  {serde.KindSint32, serde.Singular, 16},
		9:  {serde.KindFixed32, serde.Singular, 16},
		18: {serde.KindEnum, serde.Singular, 32},
		20: {serde.KindMessage, serde.Optional, 0},
		21: {serde.KindInt64, serde.Optional, 64},
		24: {serde.KindTimestamp, serde.Singular, 0},
		25: {serde.KindDuration, serde.Singular, 0},
		31: {serde.KindSint64, serde.Repeated, 64},
		37: {serde.KindMessage, serde.Repeated, 0},
		53: {serde.KindInt32, serde.Map, 32},
	}
	for num, want := range cases {
		f := k.Field(num)
		if f == nil || f.Kind != want.kind || f.Card != want.card || f.Bits != want.bits {
			t.Errorf("field %d: got %+v, want kind %v card %v bits %d", num, f, want.kind, want.card, want.bits)
		}
	}
	if f := k.Field(53); f.MapKey != serde.KindBool {
		t.Errorf("map<bool, int32> key kind %v", f.MapKey)
	}
	if f := k.Field(18); f.Type != "Status" {
		t.Errorf("enum type name %q", f.Type)
	}
}

type withReserved struct {
	A int32    `proto:"1"`
	_ struct{} `proto:"reserved=4,9-11,name=old_total"`
	B string   `proto:"2"`
}

type reusesReservedNumber struct {
	A int32    `proto:"10"`
	_ struct{} `proto:"reserved=9-11"`
}

type reusesReservedName struct {
	OldTotal int64    `proto:"3"`
	_        struct{} `proto:"reserved=name=old_total"`
}

type badReserved struct {
	_ struct{} `proto:"reserved=11-9"`
}

func TestReservedDeclarations(t *testing.T) {
	s := mustSchema[withReserved](t)
	m := s.Message("withReserved")
	if len(m.Reserved) != 2 || m.Reserved[1] != (serde.Range{From: 9, To: 11}) || m.ReservedNames[0] != "old_total" {
		t.Fatalf("reserved: %+v %v", m.Reserved, m.ReservedNames)
	}
	if !m.IsReserved(10) || m.IsReserved(5) {
		t.Fatal("IsReserved wrong")
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{errOf[reusesReservedNumber](), "uses number 10, which reusesReservedNumber declares reserved"},
		{errOf[reusesReservedName](), `uses name "old_total"`},
		{errOf[badReserved](), "not a range N-M"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", c.err, c.want)
		}
	}
}

func TestSchemaBinaryAndJSONRoundTrip(t *testing.T) {
	for _, s := range []serde.Schema{mustSchema[datagen.OrderCreatedEvent](t), mustSchema[Kitchen](t), mustSchema[withReserved](t), mustSchema[linked](t)} {
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back serde.Schema
		if err := back.UnmarshalBinary(b); err != nil {
			t.Fatalf("%s: %v", s.Root, err)
		}
		if back.Fingerprint() != s.Fingerprint() {
			t.Fatalf("%s: binary round trip changed the fingerprint", s.Root)
		}
		fromJSON, err := serde.ParseSchema([]byte(s.JSON()))
		if err != nil {
			t.Fatalf("%s: %v", s.Root, err)
		}
		if fromJSON.Fingerprint() != s.Fingerprint() {
			t.Fatalf("%s: JSON round trip changed the fingerprint:\n%s", s.Root, s.JSON())
		}
		parsed, err := serde.ParseSchema(b)
		if err != nil || parsed.Fingerprint() != s.Fingerprint() {
			t.Fatalf("%s: ParseSchema of binary: %v", s.Root, err)
		}
	}
	if mustSchema[datagen.OrderCreatedEvent](t).Fingerprint() == mustSchema[datagen.GPSPoint](t).Fingerprint() {
		t.Fatal("different schemas share a fingerprint")
	}
}

// TestFingerprintGolden pins the fingerprints of the demo types: a change
// means schemas stored by earlier builds no longer match, which must be a
// decision, not an accident. Update with -update-fingerprints.
func TestFingerprintGolden(t *testing.T) {
	got := "OrderCreatedEvent " + mustSchema[datagen.OrderCreatedEvent](t).Fingerprint() + "\n" +
		"GPSPoint " + mustSchema[datagen.GPSPoint](t).Fingerprint() + "\n"
	path := filepath.Join("testdata", "schema", "demo.fingerprints")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-fingerprints to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("fingerprints changed:\n got %s\nwant %s", got, want)
	}
}

func TestCorruptSchemaBlobs(t *testing.T) {
	good, _ := mustSchema[datagen.OrderCreatedEvent](t).MarshalBinary()
	var s serde.Schema
	for n := 0; n < len(good); n++ {
		if err := s.UnmarshalBinary(good[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: accepted", n)
		}
	}
	for i := 0; i < len(good); i++ {
		bad := bytes.Clone(good)
		bad[i] ^= 0x20
		if err := s.UnmarshalBinary(bad); err == nil {
			t.Fatalf("flipped a bit in byte %d: accepted", i)
		}
	}
	if err := s.UnmarshalBinary([]byte("not a schema at all")); err == nil || !strings.Contains(err.Error(), "not a schema blob") {
		t.Fatalf("wrong magic: %v", err)
	}
	if _, err := serde.ParseSchema([]byte(`{"root": "Missing", "messages": []}`)); err == nil || !strings.Contains(err.Error(), "root") {
		t.Fatalf("JSON without its root message: %v", err)
	}
	if _, err := serde.ParseSchema([]byte(`{"root": "A", "messages": [{"name": "A", "fields": [{"number": 1, "name": "x", "kind": "message", "type": "B"}]}]}`)); err == nil || !strings.Contains(err.Error(), `refers to message "B"`) {
		t.Fatalf("dangling message reference: %v", err)
	}
	if _, err := serde.ParseSchema([]byte(`{"root": "A", "messages": [{"name": "A", "fields": [{"number": 1, "name": "x", "kind": "float128"}]}]}`)); err == nil {
		t.Fatal("unknown kind accepted")
	}
}

// FuzzSchemaBlob feeds arbitrary bytes to the schema readers: never a panic,
// and what is accepted is a valid schema that survives a round trip.
func FuzzSchemaBlob(f *testing.F) {
	good, _ := mustSchema[datagen.OrderCreatedEvent](f).MarshalBinary()
	f.Add(good)
	k, _ := mustSchema[Kitchen](f).MarshalBinary()
	f.Add(k)
	f.Add([]byte(mustSchema[withReserved](f).JSON()))
	f.Add([]byte("EDSC\x01"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := serde.ParseSchema(in)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted an invalid schema: %v", err)
		}
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		back, err := serde.ParseSchema(b)
		if err != nil || back.Fingerprint() != s.Fingerprint() {
			t.Fatalf("round trip: %v", err)
		}
	})
}
