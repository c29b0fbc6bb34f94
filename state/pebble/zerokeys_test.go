package pebble_test

import (
	"path/filepath"
	"testing"

	"github.com/eddyflow/eddy/state"
)

// zeroKeys declares maps whose keys include those that serialize to no
// bytes (0 and "").
type zeroKeys struct {
	b    *state.Backend
	ints *state.Map[int32, int64]
	strs *state.Map[string, int64]
}

func declareZeroKeys(t *testing.T, b *state.Backend) *zeroKeys {
	t.Helper()
	z := &zeroKeys{b: b}
	var err error
	if z.ints, err = state.NewMap[int32, int64](b, "ints"); err != nil {
		t.Fatal(err)
	}
	if z.strs, err = state.NewMap[string, int64](b, "strs"); err != nil {
		t.Fatal(err)
	}
	return z
}

// step counts one more i in both maps of key, deleting an entry at every
// seventh count, and returns the new count and the maps' sizes.
func (z *zeroKeys) step(key []byte, i int32) (int64, int, int) {
	z.b.SetCurrentKey(key, state.KeyGroupFor(key, maxPar))
	c, _ := z.ints.Get(i)
	c++
	s := ""
	if i != 0 {
		s = string(rune('a' + i))
	}
	if c%7 == 0 {
		z.ints.Delete(i)
		z.strs.Delete(s)
	} else {
		z.ints.Put(i, c)
		z.strs.Put(s, c)
	}
	return c, z.ints.Len(), z.strs.Len()
}

// TestMapZeroKeysReload runs map updates on the heap and on a DB that drops
// its cached keys after every batch, so every read loads from the store,
// and restores a heap snapshot into a second DB halfway: map keys that
// serialize to no bytes are elements like any other, never taken for the
// key's whole value.
func TestMapZeroKeysReload(t *testing.T) {
	pool := newPool(t)
	dir := t.TempDir()
	ks := keySchema(t)
	heap := declareZeroKeys(t, state.NewBackend(maxPar, 0, maxPar, ks))
	newStore := func(name string) *zeroKeys {
		b := state.NewStoreBackend(maxPar, 0, maxPar, ks, openDB(t, pool, filepath.Join(dir, name), 0, maxPar))
		b.SetCacheBytes(0)
		return declareZeroKeys(t, b)
	}
	db := newStore("a")
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	i := 0
	for round := 0; round < 40; round++ {
		for n := 0; n < 20; n++ {
			k, x := keys[i%3], int32(i%4)
			i++
			hc, hi, hs := heap.step(k, x)
			pc, pi, ps := db.step(k, x)
			if hc != pc || hi != pi || hs != ps {
				t.Fatalf("round %d step %d: heap count %d, sizes %d %d; store count %d, sizes %d %d", round, n, hc, hi, hs, pc, pi, ps)
			}
		}
		if err := db.b.Flush(); err != nil {
			t.Fatal(err)
		}
		if round == 20 {
			snap, err := heap.b.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			db = newStore("b")
			if err := db.b.RestorePart(snap, 0, maxPar); err != nil {
				t.Fatal(err)
			}
		}
	}
}
