package pebble_test

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
	"github.com/eddyflow/eddy/state/pebble"
)

const maxPar = 16

func keySchema(t testing.TB) serde.Schema {
	s, err := serde.SchemaOf[string]()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// states are the states the conformance test declares on each backend.
type states struct {
	b   *state.Backend
	val *state.Value[int64]
	sum *state.Reducing[int64]
	lst *state.List[string]
	m   *state.Map[string, int64]
}

func declare(t testing.TB, b *state.Backend) *states {
	t.Helper()
	s := &states{b: b}
	var err error
	if s.val, err = state.NewValue[int64](b, "val"); err != nil {
		t.Fatal(err)
	}
	if s.sum, err = state.NewReducing(b, "sum", func(a, x int64) int64 { return a + x }); err != nil {
		t.Fatal(err)
	}
	if s.lst, err = state.NewList[string](b, "lst"); err != nil {
		t.Fatal(err)
	}
	if s.m, err = state.NewMap[string, int64](b, "map"); err != nil {
		t.Fatal(err)
	}
	return s
}

func newPool(t testing.TB) *pebble.Pool {
	t.Helper()
	p, err := pebble.NewPool(pebble.Memory(64<<20), pebble.MaxDBs(8))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func openDB(t testing.TB, p *pebble.Pool, dir string, start, end int) *pebble.DB {
	t.Helper()
	db, err := p.Open(dir, maxPar, start, end)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// keysOf returns n keys of the key groups [start, end) with their groups.
func keysOf(n, start, end int) ([][]byte, []int) {
	var keys [][]byte
	var groups []int
	for i := 0; len(keys) < n; i++ {
		k := fmt.Appendf(nil, "k%d", i)
		if kg := state.KeyGroupFor(k, maxPar); kg >= start && kg < end {
			keys, groups = append(keys, k), append(groups, kg)
		}
	}
	return keys, groups
}

// read returns everything the states say about the current key.
func (s *states) read() string {
	v, vok := s.val.Get()
	r, rok := s.sum.Get()
	m := maps.Collect(s.m.All())
	ks := slices.Sorted(maps.Keys(m))
	var mm []string
	for _, k := range ks {
		mm = append(mm, fmt.Sprintf("%s=%d", k, m[k]))
	}
	g, gok := s.m.Get("a")
	return fmt.Sprintf("val=%d/%v sum=%d/%v lst=%q map=%v len=%d a=%d/%v", v, vok, r, rok, s.lst.Get(), mm, s.m.Len(), g, gok)
}

// op applies random operation o to the current key.
func (s *states) op(o int, x int64) {
	switch o {
	case 0, 1:
		n, _ := s.val.Get()
		s.val.Update(n + x)
	case 2:
		s.val.Clear()
	case 3, 4:
		s.sum.Add(x)
	case 5:
		s.sum.Clear()
	case 6, 7:
		s.lst.Add(fmt.Sprint("e", x))
	case 8:
		s.lst.Update([]string{"u", fmt.Sprint(x)})
	case 9:
		s.lst.Clear()
	case 10, 11, 12:
		s.m.Put(string(rune('a'+x%5)), x)
	case 13, 14:
		s.m.Delete(string(rune('a' + x%5)))
	case 15:
		s.m.Clear()
	}
}

const ops = 16

// TestConformance runs the same random operations on the heap backend and
// on Pebble-backed backends (with a cache of decoded values that holds every
// key, one that holds some key groups and evicts others, and one that is
// dropped after every batch), ending a batch of records with EndBatch and
// every tenth with Flush, as a checkpoint does, and demands
// identical reads after every operation, identical entry counts, and
// identical deterministic snapshots, which restore into each other.
func TestConformance(t *testing.T) {
	for _, cacheBytes := range []int{0, 1500, 1 << 30} {
		t.Run(fmt.Sprintf("cacheBytes=%d", cacheBytes), func(t *testing.T) {
			p := newPool(t)
			const start, end = 4, 12
			keys, groups := keysOf(40, start, end)
			heap := declare(t, state.NewBackend(maxPar, start, end, keySchema(t)))
			db := openDB(t, p, t.TempDir(), start, end)
			sb := state.NewStoreBackend(maxPar, start, end, keySchema(t), db)
			sb.SetCacheBytes(int64(cacheBytes))
			pb := declare(t, sb)
			var log []change
			sb.SetChangeLog(func(kg, st uint32, op state.ChangeOp, key, sub, value []byte) error {
				log = append(log, change{kg, st, op, slices.Clone(key), slices.Clone(sub), slices.Clone(value)})
				return nil
			})
			heap.b.SetDeterministic(true)
			pb.b.SetDeterministic(true)
			rng := rand.New(rand.NewPCG(1, uint64(cacheBytes)))
			for batch := 0; batch < 200; batch++ {
				for r := 0; r < 1+rng.IntN(30); r++ {
					i := rng.IntN(len(keys))
					o, x := rng.IntN(ops), rng.Int64N(100)
					for _, s := range []*states{heap, pb} {
						s.b.SetCurrentKey(keys[i], groups[i])
						if rng.IntN(4) == 0 {
							s.read() // reads before writes take the cached-entry path
						}
					}
					heap.op(o, x)
					pb.op(o, x)
					if h, g := heap.read(), pb.read(); h != g {
						t.Fatalf("batch %d key %s after op %d(%d):\nheap   %s\npebble %s", batch, keys[i], o, x, h, g)
					}
				}
				end := pb.b.EndBatch
				if batch%10 == 9 {
					end = pb.b.Flush
				}
				if err := end(); err != nil {
					t.Fatal(err)
				}
				if batch%50 == 49 {
					compareSnapshots(t, heap.b, pb.b)
				}
			}
			if h, g := heap.b.Entries(), pb.b.Entries(); h != g || h == 0 {
				t.Fatalf("entries: heap %d, pebble %d", h, g)
			}
			// Every key read back after the cache was dropped.
			for i, k := range keys {
				heap.b.SetCurrentKey(k, groups[i])
				pb.b.SetCurrentKey(k, groups[i])
				if h, g := heap.read(), pb.read(); h != g {
					t.Fatalf("key %s:\nheap   %s\npebble %s", k, h, g)
				}
			}
			// A heap snapshot restores into a fresh Pebble backend and
			// snapshots to the same bytes.
			snap, err := heap.b.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			db2 := openDB(t, p, t.TempDir(), start, end)
			fresh := declare(t, state.NewStoreBackend(maxPar, start, end, keySchema(t), db2))
			fresh.b.SetDeterministic(true)
			if err := fresh.b.Restore([][]byte{snap}); err != nil {
				t.Fatal(err)
			}
			compareSnapshots(t, heap.b, fresh.b)

			// The change log of the Pebble backend replays into a heap
			// backend and into a Pebble one (the path of a restore
			// from the log) to the same state.
			replayHeap := declare(t, state.NewBackend(maxPar, start, end, keySchema(t)))
			db3 := openDB(t, p, t.TempDir(), start, end)
			replayPebble := declare(t, state.NewStoreBackend(maxPar, start, end, keySchema(t), db3))
			for _, r := range []*states{replayHeap, replayPebble} {
				r.b.SetDeterministic(true)
				for _, c := range log {
					if err := r.b.ApplyChange(c.kg, c.st, c.op, c.key, c.sub, c.value); err != nil {
						t.Fatal(err)
					}
				}
				if err := r.b.Flush(); err != nil {
					t.Fatal(err)
				}
				compareSnapshots(t, heap.b, r.b)
			}
		})
	}
}

type change struct {
	kg, st          uint32
	op              state.ChangeOp
	key, sub, value []byte
}

func compareSnapshots(t *testing.T, heap, pb *state.Backend) {
	t.Helper()
	h, err := heap.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	g, err := pb.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h, g) {
		t.Fatalf("snapshots differ: heap %d bytes, pebble %d bytes", len(h), len(g))
	}
}
