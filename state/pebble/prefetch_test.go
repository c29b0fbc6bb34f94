package pebble_test

import (
	"fmt"
	"testing"

	"github.com/eddyflow/eddy/state"
)

// TestPrefetchReadsWhatLoadsRead: Prefetch reads keys present and absent,
// in parallel (the race detector watches), changes nothing, and the loads
// after it return the committed values; a failed DB prefetches nothing.
func TestPrefetchReadsWhatLoadsRead(t *testing.T) {
	p := newPool(t)
	db := openDB(t, p, t.TempDir(), 0, maxPar)
	const st = 7
	var keys []state.PrefetchKey
	for i := range 200 {
		k := []byte(fmt.Sprint("key", i))
		kg := state.KeyGroupFor(k, maxPar)
		if i%2 == 0 { // odd keys are absent
			if err := db.Set(kg, st, k, nil, []byte(fmt.Sprint("value", i))); err != nil {
				t.Fatal(err)
			}
		}
		keys = append(keys, state.PrefetchKey{KG: kg, State: st, Key: k})
	}
	if err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if d := db.Prefetch(keys); d <= 0 {
		t.Fatalf("Prefetch of %d keys: average read time %v, want positive", len(keys), d)
	}
	if d := db.Prefetch(nil); d != 0 {
		t.Fatalf("Prefetch of no keys: %v", d)
	}
	for i, k := range keys {
		var got []string
		if err := db.Load(k.KG, st, k.Key, false, func(sub, val []byte) error {
			got = append(got, string(val))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want := []string{fmt.Sprint("value", i)}
		if i%2 == 1 {
			want = nil
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("key%d after Prefetch: %v, want %v", i, got, want)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if d := db.Prefetch(keys); d != 0 {
		t.Fatalf("Prefetch on a closed DB read keys (%v a read)", d)
	}
}
