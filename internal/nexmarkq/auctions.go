package nexmarkq

import (
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/nexmark"
	"github.com/eddyflow/eddy/state"
)

// Q3Row is a row of q3's sink table: a seller and one of their auctions.
type Q3Row struct {
	Name  string `proto:"1" json:"name"`
	City  string `proto:"2" json:"city"`
	State string `proto:"3" json:"state"`
	ID    int64  `proto:"4" json:"id"`
}

// sellerInfo is what q3 keeps of a person.
type sellerInfo struct {
	Name  string `proto:"1"`
	City  string `proto:"2"`
	State string `proto:"3"`
}

// q3States are the states whose sellers q3 keeps.
func q3State(s string) bool { return s == "OR" || s == "ID" || s == "CA" }

// q3Join is the regular inner join of persons and q3's auctions on person
// id = seller, with the filter on the person's state. A person id names one
// person, so the person side keeps one row (only the state, for a person
// of another state, so that their auctions are dropped, not kept waiting);
// auctions that come before their seller wait for them.
type q3Join struct {
	person  *state.Value[sellerInfo]
	waiting *state.List[int64]
}

func (j *q3Join) Open(ctx *eddy.OpenContext) error {
	var err error
	if j.person, err = state.NewValue[sellerInfo](ctx.State, "person"); err != nil {
		return err
	}
	j.waiting, err = state.NewList[int64](ctx.State, "waiting-auctions")
	return err
}

func (j *q3Join) Process1(ctx *eddy.Context[int64, Q3Row], p *nexmark.Person) error {
	if !q3State(p.State) {
		j.person.Update(sellerInfo{State: p.State})
		j.waiting.Clear()
		return nil
	}
	info := sellerInfo{Name: p.Name, City: p.City, State: p.State}
	j.person.Update(info)
	for _, id := range j.waiting.Get() {
		ctx.Emit(Q3Row{Name: info.Name, City: info.City, State: info.State, ID: id})
	}
	j.waiting.Clear()
	return nil
}

func (j *q3Join) Process2(ctx *eddy.Context[int64, Q3Row], a *nexmark.Auction) error {
	info, ok := j.person.Get()
	switch {
	case !ok:
		j.waiting.Add(a.ID)
	case q3State(info.State):
		ctx.Emit(Q3Row{Name: info.Name, City: info.City, State: info.State, ID: a.ID})
	}
	return nil
}

// buildQ3 joins the auctions of category 10 with their sellers in Oregon,
// Idaho or California.
func buildQ3(env *eddy.Env, src *nexmark.Source, dir string) {
	ev := events(env, src)
	as := eddy.Filter(auctions(ev), func(a *nexmark.Auction) bool { return a.Category == 10 })
	cs := eddy.Connect(eddy.KeyBy(persons(ev), func(p *nexmark.Person) int64 { return p.ID }),
		eddy.KeyBy(as, func(a *nexmark.Auction) int64 { return a.Seller }))
	sink(eddy.CoProcess[int64, nexmark.Person, nexmark.Auction, Q3Row](cs, &q3Join{}, eddy.UID("q3-join")), dir)
}

// Winner is an auction and its winning bid: of the bids on it made between
// its opening and its expiry (both included), the highest, and of equal
// highest bids the earliest (then the lowest bidder, then the smallest
// extra, so that the choice is deterministic).
type Winner struct {
	Auction nexmark.Auction `proto:"1"`
	Bid     nexmark.Bid     `proto:"2"`
}

// beats reports whether bid b wins over bid c.
func beats(b, c *nexmark.Bid) bool {
	if b.Price != c.Price {
		return b.Price > c.Price
	}
	if b.DateTime != c.DateTime {
		return b.DateTime < c.DateTime
	}
	if b.Bidder != c.Bidder {
		return b.Bidder < c.Bidder
	}
	return b.Extra < c.Extra
}

