package state_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
)

// recordStore is a state.Store in memory that records the whole-value
// writes it receives, in order.
type recordStore struct {
	committed, pending map[string][]byte
	sets               []storeKey // whole-value writes since the test last looked
}

type storeKey struct {
	kg  int
	key string
}

func newRecordStore() *recordStore {
	return &recordStore{committed: map[string][]byte{}, pending: map[string][]byte{}}
}

func (s *recordStore) id(kg int, st uint32, key, sub []byte) string {
	return fmt.Sprintf("%d/%d/%q/%q", kg, st, key, sub)
}

func (s *recordStore) Load(kg int, st uint32, key []byte, elems bool, fn func(sub, val []byte) error) error {
	if v, ok := s.committed[s.id(kg, st, key, nil)]; ok {
		return fn(nil, v)
	}
	return nil
}

func (s *recordStore) Set(kg int, st uint32, key, sub, val []byte) error {
	s.pending[s.id(kg, st, key, sub)] = slices.Clone(val)
	if len(sub) == 0 {
		s.sets = append(s.sets, storeKey{kg, string(key)})
	}
	return nil
}

func (s *recordStore) Delete(kg int, st uint32, key, sub []byte) error {
	s.pending[s.id(kg, st, key, sub)] = nil
	return nil
}

func (s *recordStore) DeleteKey(kg int, st uint32, key []byte, elems bool) error {
	return s.Delete(kg, st, key, nil)
}

func (s *recordStore) Commit() error {
	for k, v := range s.pending {
		if v == nil {
			delete(s.committed, k)
		} else {
			s.committed[k] = v
		}
	}
	clear(s.pending)
	return nil
}

func (s *recordStore) Scan(kg int, st uint32, fn func(key, sub, val []byte) error) error {
	panic("not used")
}

// TestStoreWriteBack counts keys on a store-backed backend whose cache holds
// them all: a batch writes nothing to the store, however often a key is
// updated; Flush writes each written key once, its last value, in the
// store's key order (key group, key length, key); a cleared key is not
// written. With a cache too small for the keys, EndBatch writes back and
// evicts, and every count survives the evictions.
func TestStoreWriteBack(t *testing.T) {
	const maxPar = 128
	rng := rand.New(rand.NewPCG(1, 2))
	var keys []string
	for i := range 500 {
		k := fmt.Sprintf("k%d", rng.IntN(1<<(1+i%20)))
		if i%3 == 0 {
			k = "a key longer than sixteen bytes " + k // sorted past its first 16 bytes
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)

	t.Run("cache holds all", func(t *testing.T) {
		st := newRecordStore()
		b := state.NewStoreBackend(maxPar, 0, maxPar, keySchema(t), st)
		b.SetCacheBytes(1 << 30)
		v, err := state.NewValue[int64](b, "count")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{}
		for batch := range 10 {
			for range 300 {
				k := keys[rng.IntN(len(keys))]
				setKey(b, k)
				n, _ := v.Get()
				v.Update(n + 1)
				want[k] = n + 1
			}
			cleared := keys[batch]
			setKey(b, cleared)
			v.Clear()
			delete(want, cleared)
			if err := b.EndBatch(); err != nil {
				t.Fatal(err)
			}
			if len(st.sets) != 0 {
				t.Fatalf("batch %d: EndBatch wrote %d values, want none (write-back)", batch, len(st.sets))
			}
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		if len(st.sets) != len(want) {
			t.Fatalf("Flush wrote %d values for %d live keys", len(st.sets), len(want))
		}
		for i := 1; i < len(st.sets); i++ {
			a, b := st.sets[i-1], st.sets[i]
			if a.kg > b.kg || a.kg == b.kg && (len(a.key) > len(b.key) || len(a.key) == len(b.key) && a.key >= b.key) {
				t.Fatalf("Flush wrote keys out of key order: %v before %v", a, b)
			}
		}
		for _, s := range st.sets {
			if _, ok := want[s.key]; !ok {
				t.Fatalf("Flush wrote cleared key %q", s.key)
			}
		}
		checkCounts(t, st, want)
	})

	t.Run("cache evicts", func(t *testing.T) {
		st := newRecordStore()
		b := state.NewStoreBackend(maxPar, 0, maxPar, keySchema(t), st)
		b.SetCacheBytes(4 << 10) // a few dozen keys of the hundreds
		v, err := state.NewValue[int64](b, "count")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{}
		for range 20 {
			for range 100 {
				k := keys[rng.IntN(len(keys))]
				setKey(b, k)
				n, _ := v.Get()
				if n != want[k] {
					t.Fatalf("key %q: count %d, want %d", k, n, want[k])
				}
				v.Update(n + 1)
				want[k] = n + 1
			}
			if err := b.EndBatch(); err != nil {
				t.Fatal(err)
			}
		}
		if len(st.sets) == 0 {
			t.Fatal("a full cache wrote nothing back")
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		checkCounts(t, st, want)
	})
}

// checkCounts compares the committed counts of st with want.
func checkCounts(t *testing.T, st *recordStore, want map[string]int64) {
	t.Helper()
	codec, err := serde.For[int64]()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.committed) != len(want) {
		t.Fatalf("the store holds %d keys, want %d", len(st.committed), len(want))
	}
	for k, n := range want {
		kb := []byte(k)
		v := st.committed[st.id(state.KeyGroupFor(kb, 128), state.StateID("count"), kb, nil)]
		var got int64
		if err := codec.Decode(v, &got); err != nil || got != n {
			t.Fatalf("key %q: stored %x (%d, %v), want count %d", k, v, got, err, n)
		}
	}
}
