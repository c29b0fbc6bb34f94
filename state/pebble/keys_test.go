package pebble

import (
	"bytes"
	"slices"
	"testing"
)

func TestKeyLayout(t *testing.T) {
	k := appendKey(nil, 300, 0xdeadbeef, []byte("ab"), []byte("x"))
	want := []byte{0x01, 0x2c, 0xde, 0xad, 0xbe, 0xef, 2, 'a', 'b', 'x'}
	if !bytes.Equal(k, want) {
		t.Fatalf("key = %x, want %x", k, want)
	}
	kg, st, key, sub, err := parseKey(k)
	if err != nil || kg != 300 || st != 0xdeadbeef || string(key) != "ab" || string(sub) != "x" {
		t.Fatalf("parseKey = %d %x %q %q %v", kg, st, key, sub, err)
	}
	for _, bad := range [][]byte{nil, {1, 2, 3}, {0, 0, 0, 0, 0, 0, 5, 'a'}, {0, 0, 0, 0, 0, 0, 0x80}} {
		if _, _, _, _, err := parseKey(bad); err == nil {
			t.Errorf("parseKey(%x) = nil error", bad)
		}
	}
}

// A key's records sort together and apart from a longer key with the same
// start; key groups sort in order, so a range of them is one key range.
func TestKeyOrder(t *testing.T) {
	keys := [][]byte{
		appendKey(nil, 1, 7, []byte("abc"), nil),
		appendKey(nil, 1, 7, []byte("ab"), []byte("zz")),
		appendKey(nil, 0, 9, []byte("q"), nil),
		appendKey(nil, 1, 7, []byte("ab"), nil),
		appendKey(nil, 2, 1, nil, nil),
	}
	slices.SortFunc(keys, bytes.Compare)
	p := appendKeyPrefix(nil, 1, 7, []byte("ab"))
	end := appendPrefixEnd(nil, p)
	var in []int
	for i, k := range keys {
		if bytes.Compare(k, p) >= 0 && bytes.Compare(k, end) < 0 {
			in = append(in, i)
		}
	}
	if !slices.Equal(in, []int{1, 2}) {
		t.Fatalf("records of key ab at %v of %x", in, keys)
	}
	if kg, _, _, _, _ := parseKey(keys[0]); kg != 0 {
		t.Fatalf("first key of group %d", kg)
	}
	if got := appendPrefixEnd(nil, []byte{1, 0xff, 0xff}); !bytes.Equal(got, []byte{2}) {
		t.Fatalf("prefix end = %x", got)
	}
	if got := appendPrefixEnd(nil, []byte{0xff}); len(got) != 0 {
		t.Fatalf("prefix end of ff = %x", got)
	}
}
