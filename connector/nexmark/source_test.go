package nexmark

import (
	"context"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/internal/splitmix"
)

var ctx = context.Background()

func mustNew(t testing.TB, opts ...Option) *Source {
	t.Helper()
	s, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readSplit reads split s of src from pos to its end.
func readSplit(t testing.TB, src *Source, s int, pos []byte) []Event {
	t.Helper()
	r, err := src.OpenSplit(ctx, s, pos)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []Event
	for {
		var e Event
		st, err := r.Next(&e)
		if err != nil {
			t.Fatal(err)
		}
		if st == connector.End {
			return out
		}
		if st != connector.Record {
			t.Fatalf("split %d: status %v without pacing", s, st)
		}
		out = append(out, e)
	}
}

// TestSplitsPartitionTheIndexes: whatever the number of splits, split s
// yields exactly events s, s+n, s+2n, ... and they equal the events of a
// one-split source and of Source.Event.
func TestSplitsPartitionTheIndexes(t *testing.T) {
	const n = 2_017
	one := readSplit(t, mustNew(t, Seed(5), Events(n), Splits(1)), 0, nil)
	if len(one) != n {
		t.Fatalf("one split: %d events, want %d", len(one), n)
	}
	ref := mustNew(t, Seed(5), Events(n), Splits(3))
	for i := range int64(n) {
		if e := ref.Event(i); !reflect.DeepEqual(e, one[i]) {
			t.Fatalf("event %d: reader %+v, Event %+v", i, one[i], e)
		}
	}
	for _, splits := range []int{2, 3, 7, 8, 50, 64, 3000} {
		src := mustNew(t, Seed(5), Events(n), Splits(splits))
		total := 0
		for s := range splits {
			got := readSplit(t, src, s, nil)
			for k, e := range got {
				i := s + k*splits
				if !reflect.DeepEqual(e, one[i]) {
					t.Fatalf("%d splits: split %d record %d is not event %d", splits, s, k, i)
				}
			}
			total += len(got)
		}
		if total != n {
			t.Fatalf("%d splits: %d events, want %d", splits, total, n)
		}
	}
}

func TestSeedChangesContentOnly(t *testing.T) {
	a := readSplit(t, mustNew(t, Seed(1), Events(500), Splits(1)), 0, nil)
	b := readSplit(t, mustNew(t, Seed(2), Events(500), Splits(1)), 0, nil)
	if reflect.DeepEqual(a, b) {
		t.Fatal("seeds 1 and 2 give the same events")
	}
	for i := range a {
		if a[i].Kind != b[i].Kind || a[i].DateTime() != b[i].DateTime() {
			t.Fatalf("event %d: kind or time depends on the seed", i)
		}
	}
}

// TestInterleavedAndResumed reads the splits in a random interleaving,
// closing readers and reopening them from their Position at random points
// (also after their end), and expects every split to yield exactly the
// events of an uninterrupted pass.
func TestInterleavedAndResumed(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		opts := []Option{Seed(seed), Events(3_001), Splits(4)}
		src := mustNew(t, opts...)
		want := make([][]Event, src.Splits())
		for s := range want {
			want[s] = readSplit(t, src, s, nil)
		}
		src = mustNew(t, opts...) // nothing shared with the first pass
		rnd := rand.New(rand.NewPCG(seed, 42))
		got := make([][]Event, src.Splits())
		readers := make([]connector.SplitReader[Event], src.Splits())
		for s := range readers {
			r, err := src.OpenSplit(ctx, s, nil)
			if err != nil {
				t.Fatal(err)
			}
			readers[s] = r
		}
		ended := 0
		for ended < len(readers) {
			s := rnd.IntN(len(readers))
			if rnd.IntN(40) == 0 {
				pos := readers[s].Position()
				readers[s].Close()
				r, err := src.OpenSplit(ctx, s, pos)
				if err != nil {
					t.Fatalf("reopen split %d at %x: %v", s, pos, err)
				}
				readers[s] = r
			}
			var e Event
			if len(got[s]) > 0 && rnd.IntN(2) == 0 {
				e = got[s][len(got[s])-1] // a used record: Next must overwrite it all
				e.Person, e.Auction, e.Bid = clonePtr(e.Person), clonePtr(e.Auction), clonePtr(e.Bid)
			}
			st, err := readers[s].Next(&e)
			if err != nil {
				t.Fatal(err)
			}
			switch st {
			case connector.Record:
				got[s] = append(got[s], e)
			case connector.End:
				if len(got[s]) == len(want[s]) {
					ended++
					got[s] = append(got[s], Event{}) // count it once
				}
			default:
				t.Fatalf("status %v", st)
			}
		}
		for s := range got {
			got[s] = got[s][:len(got[s])-1]
			if !reflect.DeepEqual(got[s], want[s]) {
				t.Fatalf("seed %d split %d: resumed reading differs (%d events, want %d)", seed, s, len(got[s]), len(want[s]))
			}
		}
	}
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// TestProportions: every 50 consecutive events from a multiple of 50 are
// one person, then three auctions, then 46 bids, so any multiple of 50
// events holds exactly 1:3:46 of them.
func TestProportions(t *testing.T) {
	const n = 50 * 401
	src := mustNew(t, Seed(9), Events(n), Splits(7))
	counts := map[Kind]int{}
	for s := range src.Splits() {
		for k, e := range readSplit(t, src, s, nil) {
			i := int64(s + k*7)
			want := BidEvent
			switch i % 50 {
			case 0:
				want = PersonEvent
			case 1, 2, 3:
				want = AuctionEvent
			}
			if e.Kind != want || KindOf(i) != want {
				t.Fatalf("event %d: kind %d, want %d", i, e.Kind, want)
			}
			set := 0
			for _, p := range []bool{e.Person != nil, e.Auction != nil, e.Bid != nil} {
				if p {
					set++
				}
			}
			if set != 1 || (want == PersonEvent) != (e.Person != nil) || (want == AuctionEvent) != (e.Auction != nil) {
				t.Fatalf("event %d of kind %d: person %v auction %v bid %v", i, e.Kind, e.Person != nil, e.Auction != nil, e.Bid != nil)
			}
			counts[e.Kind]++
		}
	}
	if counts[PersonEvent] != n/50 || counts[AuctionEvent] != 3*n/50 || counts[BidEvent] != 46*n/50 {
		t.Fatalf("counts %v over %d events", counts, n)
	}
}

// TestIDsAndValues walks the events in order and checks the reference's
// guarantees: persons and auctions are numbered consecutively; sellers,
// bidders and auctions of bids are ids that exist or, at most 10 ids ahead,
// will exist soon (the reference's id leads); hot sellers and hot auctions
// exist already; random choices stay among the active persons and the
// auctions in flight; hot ids dominate as the hot ratios say; times follow
// the inter-event delay; values are in the reference's ranges.
func TestIDsAndValues(t *testing.T) {
	const n = 250_000
	src := mustNew(t, Seed(11), Events(n), Rate(10_000), Splits(1))
	r, err := src.OpenSplit(ctx, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	lastPerson, lastAuction := int64(FirstPersonID-1), int64(FirstAuctionID-1)
	var bids, hotAuction, hotBidder, ahead, auctions, hotSeller int
	var e Event
	for i := int64(0); ; i++ {
		st, err := r.Next(&e)
		if err != nil {
			t.Fatal(err)
		}
		if st == connector.End {
			if i != n {
				t.Fatalf("ended after %d events", i)
			}
			break
		}
		ts := e.DateTime()
		if want := DefaultBaseTime.UnixMilli() + i/10; ts != want || src.EventTime(i) != want {
			t.Fatalf("event %d at %d, want %d", i, ts, want)
		}
		switch e.Kind {
		case PersonEvent:
			p := e.Person
			if p.ID != lastPerson+1 {
				t.Fatalf("event %d: person %d after %d", i, p.ID, lastPerson)
			}
			lastPerson = p.ID
			if len(p.CreditCard) != 19 || !strings.Contains(p.EmailAddress, "@") || !strings.HasSuffix(p.EmailAddress, ".com") || p.Name == "" || p.City == "" || len(p.State) != 2 {
				t.Fatalf("event %d: person %+v", i, p)
			}
		case AuctionEvent:
			a := e.Auction
			auctions++
			if a.ID != lastAuction+1 {
				t.Fatalf("event %d: auction %d after %d", i, a.ID, lastAuction)
			}
			lastAuction = a.ID
			checkRef(t, i, "seller", a.Seller, lastPerson, FirstPersonID, numActivePeople, personIDLead)
			if a.Seller == (lastPerson-FirstPersonID)/100*100+FirstPersonID {
				hotSeller++
			}
			if a.Seller > lastPerson {
				ahead++
			}
			if a.Expires <= a.DateTime || a.Reserve <= a.InitialBid || a.InitialBid < 100 || a.InitialBid > 100_000_000 ||
				a.Category < FirstCategoryID || a.Category >= FirstCategoryID+5 || a.ItemName == "" {
				t.Fatalf("event %d: auction %+v", i, a)
			}
		case BidEvent:
			b := e.Bid
			bids++
			checkRef(t, i, "auction", b.Auction, lastAuction, FirstAuctionID, numInFlightAuctions+1, auctionIDLead)
			checkRef(t, i, "bidder", b.Bidder, lastPerson, FirstPersonID, numActivePeople, personIDLead)
			if b.Auction == (lastAuction-FirstAuctionID)/100*100+FirstAuctionID {
				hotAuction++
			}
			if b.Bidder == (lastPerson-FirstPersonID)/100*100+1+FirstPersonID {
				hotBidder++
			}
			if b.Auction > lastAuction || b.Bidder > lastPerson {
				ahead++
			}
			if b.Price < 100 || b.Price > 100_000_000 || b.Channel == "" || !strings.HasPrefix(b.URL, "https://www.nexmark.com/") {
				t.Fatalf("event %d: bid %+v", i, b)
			}
		}
	}
	// Hot choices, plus the random ones that hit the hot id by chance.
	frac := func(k, of int) float64 { return float64(k) / float64(of) }
	if f := frac(hotAuction, bids); f < 0.5 || f > 0.53 {
		t.Errorf("%.3f of bids on the hot auction, want about 1/2", f)
	}
	if f := frac(hotBidder, bids); f < 0.74 || f > 0.77 {
		t.Errorf("%.3f of bids by the hot bidder, want about 3/4", f)
	}
	if f := frac(hotSeller, auctions); f < 0.74 || f > 0.77 {
		t.Errorf("%.3f of auctions by the hot seller, want about 3/4", f)
	}
	// Ids ahead of the newest: about 5% of the events, as in the
	// reference (mostly bids on one of the 10 auctions to come, chosen
	// among 111 for half of the bids).
	if f := frac(ahead, n); f < 0.03 || f > 0.07 {
		t.Errorf("%.4f of events name an id that does not exist yet", f)
	}
}

// checkRef checks that id, referenced at event i when last is the newest
// id, is one of the window newest ids (or, while fewer exist, any) or one
// of the lead ids to come.
func checkRef(t *testing.T, i int64, what string, id, last, first, window, lead int64) {
	t.Helper()
	lo := max(first, last-window+1)
	if id < lo || id > last+lead {
		t.Fatalf("event %d: %s %d outside [%d, %d] (newest %d)", i, what, id, lo, last+lead, last)
	}
}

func TestEventTimes(t *testing.T) {
	base := DefaultBaseTime.UnixMilli()
	for _, tc := range []struct {
		rate    float64
		i, want int64
	}{
		{10_000_000, 0, base},
		{10_000_000, 9_999, base},
		{10_000_000, 10_000, base + 1},
		{4, 1, base + 250},
		{4, 7, base + 1750},
		{1000, 123_456, base + 123_456},
		{3, 1, base + 333},
	} {
		src := mustNew(t, Rate(tc.rate))
		if got := src.EventTime(tc.i); got != tc.want {
			t.Errorf("rate %v: event %d at %d, want %d", tc.rate, tc.i, got, tc.want)
		}
		if e := src.Event(tc.i); e.DateTime() != tc.want {
			t.Errorf("rate %v: event %d has dateTime %d, want %d", tc.rate, tc.i, e.DateTime(), tc.want)
		}
	}
}

func TestBadOptions(t *testing.T) {
	nan := 0.0
	nan = nan / nan
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{Rate(0), "Rate(0)"},
		{Rate(-5), "Rate(-5)"},
		{Rate(nan), "Rate(NaN)"},
		{Rate(1e-300), "too slow"},
		{Splits(0), "Splits(0)"},
		{Splits(maxSplits + 1), "Splits("},
		{Events(-1), "Events(-1)"},
		{Events(1 << 62), "Events("},
	} {
		if _, err := New(tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error with %q, got %v", tc.want, err)
		}
	}
}

func TestBadPositions(t *testing.T) {
	src := mustNew(t, Events(100), Splits(3))
	if _, err := src.OpenSplit(ctx, 3, nil); err == nil || !strings.Contains(err.Error(), "split 3 out of range") {
		t.Errorf("split 3 of 3: %v", err)
	}
	if _, err := src.OpenSplit(ctx, -1, nil); err == nil {
		t.Error("split -1 opened")
	}
	for _, tc := range []struct {
		split int
		pos   []byte
		want  string
	}{
		{0, []byte{}, "truncated varint"},
		{0, []byte{0x80}, "truncated varint"},
		{0, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "overflows"},
		{0, []byte{0x03, 0x00}, "1 trailing bytes"},
		{0, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "out of range"},
		{1, []byte{0x03}, "index 3 belongs to split 0 of 3"},
		{1, []byte{103}, "past the split's end 100"},
		{2, []byte{104}, "past the split's end 101"},
	} {
		_, err := src.OpenSplit(ctx, tc.split, tc.pos)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nexmark: split") {
			t.Errorf("split %d at %x: want an error with %q, got %v", tc.split, tc.pos, tc.want, err)
		}
	}
	// The end positions themselves are valid and read nothing.
	for s, end := range []byte{102, 100, 101} {
		if got := readSplit(t, src, s, []byte{end}); len(got) != 0 {
			t.Errorf("split %d at its end: %d events", s, len(got))
		}
	}
}

// TestPriceMatchesPow: the table-driven price is the reference's
// round(10^(6u) × 100), computed here with math.Pow, to the cent.
func TestPriceMatchesPow(t *testing.T) {
	tab := sharedTables()
	differ := 0
	for k := range uint64(1_000_000) {
		r := rng{s: k * 0x2545f4914f6cdd1d}
		u := float64(r.uint64()>>11) * 0x1p-53
		r.s -= splitmix.Golden // draw the same number again
		got, want := tab.price(&r), int64(math.Round(math.Pow(10, 6*u)*100))
		if got != want {
			if got-want > 1 || want-got > 1 {
				t.Fatalf("u=%v: price %d, math.Pow gives %d", u, got, want)
			}
			differ++
		}
		if got < 100 || got > 100_000_000 {
			t.Fatalf("price %d out of range", got)
		}
	}
	if differ > 10 {
		t.Errorf("%d of 10⁶ prices differ from math.Pow's by a cent", differ)
	}
}