// closeAuctions is the inner join of auctions with their bids (bid time
// between the auction's opening and expiry) that keeps only the best bid:
// q4's MAX(price) per auction, q6's and q9's ROW_NUMBER() … rownum <= 1. An
// auction's winner is emitted once, when the watermark passes its expiry,
// since no bid that counts can come later; an auction without bids emits
// nothing (inner join). Bids that come before their auction wait for it;
// bids after the close are dropped.
type closeAuctions struct {
	auction *state.Value[nexmark.Auction]
	best    *state.Value[nexmark.Bid]
	early   *state.List[nexmark.Bid]
	closed  *state.Value[bool]
}

func (c *closeAuctions) Open(ctx *eddy.OpenContext) error {
	var err error
	if c.auction, err = state.NewValue[nexmark.Auction](ctx.State, "auction"); err != nil {
		return err
	}
	if c.best, err = state.NewValue[nexmark.Bid](ctx.State, "best-bid"); err != nil {
		return err
	}
	if c.early, err = state.NewList[nexmark.Bid](ctx.State, "early-bids"); err != nil {
		return err
	}
	c.closed, err = state.NewValue[bool](ctx.State, "closed")
	return err
}

func (c *closeAuctions) Process1(ctx *eddy.Context[int64, Winner], a *nexmark.Auction) error {
	c.auction.Update(*a)
	for _, b := range c.early.Get() {
		c.offer(a, &b)
	}
	c.early.Clear()
	ctx.RegisterEventTimer(time.UnixMilli(a.Expires))
	return nil
}

func (c *closeAuctions) Process2(ctx *eddy.Context[int64, Winner], b *nexmark.Bid) error {
	if done, _ := c.closed.Get(); done {
		return nil
	}
	if a, ok := c.auction.Get(); ok {
		c.offer(&a, b)
	} else {
		c.early.Add(*b)
	}
	return nil
}

// offer makes b the auction's best bid if it counts and wins.
func (c *closeAuctions) offer(a *nexmark.Auction, b *nexmark.Bid) {
	if b.DateTime < a.DateTime || b.DateTime > a.Expires {
		return
	}
	if best, ok := c.best.Get(); !ok || beats(b, &best) {
		c.best.Update(*b)
	}
}

func (c *closeAuctions) OnTimer(ctx *eddy.Context[int64, Winner], _ time.Time) error {
	a, ok := c.auction.Get()
	if !ok {
		return nil
	}
	if b, ok := c.best.Get(); ok {
		ctx.Emit(Winner{Auction: a, Bid: b})
	}
	c.auction.Clear()
	c.best.Clear()
	c.closed.Update(true)
	return nil
}

// winners is the stream of closed auctions with their winning bids.
func winners(env *eddy.Env, src *nexmark.Source) *eddy.Stream[Winner] {
	ev := events(env, src)
	cs := eddy.Connect(eddy.KeyBy(auctions(ev), func(a *nexmark.Auction) int64 { return a.ID }),
		eddy.KeyBy(bids(ev), func(b *nexmark.Bid) int64 { return b.Auction }))
	return eddy.CoProcess[int64, nexmark.Auction, nexmark.Bid, Winner](cs, &closeAuctions{}, eddy.UID("close-auctions"))
}

// Q4Row is a row of q4's sink table: a category and the average winning
// price of its auctions (integer division, as Flink's AVG of a BIGINT).
type Q4Row struct {
	ID    int64 `proto:"1" json:"id"`
	Final int64 `proto:"2" json:"final"`
}

// sumCount is an average's accumulator.
type sumCount struct {
	Sum   int64 `proto:"1"`
	Count int64 `proto:"2"`
}

// buildQ4 averages, per category, the winning prices of its auctions, as
// an updating table.
func buildQ4(env *eddy.Env, src *nexmark.Source, dir string) {
	byCategory := eddy.KeyBy(winners(env, src), func(w *Winner) int64 { return w.Auction.Category })
	sink(eddy.GroupAggregate(byCategory, eddy.GroupAggregator[int64, Winner, sumCount, Q4Row]{
		Add: func(acc sumCount, w *Winner) sumCount {
			return sumCount{Sum: acc.Sum + w.Bid.Price, Count: acc.Count + 1}
		},
		Result: func(cat int64, acc sumCount) Q4Row { return Q4Row{ID: cat, Final: acc.Sum / acc.Count} },
	}, eddy.UID("q4-avg")), dir)
}

