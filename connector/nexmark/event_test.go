package nexmark

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/eddyflow/eddy/serde"
)

var update = flag.Bool("update", false, "rewrite testdata/first10.jsonl")

// TestGoldenJSON pins the first 10 events of the default source (seed 1),
// as JSON lines: the shape, the field names and the generator's output.
// Run with -update after a deliberate change of the generator.
func TestGoldenJSON(t *testing.T) {
	src := mustNew(t)
	var got []byte
	for i := range int64(10) {
		e := src.Event(i)
		got = append(e.AppendJSON(got), '\n')
	}
	path := filepath.Join("testdata", "first10.jsonl")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the first 10 events changed:\n%s\nwant:\n%s", got, want)
	}
}

// TestJSONShape checks the field names of each kind of record against the
// reference's columns, and that the two other records are null.
func TestJSONShape(t *testing.T) {
	src := mustNew(t)
	want := map[string][]string{
		"person":  {"city", "creditCard", "dateTime", "emailAddress", "extra", "id", "name", "state"},
		"auction": {"category", "dateTime", "description", "expires", "extra", "id", "initialBid", "itemName", "reserve", "seller"},
		"bid":     {"auction", "bidder", "channel", "dateTime", "extra", "price", "url"},
	}
	for i, kind := range map[int64]string{0: "person", 1: "auction", 4: "bid"} {
		e := src.Event(i)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(e.AppendJSON(nil), &m); err != nil {
			t.Fatal(err)
		}
		if keys := sortedKeys(m); !slices.Equal(keys, []string{"auction", "bid", "event_type", "person"}) {
			t.Fatalf("event keys %v", keys)
		}
		for _, k := range []string{"person", "auction", "bid"} {
			if (k == kind) == (string(m[k]) == "null") {
				t.Fatalf("event %d: %s is %s", i, k, m[k])
			}
		}
		var rec map[string]any
		if err := json.Unmarshal(m[kind], &rec); err != nil {
			t.Fatal(err)
		}
		if keys := sortedKeys(rec); !slices.Equal(keys, want[kind]) {
			t.Fatalf("%s keys %v, want %v", kind, keys, want[kind])
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// marshalStd is encoding/json's encoding of e without HTML escaping and
// without the newline: what AppendJSON promises to write.
func marshalStd(t testing.TB, e *Event) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// TestAppendJSONMatchesEncodingJSON: AppendJSON writes encoding/json's
// bytes, and they decode back to the event.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	src := mustNew(t, Seed(3))
	for i := range int64(3_000) {
		e := src.Event(i)
		got := e.AppendJSON(nil)
		if want := marshalStd(t, &e); !bytes.Equal(got, want) {
			t.Fatalf("event %d:\n%s\nencoding/json:\n%s", i, got, want)
		}
		var back Event
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("event %d: JSON round trip gives %+v", i, back)
		}
	}
}

// FuzzAppendJSONString: strings that need escaping come out as
// encoding/json writes them.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x01\b\f\n\r\t\x1f", "<&>", "é\u2028\u2029\u2027", "\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			t.Skip("encoding/json rewrites invalid UTF-8; the generator writes none")
		}
		e := Event{Kind: BidEvent, Bid: &Bid{Channel: s, URL: s, Extra: s}}
		if got, want := e.AppendJSON(nil), marshalStd(t, &e); !bytes.Equal(got, want) {
			t.Fatalf("%q:\n%s\nencoding/json:\n%s", s, got, want)
		}
	})
}

// TestSerdeRoundTrip: events are serde messages (Eddy checkpoints and
// shuffles them), and decoding into a used record gives the event back.
func TestSerdeRoundTrip(t *testing.T) {
	codec, err := serde.For[Event]()
	if err != nil {
		t.Fatal(err)
	}
	proto, err := serde.ProtoFile("nexmark", Event{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Kind event_type = 1;", "Person person = 2;", "string email_address = 3;", "PERSON = 0;", "BID = 2;"} {
		if !strings.Contains(proto, want) {
			t.Errorf(".proto lacks %q:\n%s", want, proto)
		}
	}
	src := mustNew(t, Seed(4))
	var buf []byte
	var back Event
	for i := range int64(2_000) {
		e := src.Event(i)
		if buf, err = codec.Append(buf[:0], &e); err != nil {
			t.Fatal(err)
		}
		if n := codec.Size(&e); n != len(buf) {
			t.Fatalf("event %d: Size %d, encoded %d bytes", i, n, len(buf))
		}
		if err := codec.Decode(buf, &back); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("event %d: serde round trip gives %+v, want %+v", i, back, e)
		}
	}
}
