package dstl

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadSequentialWindow: while the change of one object is being
// applied, ReadSequential has fetched at most its window of objects; the
// replay then ends with the state of applying every change.
func TestReadSequentialWindow(t *testing.T) {
	inner := newMemStore()
	l := openLog(t, inner, Options{FlushInterval: time.Hour})
	w := l.Writer("w")
	var changes []change
	for i := range 40 {
		c := change{state: 1, key: fmt.Sprint("k", i%5), value: fmt.Sprint(i)}
		mustAppend(t, w, c)
		changes = append(changes, c)
		if i%2 == 1 {
			mustPersist(t, w) // an object per two changes
		}
	}
	h := mustPersist(t, w)
	if len(h.Objects) != 20 {
		t.Fatalf("%d objects, want 20", len(h.Objects))
	}
	var fetched atomic.Int64
	store := &hookStore{Store: inner, get: func(ctx context.Context, name string) ([]byte, error) {
		fetched.Add(1)
		return inner.Get(ctx, name)
	}}
	for _, window := range []int{1, 3} {
		fetched.Store(0)
		got := newSyncModel()
		applied := 0
		err := ReadSequential(context.Background(), store, ReadOptions{Fetches: window}, []Handle{h}, 0, 1, func(c *Change) error {
			// The change of object i (two per object) is applied: objects
			// i+1 .. i+window may be fetched, no more.
			if obj, n := applied/2, fetched.Load(); n > int64(obj+1+window) {
				return fmt.Errorf("applying object %d: %d objects fetched, window %d", obj, n, window)
			}
			applied++
			return got.apply(c)
		})
		if err != nil {
			t.Fatalf("window %d: %v", window, err)
		}
		if d := diff(got.m, replay(model{}, changes, 0, h.Upto)); d != "" {
			t.Fatalf("window %d: replay differs:\n%s", window, d)
		}
	}
}

// TestReadSequentialOutOfOrder: a handle listing its objects out of
// order fails ReadSequential with ErrOutOfOrder; Read on top of what it
// applied (the restore's fallback) leaves the state of applying every
// change once. A restarted writer's handle listed before its earlier
// run's is put in order, not refused.
func TestReadSequentialOutOfOrder(t *testing.T) {
	store := newMemStore()
	l := openLog(t, store, Options{FlushInterval: time.Hour})
	w := l.Writer("w")
	rng := rand.New(rand.NewPCG(3, 4))
	var changes []change
	for i := range 300 {
		c := change{kg: uint32(rng.IntN(4)), state: 1, key: fmt.Sprint("k", rng.IntN(9)), value: fmt.Sprint(i)}
		c.randomOp(rng, 20, 2, 9, 11, 4)
		mustAppend(t, w, c)
		changes = append(changes, c)
		if i%60 == 59 {
			mustPersist(t, w)
		}
	}
	h := mustPersist(t, w)
	want := replay(model{}, changes, 0, h.Upto)
	bad := h
	bad.Objects = slices.Clone(h.Objects)
	bad.CRCs = slices.Clone(h.CRCs)
	slices.Reverse(bad.Objects)
	slices.Reverse(bad.CRCs)
	got := newSyncModel()
	err := ReadSequential(context.Background(), store, ReadOptions{}, []Handle{bad}, 0, 4, got.apply)
	if !errors.Is(err, ErrOutOfOrder) || !strings.Contains(err.Error(), bad.Objects[1]) {
		t.Fatalf("objects in reverse order: err = %v, want ErrOutOfOrder naming %s", err, bad.Objects[1])
	}
	if err := Read(context.Background(), store, ReadOptions{}, []Handle{bad}, 0, 4, got.apply); err != nil {
		t.Fatal(err)
	}
	if d := diff(got.m, want); d != "" {
		t.Fatalf("Read after a partial ReadSequential differs from applying every change:\n%s", d)
	}

	// A second run of the writer, its handle listed first.
	l2 := openLog(t, store, Options{FlushInterval: time.Hour})
	w2 := l2.WriterFrom("w", h.Upto)
	c := change{kg: 1, state: 1, key: "k1", value: "second run"}
	mustAppend(t, w2, c)
	h2 := mustPersist(t, w2)
	got = newSyncModel()
	if err := ReadSequential(context.Background(), store, ReadOptions{}, []Handle{h2, h}, 0, 4, got.apply); err != nil {
		t.Fatal(err)
	}
	if d := diff(got.m, replay(want, []change{c}, 0, 1)); d != "" {
		t.Fatalf("two runs of a writer differ:\n%s", d)
	}
}
