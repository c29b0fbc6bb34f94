package state_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/eddyflow/eddy/state"
)

// at sets the current key of b to k.
func at(b *state.Backend, k string) {
	kb := []byte(k)
	b.SetCurrentKey(kb, state.KeyGroupFor(kb, 128))
}

func TestTTLProcessingTime(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	now := int64(1_000)
	b.SetClock(func() int64 { return now })
	v, err := state.NewValue[int](b, "v", state.TTL(state.TTLConfig{TTL: 100}))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := state.NewValue[int](b, "refreshed", state.TTL(state.TTLConfig{TTL: 100, RefreshOnRead: true}))
	m, _ := state.NewMap[string, int](b, "m", state.TTL(state.TTLConfig{TTL: 100}))
	l, _ := state.NewList[int](b, "l", state.TTL(state.TTLConfig{TTL: 100}))
	at(b, "a")
	v.Update(1)
	r.Update(1)
	m.Put("x", 1)
	l.Add(1)
	now = 1_050
	if x, ok := r.Get(); !ok || x != 1 { // refreshed: lives until 1_150
		t.Fatalf("refreshed value at 1050: %v %v", x, ok)
	}
	now = 1_099
	if x, ok := v.Get(); !ok || x != 1 {
		t.Fatalf("value before its TTL: %v %v", x, ok)
	}
	now = 1_100
	if _, ok := v.Get(); ok {
		t.Fatal("value read after its TTL")
	}
	if _, ok := m.Get("x"); ok || m.Len() != 0 {
		t.Fatal("map read after its TTL")
	}
	if l.Get() != nil {
		t.Fatal("list read after its TTL")
	}
	if x, ok := r.Get(); !ok || x != 1 {
		t.Fatalf("value refreshed at 1050, read at 1100: %v %v", x, ok)
	}
	// A write restarts the TTL.
	v.Update(2)
	now = 1_150
	if x, ok := v.Get(); !ok || x != 2 {
		t.Fatalf("rewritten value: %v %v", x, ok)
	}
}

func TestTTLEventTime(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	v, _ := state.NewValue[int](b, "v", state.TTL(state.TTLConfig{TTL: 100, EventTime: true}))
	at(b, "a")
	v.Update(1) // before any watermark: its TTL starts at the first read after one
	b.SetEventTime(10_000)
	if _, ok := v.Get(); !ok {
		t.Fatal("written before the first watermark, expired at the first one")
	}
	b.SetEventTime(10_100)
	if _, ok := v.Get(); ok {
		t.Fatal("written before the first watermark, read 100 after its first read with a TTL of 100")
	}
	b.SetEventTime(500)
	v.Update(2) // at 500
	b.SetEventTime(599)
	if x, ok := v.Get(); !ok || x != 2 {
		t.Fatalf("at 599: %v %v", x, ok)
	}
	b.SetEventTime(600)
	if _, ok := v.Get(); ok {
		t.Fatal("read once the watermark passed its TTL")
	}
}

// TestTTLCleanupAndSnapshot: expired keys leave whole snapshots at once
// and memory over a few cleanups; the stamps restore with the state, so a
// restored backend expires the same keys.
func TestTTLCleanupAndSnapshot(t *testing.T) {
	now := int64(0)
	newB := func() (*state.Backend, *state.Value[int]) {
		b := state.NewBackend(128, 0, 128, keySchema(t))
		b.SetClock(func() int64 { return now })
		v, err := state.NewValue[int](b, "v", state.TTL(state.TTLConfig{TTL: 100}))
		if err != nil {
			t.Fatal(err)
		}
		return b, v
	}
	b, v := newB()
	for i := range 1000 {
		now = int64(i % 2 * 50) // even keys at 0, odd at 50
		at(b, fmt.Sprint("k", i))
		v.Update(i)
	}
	now = 120 // the even keys expired, the odd live until 150
	snap, err := b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r, rv := newB()
	if err := r.Restore([][]byte{snap}); err != nil {
		t.Fatal(err)
	}
	if n := r.Entries(); n != 1000 { // 500 values and their 500 stamps
		t.Fatalf("restored %d entries, want 1000 (the live keys and their stamps)", n)
	}
	at(r, "k1")
	if x, ok := rv.Get(); !ok || x != 1 {
		t.Fatalf("live key after restore: %v %v", x, ok)
	}
	now = 150
	at(r, "k3")
	if _, ok := rv.Get(); ok {
		t.Fatal("restored key read after its TTL: the stamp was not restored")
	}
	// Cleanup between records reaches every expired key.
	if n := b.Entries(); n != 2000 {
		t.Fatalf("%d entries before cleanup", n)
	}
	now = 200
	for range 2000 {
		b.CleanupExpired(16)
	}
	if n := b.Entries(); n != 0 {
		t.Fatalf("%d entries left after cleanups, want 0", n)
	}
}

// TestTTLOnStateWithoutStamps: a state that gets a TTL keeps what was
// written before it had one; its TTL starts at the first read.
func TestTTLOnStateWithoutStamps(t *testing.T) {
	old := state.NewBackend(128, 0, 128, keySchema(t))
	v, _ := state.NewValue[int](old, "v")
	at(old, "a")
	v.Update(7)
	snap, err := old.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1000)
	b := state.NewBackend(128, 0, 128, keySchema(t))
	b.SetClock(func() int64 { return now })
	tv, _ := state.NewValue[int](b, "v", state.TTL(state.TTLConfig{TTL: 10}))
	if err := b.Restore([][]byte{snap}); err != nil {
		t.Fatal(err)
	}
	at(b, "a")
	if x, ok := tv.Get(); !ok || x != 7 {
		t.Fatalf("value written before the TTL: %v %v", x, ok)
	}
	now = 1010
	if _, ok := tv.Get(); ok {
		t.Fatal("read 10 after its first read with a TTL of 10")
	}
}

func TestTTLMustBePositive(t *testing.T) {
	b := state.NewBackend(128, 0, 128, keySchema(t))
	if _, err := state.NewValue[int](b, "v", state.TTL(state.TTLConfig{TTL: -time.Second})); err == nil {
		t.Fatal("a negative TTL was accepted")
	}
}

// TestTTLCleanupReachesLongKeys: cleanup scans a key group's keys up to
// its budget, keys of up to 7 bytes and longer ones being in two maps: it
// reaches expired long keys behind more live short keys than its budget.
func TestTTLCleanupReachesLongKeys(t *testing.T) {
	now := int64(0)
	b := state.NewBackend(1, 0, 1, keySchema(t))
	b.SetClock(func() int64 { return now })
	v, err := state.NewValue[int](b, "v", state.TTL(state.TTLConfig{TTL: 100}))
	if err != nil {
		t.Fatal(err)
	}
	at := func(b *state.Backend, k string) { b.SetCurrentKey([]byte(k), 0) } // the one key group
	for i := range 10 {
		at(b, fmt.Sprint("a rather long key ", i)) // expire at 100
		v.Update(i)
	}
	now = 90
	for i := range 100 {
		at(b, fmt.Sprint("k", i)) // live until 190
		v.Update(i)
	}
	now = 150
	for range 20 {
		b.CleanupExpired(16)
	}
	if n := b.Entries(); n != 200 {
		t.Fatalf("%d entries after cleanups, want 200 (the short keys and their stamps)", n)
	}
}
