package nexmarkq

import (
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/nexmark"
	"github.com/eddyflow/eddy/state"
)

// Q5Row is a row of q5's output: an auction with the most bids in a
// sliding window, and the window ([starttime, endtime), epoch ms).
type Q5Row struct {
	Auction   int64 `proto:"1" json:"auction"`
	Num       int64 `proto:"2" json:"num"`
	StartTime int64 `proto:"3" json:"starttime"`
	EndTime   int64 `proto:"4" json:"endtime"`
}

// hottest collects, per window (its key is the start), the auctions with
// the largest count, and emits them once the watermark has passed the
// window's counts: all of them have arrived then, since each carries the
// time at the end of its window.
type hottest struct {
	top *state.Value[topAuctions]
}

// topAuctions is hottest's state.
type topAuctions struct {
	Rows []Q5Row `proto:"1"`
}

func (h *hottest) Open(ctx *eddy.OpenContext) error {
	var err error
	h.top, err = state.NewValue[topAuctions](ctx.State, "top")
	return err
}

func (h *hottest) Process(ctx *eddy.Context[int64, Q5Row], r *Q5Row) error {
	top, _ := h.top.Get()
	switch {
	case len(top.Rows) == 0 || r.Num > top.Rows[0].Num:
		top.Rows = append(top.Rows[:0:0], *r)
	case r.Num == top.Rows[0].Num:
		top.Rows = append(top.Rows[:len(top.Rows):len(top.Rows)], *r)
	default:
		return nil
	}
	h.top.Update(top)
	if ts, ok := ctx.Timestamp(); ok {
		ctx.RegisterEventTimer(ts)
	}
	return nil
}

func (h *hottest) OnTimer(ctx *eddy.Context[int64, Q5Row], _ time.Time) error {
	top, _ := h.top.Get()
	for _, r := range top.Rows {
		ctx.Emit(r)
	}
	h.top.Clear()
	return nil
}

// buildQ5 finds, for every 10 s window sliding by 2 s, the auctions with
// the most bids.
func buildQ5(env *eddy.Env, src *nexmark.Source, dir string) {
	// The bids' auctions: the only column q5 reads (event time travels
	// with every record).
	auctions := bidColumns(events(env, src), func(b *nexmark.Bid) int64 { return b.Auction })
	byAuction := eddy.KeyBy(auctions, func(a *int64) int64 { return *a })
	counts := eddy.AggregateWindows(byAuction, eddy.Sliding(10*time.Second, 2*time.Second), eddy.Aggregator[int64, int64, int64, Q5Row]{
		Add:   func(n int64, _ *int64) int64 { return n + 1 },
		Merge: func(a, b int64) int64 { return a + b }, // the windows keep 2 s panes
		Result: func(auction int64, w eddy.Window, n int64) Q5Row {
			return Q5Row{Auction: auction, Num: n, StartTime: ms(w.Start), EndTime: ms(w.End)}
		},
	}, eddy.UID("q5-count")).Results
	byWindow := eddy.KeyBy(counts, func(r *Q5Row) int64 { return r.StartTime })
	sink(eddy.Process[int64, Q5Row, Q5Row](byWindow, &hottest{}, eddy.UID("q5-max")), dir)
}

// q7Window is q7's tumbling window.
const q7Window = 10 * time.Second

// q7Candidate is a bid offered to one 10 s window of q7: as a bid of the
// window (Counts: its price is in the window's MAX) or, for a bid at the
// window's end exactly, only as a match (the reference's BETWEEN includes
// both ends, its window does not).
type q7Candidate struct {
	Window int64  `proto:"1"` // start, epoch ms
	Counts bool   `proto:"2"`
	Bid    BidRow `proto:"3"`
}

// q7State is a window's highest price among its own bids, and the bids
// that may still match it.
type q7State struct {
	Max     int64    `proto:"1"`
	HasMax  bool     `proto:"2"`
	AtMax   []BidRow `proto:"3"` // the window's bids at Max
	AtEnd   []BidRow `proto:"4"` // bids at the window's end, at or above Max
	Started bool     `proto:"5"`
}

// highestBids emits, per window, the bids whose price is the window's
// highest, once the watermark has passed the window's end (included).
type highestBids struct {
	st *state.Value[q7State]
}

func (h *highestBids) Open(ctx *eddy.OpenContext) error {
	var err error
	h.st, err = state.NewValue[q7State](ctx.State, "window")
	return err
}

func (h *highestBids) Process(ctx *eddy.Context[int64, BidRow], c *q7Candidate) error {
	st, _ := h.st.Get()
	if !st.Started {
		st.Started = true
		ctx.RegisterEventTimer(time.UnixMilli(c.Window).Add(q7Window + time.Millisecond))
	}
	p := c.Bid.Price
	switch {
	case !c.Counts:
		if !st.HasMax || p >= st.Max {
			st.AtEnd = append(st.AtEnd[:len(st.AtEnd):len(st.AtEnd)], c.Bid)
		}
	case !st.HasMax || p > st.Max:
		st.Max, st.HasMax = p, true
		st.AtMax = []BidRow{c.Bid}
	case p == st.Max:
		st.AtMax = append(st.AtMax[:len(st.AtMax):len(st.AtMax)], c.Bid)
	default:
		return nil
	}
	h.st.Update(st)
	return nil
}

