package nexmark

import (
	"testing"
	"time"

	"github.com/eddyflow/eddy/connector"
)

type fakeClock struct {
	t     time.Time
	reads int
}

func (c *fakeClock) now() time.Time { c.reads++; return c.t }

func withClock(c *fakeClock) Option { return func(cfg *config) { cfg.now = c.now } }

// TestPaced: a paced reader emits event i once the wall clock has advanced
// by its event-time distance from the reader's first event, returns Idle
// before, reads the clock only when it runs out of due events, and a
// resumed reader is paced from its reopening.
func TestPaced(t *testing.T) {
	clock := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	// 1000 events/s: event i at base + i ms; split 1 of 2 has 1, 3, 5, ...
	src := mustNew(t, Rate(1000), Splits(2), Paced(), withClock(clock))
	r, err := src.OpenSplit(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	next := func() connector.ReadStatus {
		t.Helper()
		var e Event
		st, err := r.Next(&e)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := next(); st != connector.Record { // event 1, the first: due at once
		t.Fatalf("first event: %v", st)
	}
	if st := next(); st != connector.Idle { // event 3 is due 2 ms later
		t.Fatalf("event 3 at +0ms: %v", st)
	}
	clock.t = clock.t.Add(1 * time.Millisecond)
	if st := next(); st != connector.Idle {
		t.Fatalf("event 3 at +1ms: %v", st)
	}
	clock.t = clock.t.Add(9 * time.Millisecond) // +10 ms: events 3 to 11 are due
	reads := clock.reads
	for k := range 5 {
		if st := next(); st != connector.Record {
			t.Fatalf("event %d at +10ms: %v", 3+2*k, st)
		}
	}
	if st := next(); st != connector.Idle {
		t.Fatalf("event 13 at +10ms: %v", st)
	}
	if got := clock.reads - reads; got != 2 {
		t.Errorf("%d clock reads for 5 due events and an idle one, want 2", got)
	}

	// Resumed an hour later, the reader does not burst to catch up.
	pos := r.Position()
	clock.t = clock.t.Add(time.Hour)
	if r, err = src.OpenSplit(ctx, 1, pos); err != nil {
		t.Fatal(err)
	}
	if st := next(); st != connector.Record {
		t.Fatalf("event 13 after resume: %v", st)
	}
	if st := next(); st != connector.Idle {
		t.Fatalf("event 15 right after resume: %v", st)
	}
	// Pacing does not change the events.
	var e Event
	clock.t = clock.t.Add(time.Second)
	if st, _ := r.Next(&e); st != connector.Record || e.DateTime() != DefaultBaseTime.UnixMilli()+15 {
		t.Fatalf("event 15: %v at %d", st, e.DateTime())
	}
}

// TestAllocations: reusing the record, a reader allocates nothing for a
// bid and one string for a person or an auction.
func TestAllocations(t *testing.T) {
	src := mustNew(t, Splits(1))
	r, err := src.OpenSplit(ctx, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var e Event
	for range 100 { // the first of each kind allocates its record
		r.Next(&e)
	}
	allocs := testing.AllocsPerRun(10, func() {
		for range 5_000 {
			r.Next(&e)
		}
	})
	if allocs > 400 { // 100 persons and 300 auctions in 5000 events
		t.Errorf("%.0f allocations for 5000 events, want at most 400", allocs)
	}

	// Split 10 of 50 holds bids only.
	bids := mustNew(t, Splits(50))
	if r, err = bids.OpenSplit(ctx, 10, nil); err != nil {
		t.Fatal(err)
	}
	r.Next(&e)
	if a := testing.AllocsPerRun(1000, func() { r.Next(&e) }); a != 0 {
		t.Errorf("%v allocations per bid", a)
	}
}
