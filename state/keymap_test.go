package state

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestPackKeyIsOneToOne: every key of up to 7 bytes packs to its own value
// and unpacks to itself, zero bytes and lengths included.
func TestPackKeyIsOneToOne(t *testing.T) {
	keys := [][]byte{{}, {0}, {0, 0}, {'a'}, {'a', 0}, {0, 'a'}, {0xff}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0, 0, 0, 0, 0, 0, 0}, {8, 0x80, 0x01}, {8, 0x80, 0x01, 0}, []byte("1234567")}
	seen := map[uint64][]byte{}
	for _, k := range keys {
		v := packKey(k)
		if other, dup := seen[v]; dup {
			t.Fatalf("keys %x and %x pack to the same %#x", other, k, v)
		}
		seen[v] = k
		var buf [8]byte
		if got := unpackKey(&buf, v); !bytes.Equal(got, k) {
			t.Fatalf("key %x unpacks to %x", k, got)
		}
	}
}

// TestPackKeyMatchesBytes: the packed value is the length in the low byte
// and the bytes above it in order, for random keys of every length.
func TestPackKeyMatchesBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		k := make([]byte, rng.IntN(maxShortKey+1))
		for i := range k {
			k[i] = byte(rng.Uint32())
		}
		want := uint64(len(k))
		for i, c := range k {
			want |= uint64(c) << (8 * (i + 1))
		}
		if got := packKey(k); got != want {
			t.Fatalf("packKey(%x) = %#x, want %#x", k, got, want)
		}
	}
}

// TestKeyMapShortAndLong: keys on both sides of the inline limit are
// found, replaced, removed and iterated.
func TestKeyMapShortAndLong(t *testing.T) {
	var m keyMap[int]
	var a keyArena
	keys := []string{"", "\x00", "a", "a\x00", "1234567", "12345678", "a longer key of its own"}
	vals := make([]int, len(keys))
	for i, k := range keys {
		vals[i] = i
		m.insert(&a, []byte(k), &vals[i])
	}
	if m.len() != len(keys) {
		t.Fatalf("len %d, want %d", m.len(), len(keys))
	}
	for i, k := range keys {
		if p := m.get([]byte(k)); p != &vals[i] {
			t.Fatalf("get(%q) = %v, want entry %d", k, p, i)
		}
	}
	got := map[string]*int{}
	for k, p := range m.all {
		got[string(k)] = p
	}
	for i, k := range keys {
		if got[k] != &vals[i] {
			t.Fatalf("all gave %v for %q, want entry %d", got[k], k, i)
		}
	}
	var other int
	m.replace([]byte("a"), &other)
	m.replace([]byte("12345678"), &other)
	if m.get([]byte("a")) != &other || m.get([]byte("12345678")) != &other {
		t.Fatal("replace did not replace")
	}
	for _, k := range keys {
		m.remove(&a, []byte(k))
		if _, ok := m.lookup([]byte(k)); ok {
			t.Fatalf("%q still there after remove", k)
		}
	}
	if m.len() != 0 {
		t.Fatalf("len %d after removing every key", m.len())
	}
}