func (h *highestBids) OnTimer(ctx *eddy.Context[int64, BidRow], _ time.Time) error {
	st, _ := h.st.Get()
	h.st.Clear()
	if !st.HasMax {
		return nil
	}
	for _, b := range st.AtMax {
		ctx.Emit(b)
	}
	for _, b := range st.AtEnd {
		if b.Price == st.Max {
			ctx.Emit(b)
		}
	}
	return nil
}

// buildQ7 finds the bids with the highest price of each 10 s window,
// including those at the window's end exactly, as the reference's
// BETWEEN does.
func buildQ7(env *eddy.Env, src *nexmark.Source, dir string) {
	size := q7Window.Milliseconds()
	cands := eddy.FlatMap(events(env, src), func(e *nexmark.Event, emit func(q7Candidate)) error {
		b := e.Bid // the bids view and the candidates in one step
		if b == nil {
			return nil
		}
		start := b.DateTime - (b.DateTime%size+size)%size
		emit(q7Candidate{Window: start, Counts: true, Bid: bidRow(b)})
		if start == b.DateTime {
			emit(q7Candidate{Window: start - size, Bid: bidRow(b)})
		}
		return nil
	})
	byWindow := eddy.KeyBy(cands, func(c *q7Candidate) int64 { return c.Window })
	sink(eddy.Process[int64, q7Candidate, BidRow](byWindow, &highestBids{}, eddy.UID("q7-max")), dir)
}

// Q8Row is a row of q8's sink table: a person who opened an auction in
// the 10 s window in which they joined, and the window's start (epoch ms).
type Q8Row struct {
	ID    int64  `proto:"1" json:"id"`
	Name  string `proto:"2" json:"name"`
	STime int64  `proto:"3" json:"stime"`
}

// q8Person is the columns of a person q8 reads.
type q8Person struct {
	ID   int64  `proto:"1"`
	Name string `proto:"2"`
}

// buildQ8 finds the new persons who opened an auction in the same 10 s
// tumbling window.
func buildQ8(env *eddy.Env, src *nexmark.Source, dir string) {
	ev := events(env, src)
	// The columns q8 reads: a person's id and name, an auction's seller.
	ps := personColumns(ev, func(p *nexmark.Person) q8Person { return q8Person{ID: p.ID, Name: p.Name} })
	sellers := auctionColumns(ev, func(a *nexmark.Auction) int64 { return a.Seller })
	cs := eddy.Connect(eddy.KeyBy(ps, func(p *q8Person) int64 { return p.ID }),
		eddy.KeyBy(sellers, func(s *int64) int64 { return *s }))
	sink(eddy.CoGroupWindows(cs, eddy.Tumbling(10*time.Second),
		func(id int64, w eddy.Window, ps []q8Person, as []int64, emit func(Q8Row)) error {
			if len(as) == 0 {
				return nil
			}
			seen := map[string]bool{} // GROUP BY id, name
			for _, p := range ps {
				if !seen[p.Name] {
					seen[p.Name] = true
					emit(Q8Row{ID: id, Name: p.Name, STime: ms(w.Start)})
				}
			}
			return nil
		}, eddy.UID("q8-join")), dir)
}

// Q11Row is a row of q11's and q12's sink tables: a bidder's number of
// bids in a window ([starttime, endtime), epoch ms).
type Q11Row struct {
	Bidder    int64 `proto:"1" json:"bidder"`
	BidCount  int64 `proto:"2" json:"bid_count"`
	StartTime int64 `proto:"3" json:"starttime"`
	EndTime   int64 `proto:"4" json:"endtime"`
}

// countBids counts a bidder's bids per window.
var countBids = eddy.Aggregator[int64, int64, int64, Q11Row]{
	Add:   func(n int64, _ *int64) int64 { return n + 1 },
	Merge: func(a, b int64) int64 { return a + b },
	Result: func(bidder int64, w eddy.Window, n int64) Q11Row {
		return Q11Row{Bidder: bidder, BidCount: n, StartTime: ms(w.Start), EndTime: ms(w.End)}
	},
}

// bidders is the bids' bidders: the only column q11 and q12 read.
func bidders(ev *eddy.Stream[nexmark.Event]) *eddy.Stream[int64] {
	return bidColumns(ev, func(b *nexmark.Bid) int64 { return b.Bidder })
}

// buildQ11 counts each bidder's bids per session (10 s of inactivity end
// one).
func buildQ11(env *eddy.Env, src *nexmark.Source, dir string) {
	byBidder := eddy.KeyBy(bidders(events(env, src)), func(b *int64) int64 { return *b })
	sink(eddy.AggregateWindows(byBidder, eddy.Session(10*time.Second), countBids, eddy.UID("q11-count")).Results, dir)
}

// buildQ12 counts each bidder's bids per 10 s tumbling window of
// processing time.
func buildQ12(env *eddy.Env, src *nexmark.Source, dir string) {
	byBidder := eddy.KeyBy(bidders(events(env, src)), func(b *int64) int64 { return *b })
	sink(eddy.AggregateWindows(byBidder, eddy.Tumbling(10*time.Second).InProcessingTime(), countBids, eddy.UID("q12-count")).Results, dir)
}
