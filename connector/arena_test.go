package connector

import (
	"strings"
	"testing"
)

// TestSlabNew: every pointer New returns is zeroed and distinct from the
// others, across chunk boundaries, and writing through one leaves the
// others alone.
func TestSlabNew(t *testing.T) {
	type rec struct {
		N int
		S string
	}
	s := Slab[rec]{Size: 3}
	var got []*rec
	for i := range 10 {
		p := s.New()
		if *p != (rec{}) {
			t.Fatalf("New %d: %+v, want zeroed", i, *p)
		}
		p.N, p.S = i, strings.Repeat("x", i)
		got = append(got, p)
	}
	for i, p := range got {
		if p.N != i || p.S != strings.Repeat("x", i) {
			t.Fatalf("record %d holds %+v after later New calls", i, *p)
		}
	}
	var zero Slab[int]
	if a, b := zero.New(), zero.New(); a == b {
		t.Fatal("the zero Slab returned one pointer twice")
	}
}

// TestStrings: a string keeps the bytes it was made of even when the
// caller reuses its buffer, strings in one block do not overlap, and long
// and empty strings work.
func TestStrings(t *testing.T) {
	s := Strings{BlockSize: 64}
	buf := []byte{}
	var got, want []string
	for i := range 40 {
		buf = append(buf[:0], strings.Repeat(string(rune('a'+i%26)), i%20)...)
		got = append(got, s.String(buf))
		want = append(want, string(buf))
		for k := range buf {
			buf[k] = '!' // the caller reuses its buffer
		}
	}
	long := strings.Repeat("L", 100) // more than a quarter block: its own allocation
	got, want = append(got, s.String([]byte(long))), append(want, long)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("string %d is %q, want %q", i, got[i], want[i])
		}
	}
	var zero Strings
	if v := zero.String(nil); v != "" {
		t.Fatalf("String(nil) = %q", v)
	}
	if v := zero.String([]byte("abc")); v != "abc" {
		t.Fatalf("zero Strings: %q, want abc", v)
	}
}