// Q6Row is a row of q6's sink table: a seller and the average winning
// price of their last Q6Window auctions.
type Q6Row struct {
	Seller   int64 `proto:"1" json:"seller"`
	AvgPrice int64 `proto:"2" json:"avg_price"`
}

// Q6Window is how many of a seller's auctions q6 averages: ROWS BETWEEN
// 10 PRECEDING AND CURRENT ROW.
const Q6Window = 11

// sale is one closed auction of a seller, as q6 orders them: by the time
// of the winning bid, then by auction id.
type sale struct {
	Time    int64 `proto:"1"`
	Auction int64 `proto:"2"`
	Price   int64 `proto:"3"`
}

func (s sale) before(o sale) bool {
	return s.Time < o.Time || s.Time == o.Time && s.Auction < o.Auction
}

// keepLast inserts s into last, sorted oldest first, and keeps the newest
// Q6Window; it returns a new slice (accumulators are values).
func keepLast(last []sale, s sale) []sale {
	out := make([]sale, 0, len(last)+1)
	i := 0
	for i < len(last) && last[i].before(s) {
		i++
	}
	out = append(append(append(out, last[:i]...), s), last[i:]...)
	if len(out) > Q6Window {
		out = out[len(out)-Q6Window:]
	}
	return out
}

// lastSales is q6's accumulator.
type lastSales struct {
	Last []sale `proto:"1"`
}

// buildQ6 averages, per seller, the winning prices of their last 11
// auctions (by the time of the winning bid), as an updating table.
func buildQ6(env *eddy.Env, src *nexmark.Source, dir string) {
	bySeller := eddy.KeyBy(winners(env, src), func(w *Winner) int64 { return w.Auction.Seller })
	sink(eddy.GroupAggregate(bySeller, eddy.GroupAggregator[int64, Winner, lastSales, Q6Row]{
		Add: func(acc lastSales, w *Winner) lastSales {
			return lastSales{Last: keepLast(acc.Last, sale{Time: w.Bid.DateTime, Auction: w.Auction.ID, Price: w.Bid.Price})}
		},
		Result: func(seller int64, acc lastSales) Q6Row {
			var sum int64
			for _, s := range acc.Last {
				sum += s.Price
			}
			return Q6Row{Seller: seller, AvgPrice: sum / int64(len(acc.Last))}
		},
	}, eddy.UID("q6-avg")), dir)
}

// Q9Row is a row of q9's sink table: an auction and its winning bid.
type Q9Row struct {
	ID          int64  `proto:"1" json:"id"`
	ItemName    string `proto:"2" json:"itemName"`
	Description string `proto:"3" json:"description"`
	InitialBid  int64  `proto:"4" json:"initialBid"`
	Reserve     int64  `proto:"5" json:"reserve"`
	DateTime    int64  `proto:"6" json:"dateTime"`
	Expires     int64  `proto:"7" json:"expires"`
	Seller      int64  `proto:"8" json:"seller"`
	Category    int64  `proto:"9" json:"category"`
	Extra       string `proto:"10" json:"extra"`
	Auction     int64  `proto:"11" json:"auction"`
	Bidder      int64  `proto:"12" json:"bidder"`
	Price       int64  `proto:"13" json:"price"`
	BidDateTime int64  `proto:"14" json:"bid_dateTime"`
	BidExtra    string `proto:"15" json:"bid_extra"`
}

func q9Row(w *Winner) Q9Row {
	a, b := &w.Auction, &w.Bid
	return Q9Row{ID: a.ID, ItemName: a.ItemName, Description: a.Description, InitialBid: a.InitialBid,
		Reserve: a.Reserve, DateTime: a.DateTime, Expires: a.Expires, Seller: a.Seller, Category: a.Category,
		Extra: a.Extra, Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, BidDateTime: b.DateTime, BidExtra: b.Extra}
}

// buildQ9 writes every auction with its winning bid.
func buildQ9(env *eddy.Env, src *nexmark.Source, dir string) {
	sink(eddy.Map(winners(env, src), q9Row), dir)
}
