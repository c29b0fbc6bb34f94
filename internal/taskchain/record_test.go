package taskchain

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleRecords() []Record {
	at := time.Date(2026, 12, 5, 1, 2, 3, 456789, time.UTC)
	return []Record{
		{Seq: 1, Epoch: 1, Kind: KindClaim, Owner: "job pid 1 on h since x", Time: at},
		{Seq: 2, Epoch: 1, Kind: KindCommit, Owner: "job pid 1 on h since x", Time: at, Payload: []byte("manifest 17; offset 42"), prevClaim: 1},
		{Seq: 9, Epoch: 4, Kind: KindClaim, Owner: "ünïcode owner", Time: time.Unix(0, -5).UTC(), prevClaim: 7, prevCommit: 8, floor: 6},
		{Seq: 1<<64 - 1, Epoch: 1<<64 - 1, Kind: KindCommit, Owner: strings.Repeat("o", MaxOwner), Time: at,
			Payload: bytes.Repeat([]byte{0xff}, 1000), prevClaim: 1<<64 - 2, prevCommit: 1<<64 - 3, floor: 1<<64 - 1},
	}
}

// Every record round-trips through its encoding.
func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		name := ObjectName("t", r.Seq)
		got, err := decodeRecord(name, r.Seq, appendRecord(nil, &r))
		if err != nil {
			t.Fatalf("record %d: %v", r.Seq, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
		}
	}
}

// Damaged encodings are refused with a *DecodeError naming the object:
// every truncation, bytes added, a record under another seq's name, and
// records whose fields contradict each other.
func TestRecordDecodeErrors(t *testing.T) {
	r := sampleRecords()[1]
	data := appendRecord(nil, &r)
	name := ObjectName("t", r.Seq)
	wantErr := func(what string, b []byte, seq uint64, reason string) {
		t.Helper()
		_, err := decodeRecord(name, seq, b)
		var de *DecodeError
		if !errors.As(err, &de) || de.Object != name || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s: error %v, want a *DecodeError naming %s", what, err, name)
		}
		if !strings.Contains(de.Reason, reason) {
			t.Errorf("%s: reason %q, want it to say %q", what, de.Reason, reason)
		}
	}
	for n := range len(data) {
		wantErr("truncated", data[:n], r.Seq, "")
	}
	wantErr("trailing bytes", append(bytes.Clone(data), 0), r.Seq, "after the payload")
	wantErr("another seq", data, r.Seq+1, "its name says 3")
	wantErr("magic", append([]byte("XTC\x01"), data[4:]...), r.Seq, "not a task chain record")
	wantErr("version", append([]byte("ETC\x02"), data[4:]...), r.Seq, "not a task chain record")
	bad := bytes.Clone(data)
	bad[4] = 9
	wantErr("kind", bad, r.Seq, "unknown kind 9")
	for _, c := range []struct {
		reason string
		edit   func(r *Record)
	}{
		{"epoch 0", func(r *Record) { r.Epoch = 0 }},
		{"previous claim 2 is not before", func(r *Record) { r.prevClaim = 2 }},
		{"previous commit 5 is not before", func(r *Record) { r.prevCommit = 5 }},
		{"floor 3 is after", func(r *Record) { r.floor = 3 }},
		{"a commit with no claim", func(r *Record) { r.prevClaim = 0 }},
		{"a claim with a payload", func(r *Record) { r.Kind = KindClaim }},
		{"empty owner", func(r *Record) { r.Owner = "" }},
		{"unprintable", func(r *Record) { r.Owner = "a\nb" }},
	} {
		e := r
		c.edit(&e)
		wantErr(c.reason, appendRecord(nil, &e), r.Seq, c.reason)
	}
	long := r
	long.Owner = strings.Repeat("o", MaxOwner+1)
	wantErr("long owner", appendRecord(nil, &long), r.Seq, "owner")
}

func TestValidateTask(t *testing.T) {
	for _, ok := range []string{"t", "job-1.orders=3", "A_b", strings.Repeat("x", MaxTask)} {
		if err := ValidateTask(ok); err != nil {
			t.Errorf("ValidateTask(%q) = %v", ok, err)
		}
	}
	for bad, says := range map[string]string{
		"":                             "empty",
		"a/b":                          "'/'",
		"..":                           "starts with '.'",
		".hidden":                      "starts with '.'",
		"a b":                          "' '",
		"a\x00":                        "'\\x00'",
		"ü":                            "byte 0",
		strings.Repeat("x", 129):       "longer than 128",
		"job/../../etc":                "'/'",
		"tasks%2F":                     "'%'",
		"back\\slash":                  "'\\\\'",
		"semi;colon":                   "';'",
		"x" + strings.Repeat("y", 200): "longer",
	} {
		err := ValidateTask(bad)
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("ValidateTask(%q) = %v, want an error saying %s", bad, err, says)
		}
	}
}

func TestParseSeq(t *testing.T) {
	p := chainPrefix("t")
	if s, ok := parseSeq(p, ObjectName("t", 12)); !ok || s != 12 {
		t.Errorf("parseSeq(%q) = %d, %v", ObjectName("t", 12), s, ok)
	}
	for _, n := range []string{p + "12", p + "00000000000000000000", p + "0000000000000000001x", p + "99999999999999999999",
		"tasks/u/chain/00000000000000000001", p + "00000000000000000001/x"} {
		if s, ok := parseSeq(p, n); ok {
			t.Errorf("parseSeq(%q) = %d, want not a record", n, s)
		}
	}
}

// FuzzDecodeRecord: the decoder of stored (outside) bytes never panics,
// and whatever it accepts encodes back to a record it decodes the same.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(appendRecord(nil, &r), r.Seq)
	}
	f.Add([]byte("ETC\x01"), uint64(1))
	f.Add([]byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, seq uint64) {
		r, err := decodeRecord("tasks/f/chain/x", seq, data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v, want a *DecodeError", err, err)
			}
			return
		}
		again, err := decodeRecord("tasks/f/chain/x", seq, appendRecord(nil, &r))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("re-encoding %+v: %+v, %v", r, again, err)
		}
	})
}
