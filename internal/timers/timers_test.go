package timers

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/eddyflow/eddy/internal/intern"
	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
)

func newService(t *testing.T) (*state.Backend, *Service) {
	t.Helper()
	ks, err := serde.SchemaOf[string]()
	if err != nil {
		t.Fatal(err)
	}
	b := state.NewBackend(8, 0, 8, ks)
	s, err := New(b, "timers")
	if err != nil {
		t.Fatal(err)
	}
	return b, s
}

// TestFireInTimeOrder: timers fire once each, in time order across keys,
// deleted ones not at all, and each is gone from state before it fires.
func TestFireInTimeOrder(t *testing.T) {
	b, s := newService(t)
	key := func(k string) ([]byte, int) { kb := []byte(k); return kb, state.KeyGroupFor(kb, 8) }
	for _, r := range []struct {
		k  string
		at int64
	}{{"a", 30}, {"b", 10}, {"a", 20}, {"a", 30}, {"c", 40}, {"b", 50}} {
		kb, kg := key(r.k)
		s.Register(kb, kg, r.at)
	}
	kb, kg := key("c")
	s.Delete(kb, kg, 40)
	if s.Next() != 10 {
		t.Fatalf("Next = %d", s.Next())
	}
	var fired []string
	fire := func(kb []byte, kg int, at int64) error {
		b.SetCurrentKey(kb, kg)
		if slices.Contains(s.st.Get(), at) {
			t.Errorf("timer %s@%d still in state as it fires", kb, at)
		}
		fired = append(fired, fmt.Sprintf("%s@%d", kb, at))
		return nil
	}
	if err := s.FireDue(35, fire); err != nil {
		t.Fatal(err)
	}
	if want := []string{"b@10", "a@20", "a@30"}; !slices.Equal(fired, want) {
		t.Fatalf("fired %v, want %v", fired, want)
	}
	// A restore rebuilds the queue from state: the timers not fired yet.
	snap, err := b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	b2, s2 := newService(t)
	if err := b2.Restore([][]byte{snap}); err != nil {
		t.Fatal(err)
	}
	s2.Rebuild()
	fired, s, b = nil, s2, b2
	if err := s2.FireDue(1<<62, fire); err != nil {
		t.Fatal(err)
	}
	if want := []string{"b@50"}; !slices.Equal(fired, want) {
		t.Fatalf("after restore fired %v, want %v", fired, want)
	}
}

// TestKeysForgottenOnceFired: the service does not keep every key that
// ever had a timer: once the timers of many keys have fired, the interned
// keys shrink back to about those with timers pending.
func TestKeysForgottenOnceFired(t *testing.T) {
	_, s := newService(t)
	fire := func([]byte, int, int64) error { return nil }
	for round := range 20 {
		for i := range 1000 {
			kb := []byte(fmt.Sprint("auction-", round, "-", i))
			s.Register(kb, state.KeyGroupFor(kb, 8), int64(round*1000+i))
		}
		if err := s.FireDue(int64(round*1000+990), fire); err != nil {
			t.Fatal(err)
		}
	}
	// At most twice the largest queue (about 1,000) plus intern.MinKeys,
	// plus the keys of one round since the last sweep: far below the
	// 20,000 keys that had timers.
	if n := s.keys.Len(); n > 2*1010+intern.MinKeys+1000 {
		t.Fatalf("%d keys interned after 20,000 keys came and went, %d timers pending", n, len(s.queue))
	}
}

// TestMovedTimersCompact moves one timer per key forward many times (as
// session windows do with every record): the queue stays within a bound of
// the live timers instead of holding every deleted one, and exactly the
// last timer of each key fires, in time order, including one re-registered
// at a time it was deleted from.
func TestMovedTimersCompact(t *testing.T) {
	_, s := newService(t)
	const keys, moves = 50, 400
	key := func(i int) ([]byte, int) { kb := fmt.Appendf(nil, "k%d", i); return kb, state.KeyGroupFor(kb, 8) }
	for m := range moves {
		for i := range keys {
			kb, kg := key(i)
			at := int64(1_000_000 + m*keys + i)
			s.Register(kb, kg, at)
			if m > 0 {
				s.Delete(kb, kg, at-keys)
			}
		}
		if m%50 == 0 {
			// Watermarks come by now and then, before any timer is due.
			if err := s.FireDue(0, func([]byte, int, int64) error { t.Fatal("fired early"); return nil }); err != nil {
				t.Fatal(err)
			}
			if n := len(s.queue); n > 2*keys+minCompact+keys*50 {
				t.Fatalf("after %d moves the queue holds %d entries for %d timers", m+1, n, keys)
			}
		}
	}
	// Key 0 goes back to a time it was deleted from.
	kb, kg := key(0)
	last0 := int64(1_000_000 + (moves-1)*keys)
	s.Delete(kb, kg, last0)
	s.Register(kb, kg, 1_000_000)
	var fired []int64
	err := s.FireDue(1<<62, func(kb []byte, _ int, at int64) error {
		fired = append(fired, at)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{1_000_000}
	for i := 1; i < keys; i++ {
		want = append(want, int64(1_000_000+(moves-1)*keys+i))
	}
	if !slices.Equal(fired, want) {
		t.Fatalf("fired %d timers %v..., want %d %v...", len(fired), fired[:min(5, len(fired))], len(want), want[:5])
	}
	if len(s.queue) != 0 || s.live != 0 {
		t.Fatalf("after firing all: queue %d, live %d", len(s.queue), s.live)
	}
}

// TestFireDueMatchesModel: random registrations, deletions and firings up
// to rising times (enough deletions to compact the queue) fire exactly the
// timers a brute-force model holds due, in time order.
func TestFireDueMatchesModel(t *testing.T) {
	b, s := newService(t)
	r := rand.New(rand.NewPCG(3, 4))
	type timer struct {
		key string
		at  int64
	}
	model := map[timer]bool{}
	key := func(k string) ([]byte, int) { kb := []byte(k); return kb, state.KeyGroupFor(kb, 8) }
	now := int64(0)
	for round := range 200 {
		for range 100 {
			tm := timer{fmt.Sprintf("k%d", r.IntN(300)), now + 1 + r.Int64N(5000)}
			kb, kg := key(tm.key)
			if r.IntN(3) == 0 {
				// Delete one of the key's timers, if it has one.
				b.SetCurrentKey(kb, kg)
				if xs := s.st.Get(); len(xs) > 0 {
					tm.at = xs[r.IntN(len(xs))]
					s.Delete(kb, kg, tm.at)
					delete(model, tm)
				}
				continue
			}
			s.Register(kb, kg, tm.at)
			model[tm] = true
		}
		now += r.Int64N(400)
		if round == 199 {
			now = 1 << 62
		}
		var fired []timer
		err := s.FireDue(now, func(kb []byte, _ int, at int64) error {
			fired = append(fired, timer{string(kb), at})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var want []timer
		for tm := range model {
			if tm.at <= now {
				want = append(want, tm)
				delete(model, tm)
			}
		}
		if !slices.IsSortedFunc(fired, func(a, b timer) int { return cmp.Compare(a.at, b.at) }) {
			t.Fatalf("round %d: fired out of time order: %v", round, fired)
		}
		byKey := func(a, b timer) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.key, b.key)) }
		slices.SortFunc(fired, byKey)
		slices.SortFunc(want, byKey)
		if !slices.Equal(fired, want) {
			t.Fatalf("round %d: fired %d timers, want %d", round, len(fired), len(want))
		}
	}
	if len(model) != 0 || s.Next() != 0 {
		t.Fatalf("timers left: model %d, queue next %d", len(model), s.Next())
	}
}
