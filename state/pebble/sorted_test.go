package pebble_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/state"
)

// TestSortedFlush writes enough keys of a Value state between two Flush
// calls that Flush hands them to DB.SetSorted (a table file the DB
// ingests), with keys of every length from 1 to 302 bytes (the length
// prefix takes two bytes from 128 on), keys cleared and set again, and a
// Map state whose element writes go through the batch meanwhile; a second
// round clears keys after the ingest and sets others. Every key then reads
// back from the DB, the cache dropped, as a map of the same writes says.
func TestSortedFlush(t *testing.T) {
	p := newPool(t)
	db := openDB(t, p, t.TempDir(), 0, maxPar)
	b := state.NewStoreBackend(maxPar, 0, maxPar, keySchema(t), db)
	b.SetCacheBytes(1 << 30)
	v, err := state.NewValue[int64](b, "v")
	if err != nil {
		t.Fatal(err)
	}
	m, err := state.NewMap[string, int64](b, "m")
	if err != nil {
		t.Fatal(err)
	}
	var keys [][]byte
	for i := range 6000 {
		keys = append(keys, fmt.Appendf(nil, "%x%s", i, strings.Repeat("x", i%300)))
	}
	set := func(k []byte) { b.SetCurrentKey(k, state.KeyGroupFor(k, maxPar)) }
	want := map[string]int64{}
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 2 {
		for i, k := range keys {
			set(k)
			switch x := rng.IntN(10); {
			case x == 0 && round == 1:
				v.Clear() // a delete after the last round's ingested value
				delete(want, string(k))
			case x == 1:
				v.Update(int64(-i))
				v.Clear()
				v.Update(int64(i + round)) // cleared and set again before the ingest
				want[string(k)] = int64(i + round)
			default:
				v.Update(int64(i + round))
				want[string(k)] = int64(i + round)
			}
			m.Put("a", int64(i))
			if i%256 == 255 {
				if err := b.EndBatch(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	b.SetCacheBytes(0)
	if err := b.Flush(); err != nil { // drops the cache
		t.Fatal(err)
	}
	for i, k := range keys {
		set(k)
		got, ok := v.Get()
		w, wok := want[string(k)]
		if got != w || ok != wok {
			t.Fatalf("key %d (%d bytes): %d/%v, want %d/%v", i, len(k), got, ok, w, wok)
		}
		if x, _ := m.Get("a"); x != int64(i) {
			t.Fatalf("key %d: map entry %d, want %d", i, x, i)
		}
	}
}
