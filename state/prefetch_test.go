package state_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eddyflow/eddy/state"
)

// diskStore is a recordStore whose reads take as long as a disk's (a
// spin of readTime) and that records what it is asked to prefetch.
type diskStore struct {
	*recordStore
	readTime   time.Duration
	prefetched []string // "state/key"
}

func (s *diskStore) Load(kg int, st uint32, key []byte, elems bool, fn func(sub, val []byte) error) error {
	for start := time.Now(); time.Since(start) < s.readTime; {
		// A disk read.
	}
	return s.recordStore.Load(kg, st, key, elems, fn)
}

func (s *diskStore) Prefetch(keys []state.PrefetchKey) time.Duration {
	for _, k := range keys {
		if k.KG != state.KeyGroupFor(k.Key, 128) {
			panic(fmt.Sprintf("key %q prefetched with key group %d", k.Key, k.KG))
		}
		s.prefetched = append(s.prefetched, fmt.Sprintf("%d/%s", k.State, k.Key))
	}
	return s.readTime
}

// TestPrefetchUncachedKeysOfValueStates: a store-backed backend whose
// store reads at disk speed prefetches, for a batch, the keys its cache
// does not hold, of the states without elements that loaded keys, each
// with its key group; a cached key, a Map's keys and a state not used
// lately are not prefetched. The values read afterwards are the stored
// ones.
func TestPrefetchUncachedKeysOfValueStates(t *testing.T) {
	const maxPar = 128
	rs := newRecordStore()
	// Fill the store through a backend, then read it through a new one
	// with an empty cache.
	fill := state.NewStoreBackend(maxPar, 0, maxPar, keySchema(t), rs)
	v, err := state.NewValue[int64](fill, "v")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		setKey(fill, fmt.Sprint("k", i))
		v.Update(int64(i))
	}
	if err := fill.Flush(); err != nil {
		t.Fatal(err)
	}

	ds := &diskStore{recordStore: rs, readTime: 50 * time.Microsecond}
	b := state.NewStoreBackend(maxPar, 0, maxPar, keySchema(t), ds)
	v, err = state.NewValue[int64](b, "v")
	if err != nil {
		t.Fatal(err)
	}
	m, err := state.NewMap[string, int64](b, "m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := state.NewValue[int64](b, "idle"); err != nil { // loads nothing
		t.Fatal(err)
	}
	get := func(i int) int64 {
		setKey(b, fmt.Sprint("k", i))
		n, _ := v.Get()
		_, _ = m.Get("x")
		return n
	}
	// Reads one by one until the backend has measured its store: at
	// disk speed, it prefetches from then on.
	for i := range 300 {
		if n := get(i); n != int64(i) {
			t.Fatalf("k%d: got %d", i, n)
		}
	}
	// A batch of keys 290..309: 290..299 are cached.
	batch := make([][]byte, 0, 20)
	for i := 290; i < 310; i++ {
		batch = append(batch, []byte(fmt.Sprint("k", i)))
	}
	b.Prefetch(len(batch), func(i int) ([]byte, int) { return batch[i], state.KeyGroupFor(batch[i], maxPar) })
	var want []string
	for i := 300; i < 310; i++ {
		want = append(want, fmt.Sprintf("%d/k%d", state.StateID("v"), i))
	}
	slices.Sort(ds.prefetched)
	slices.Sort(want)
	if !slices.Equal(ds.prefetched, want) {
		t.Fatalf("prefetched %v, want %v", ds.prefetched, want)
	}
	for i := 300; i < 310; i++ {
		if n := get(i); n != int64(i) {
			t.Fatalf("k%d after the prefetch: got %d", i, n)
		}
	}
	// A store as fast as memory is not prefetched from: after a window
	// of fast prefetches the backend stops.
	ds.readTime, ds.prefetched = 0, nil
	for round := range 40 {
		batch = batch[:0]
		for i := range 10 {
			batch = append(batch, []byte(fmt.Sprint("k", 400+round*10+i)))
		}
		b.Prefetch(len(batch), func(i int) ([]byte, int) { return batch[i], state.KeyGroupFor(batch[i], maxPar) })
		for i := range 10 {
			get(400 + round*10 + i)
		}
	}
	if len(ds.prefetched) >= 400 {
		t.Fatalf("prefetched %d keys from a store that reads as fast as memory, want it to stop after a window", len(ds.prefetched))
	}
}
