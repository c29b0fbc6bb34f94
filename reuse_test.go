package eddy_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/connector/nexmark"
)

// bidSum is the total price of the bids on one auction.
type bidSum struct {
	Auction int64 `json:"auction" proto:"1"`
	Sum     int64 `json:"sum" proto:"2"`
	Bids    int64 `json:"bids" proto:"3"`
}

// TestReuseRecords runs a keyed sum of bid prices over a Nexmark source
// whose readers reuse one Event (ReuseRecords), checkpointing as it goes:
// the readers do get their previous record back (few distinct *Bid
// pointers reach the FlatMap), and the sums equal those computed from
// the events one by one.
func TestReuseRecords(t *testing.T) {
	const events = 20_000
	src, err := nexmark.New(nexmark.Events(events), nexmark.Splits(2), nexmark.Rate(1000))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]bidSum{}
	for i := range int64(events) {
		if e := src.Event(i); e.Bid != nil {
			s := want[e.Bid.Auction]
			want[e.Bid.Auction] = bidSum{Auction: e.Bid.Auction, Sum: s.Sum + e.Bid.Price, Bids: s.Bids + 1}
		}
	}

	var mu sync.Mutex
	seen := map[*nexmark.Bid]bool{}
	dir := t.TempDir()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}), eddy.Checkpoints("file://"+t.TempDir(), 20*time.Millisecond))
	ev := eddy.FromSource(env, src, eddy.ReuseRecords())
	bids := eddy.FlatMap(ev, func(e *nexmark.Event, emit func(bidSum)) error {
		if e.Bid != nil {
			mu.Lock()
			seen[e.Bid] = true
			mu.Unlock()
			emit(bidSum{Auction: e.Bid.Auction, Sum: e.Bid.Price, Bids: 1})
		}
		return nil
	})
	sums := eddy.Reduce(eddy.KeyBy(bids, func(b *bidSum) int64 { return b.Auction }), func(x, y bidSum) bidSum {
		return bidSum{Auction: x.Auction, Sum: x.Sum + y.Sum, Bids: x.Bids + y.Bids}
	})
	eddy.ToSink(sums, file.JSONLines[bidSum](dir))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A reader keeps one spare record per kind besides the Event's: at
	// most two Bids per subtask.
	if len(seen) > 4 {
		t.Errorf("%d distinct *Bid reached the FlatMap; with reused records at most 4", len(seen))
	}
	got := map[int64]bidSum{}
	for _, l := range readLines(t, dir) {
		var s bidSum
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		// Reduce emits every running sum: the last one per auction has
		// the most bids.
		if s.Bids > got[s.Auction].Bids {
			got[s.Auction] = s
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d auctions in the output, want %d", len(got), len(want))
	}
	for a, w := range want {
		if got[a] != w {
			t.Errorf("auction %d: %+v, want %+v", a, got[a], w)
		}
	}
}

// TestReuseRecordsRefusesKeepingConsumers: a source that reuses its
// records may feed Map and FlatMap only; a KeyBy, a Filter or a sink would
// keep records past the call, and Run says so.
func TestReuseRecordsRefusesKeepingConsumers(t *testing.T) {
	for _, consumer := range []string{"keyBy", "filter", "sink"} {
		t.Run(consumer, func(t *testing.T) {
			src, err := nexmark.New(nexmark.Events(100))
			if err != nil {
				t.Fatal(err)
			}
			env := eddy.New(eddy.LogOutput(&logBuf{}))
			ev := eddy.FromSource(env, src, eddy.ReuseRecords())
			eddy.ToSink(eddy.Map(ev, func(e *nexmark.Event) int64 { return int64(e.Kind) }), file.JSONLines[int64](t.TempDir()), eddy.UID("fine"))
			switch consumer {
			case "keyBy":
				ks := eddy.KeyBy(ev, func(e *nexmark.Event) string { return strconv.Itoa(int(e.Kind)) })
				eddy.ToSink(eddy.Reduce(ks, func(a, _ nexmark.Event) nexmark.Event { return a }), file.JSONLines[nexmark.Event](t.TempDir()))
			case "filter":
				eddy.ToSink(eddy.Filter(ev, func(e *nexmark.Event) bool { return e.Bid != nil }), file.JSONLines[nexmark.Event](t.TempDir()))
			case "sink":
				eddy.ToSink(ev, file.JSONLines[nexmark.Event](t.TempDir()))
			}
			err = env.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "ReuseRecords") || !strings.Contains(err.Error(), consumer) {
				t.Fatalf("Run = %v, want an error naming ReuseRecords and %s", err, consumer)
			}
		})
	}
}
