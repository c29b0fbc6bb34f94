package pebble_test

import (
	"fmt"
	"testing"

	"github.com/eddyflow/eddy/state"
)

// BenchmarkValueCount is state.BenchmarkValueCount on the heap and on
// Pebble side by side: Get then Update of a Value[int64] per record, the
// keys of one subtask of parallelism 2 seen in turn, an EndBatch every 256
// records (a record batch) and a Flush every 2^18 (a checkpoint). One op is
// one record. pebble keeps state.DefaultCacheBytes of decoded values (all
// of the keys here), pebble-nocache none across batches.
func BenchmarkValueCount(b *testing.B) {
	start, end := state.KeyGroupRange(128, 2, 0)
	for _, keys := range []int{10_000, 100_000} {
		var names [][]byte
		var groups []int
		for i := 0; len(names) < keys/2; i++ {
			k := fmt.Appendf(nil, "driver-%07d", i)
			if kg := state.KeyGroupFor(k, 128); kg >= start && kg < end {
				names, groups = append(names, k), append(groups, kg)
			}
		}
		for _, backend := range []string{"heap", "pebble", "pebble-nocache"} {
			b.Run(fmt.Sprintf("keys=%d/%s", keys, backend), func(b *testing.B) {
				var be *state.Backend
				if backend == "heap" {
					be = state.NewBackend(128, start, end, keySchema(b))
				} else {
					p := newPool(b)
					db, err := p.Open(b.TempDir(), 128, start, end)
					if err != nil {
						b.Fatal(err)
					}
					defer db.Close()
					be = state.NewStoreBackend(128, start, end, keySchema(b), db)
					if backend == "pebble-nocache" {
						be.SetCacheBytes(0)
					}
				}
				v, _ := state.NewValue[int64](be, "count")
				// One pass over the keys first, so every key exists.
				for i := range names {
					be.SetCurrentKey(names[i], groups[i])
					v.Update(1)
				}
				if err := be.Flush(); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if i == len(names) {
						i = 0
					}
					be.SetCurrentKey(names[i], groups[i])
					n, _ := v.Get()
					v.Update(n + 1)
					if i%256 == 255 {
						if err := be.EndBatch(); err != nil {
							b.Fatal(err)
						}
					}
					if i%(1<<18) == 1<<18-1 {
						if err := be.Flush(); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkHotKey is a batch of 256 records of 8 keys: what the cache of
// decoded keys is for. One op is one record.
func BenchmarkHotKey(b *testing.B) {
	var names [][]byte
	var groups []int
	for i := range 8 {
		k := fmt.Appendf(nil, "hot-%d", i)
		names, groups = append(names, k), append(groups, state.KeyGroupFor(k, 128))
	}
	for _, backend := range []string{"heap", "pebble"} {
		b.Run(backend, func(b *testing.B) {
			var be *state.Backend
			if backend == "heap" {
				be = state.NewBackend(128, 0, 128, keySchema(b))
			} else {
				p := newPool(b)
				db, err := p.Open(b.TempDir(), 128, 0, 128)
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				be = state.NewStoreBackend(128, 0, 128, keySchema(b), db)
			}
			v, _ := state.NewValue[int64](be, "count")
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				be.SetCurrentKey(names[i%8], groups[i%8])
				n, _ := v.Get()
				v.Update(n + 1)
				if i%256 == 255 {
					if err := be.EndBatch(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkCommit is one Set and a Commit per op: the fixed cost of a
// commit, which the runtime pays once per batch of records (EndBatch).
func BenchmarkCommit(b *testing.B) {
	p := newPool(b)
	db, err := p.Open(b.TempDir(), 128, 0, 128)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	key, val := []byte("key-00000"), make([]byte, 8)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		key[8] = byte(i)
		if err := db.Set(i%128, 1, key, nil, val); err != nil {
			b.Fatal(err)
		}
		if err := db.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}
