package nexmarkq

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/eddyflow/eddy/connector/nexmark"
)

// The models compute each query's result table by brute force from the
// events (Source.Event), independently of the jobs: rows are maps with the
// column names of the reference's sink tables, compared as canonical JSON
// (keys sorted).

type row = map[string]any

// canon is the canonical JSON of a row.
func canon(r row) string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func canonAll(rows []row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = canon(r)
	}
	slices.Sort(out)
	return out
}

// eventsOf lists the events of src.
func eventsOf(src *nexmark.Source) (ps []nexmark.Person, as []nexmark.Auction, bs []nexmark.Bid) {
	for i := range src.Len() {
		e := src.Event(i)
		switch e.Kind {
		case nexmark.PersonEvent:
			ps = append(ps, *e.Person)
		case nexmark.AuctionEvent:
			as = append(as, *e.Auction)
		case nexmark.BidEvent:
			bs = append(bs, *e.Bid)
		}
	}
	return
}

func bidCols(b nexmark.Bid) row {
	return row{"auction": b.Auction, "bidder": b.Bidder, "price": b.Price, "dateTime": b.DateTime, "extra": b.Extra}
}

func modelQ0(_ []nexmark.Person, _ []nexmark.Auction, bs []nexmark.Bid) []row {
	var out []row
	for _, b := range bs {
		out = append(out, bidCols(b))
	}
	return out
}

func modelQ1(_ []nexmark.Person, _ []nexmark.Auction, bs []nexmark.Bid) []row {
	var out []row
	for _, b := range bs {
		r := bidCols(b)
		milli := b.Price * 908 // 0.908 × price, in thousandths
		r["price"] = json.Number(fmt.Sprintf("%d.%03d", milli/1000, milli%1000))
		out = append(out, r)
	}
	return out
}

func modelQ2(_ []nexmark.Person, _ []nexmark.Auction, bs []nexmark.Bid) []row {
	var out []row
	for _, b := range bs {
		if b.Auction%123 == 0 {
			out = append(out, row{"auction": b.Auction, "price": b.Price})
		}
	}
	return out
}

func modelQ3(ps []nexmark.Person, as []nexmark.Auction, _ []nexmark.Bid) []row {
	var out []row
	for _, a := range as {
		if a.Category != 10 {
			continue
		}
		for _, p := range ps {
			if p.ID == a.Seller && (p.State == "OR" || p.State == "ID" || p.State == "CA") {
				out = append(out, row{"name": p.Name, "city": p.City, "state": p.State, "id": a.ID})
			}
		}
	}
	return out
}

// winnersOf is, per auction with at least one bid between its opening and
// expiry, the top bid by price descending, time ascending (then bidder,
// extra): the reference's ROW_NUMBER() … rownum <= 1.
func winnersOf(as []nexmark.Auction, bs []nexmark.Bid) map[int64]nexmark.Bid {
	byAuction := map[int64][]nexmark.Bid{}
	for _, b := range bs {
		byAuction[b.Auction] = append(byAuction[b.Auction], b)
	}
	out := map[int64]nexmark.Bid{}
	for _, a := range as {
		var valid []nexmark.Bid
		for _, b := range byAuction[a.ID] {
			if a.DateTime <= b.DateTime && b.DateTime <= a.Expires {
				valid = append(valid, b)
			}
		}
		if len(valid) == 0 {
			continue
		}
		slices.SortFunc(valid, func(x, y nexmark.Bid) int {
			switch {
			case x.Price != y.Price:
				return -cmp64(x.Price, y.Price)
			case x.DateTime != y.DateTime:
				return cmp64(x.DateTime, y.DateTime)
			case x.Bidder != y.Bidder:
				return cmp64(x.Bidder, y.Bidder)
			}
			if x.Extra < y.Extra {
				return -1
			}
			return 1
		})
		out[a.ID] = valid[0]
	}
	return out
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func modelQ4(_ []nexmark.Person, as []nexmark.Auction, bs []nexmark.Bid) []row {
	w := winnersOf(as, bs)
	sum, n := map[int64]int64{}, map[int64]int64{}
	for _, a := range as {
		if b, ok := w[a.ID]; ok {
			sum[a.Category] += b.Price
			n[a.Category]++
		}
	}
	var out []row
	for c := range sum {
		out = append(out, row{"id": c, "final": sum[c] / n[c]})
	}
	return out
}

func modelQ5(_ []nexmark.Person, _ []nexmark.Auction, bs []nexmark.Bid) []row {
	type key struct{ start, auction int64 }
	counts := map[key]int64{}
	for _, b := range bs {
		last := b.DateTime - b.DateTime%2000
		for s := last - 8000; s <= last; s += 2000 {
			counts[key{s, b.Auction}]++
		}
	}
	maxOf := map[int64]int64{}
	for k, n := range counts {
		maxOf[k.start] = max(maxOf[k.start], n)
	}
	var out []row
	for k, n := range counts {
		if n == maxOf[k.start] {
			out = append(out, row{"auction": k.auction, "num": n, "starttime": k.start, "endtime": k.start + 10000})
		}
	}
	return out
}

func modelQ6(_ []nexmark.Person, as []nexmark.Auction, bs []nexmark.Bid) []row {
	w := winnersOf(as, bs)
	type sold struct{ t, id, price int64 }
	bySeller := map[int64][]sold{}
	for _, a := range as {
		if b, ok := w[a.ID]; ok {
			bySeller[a.Seller] = append(bySeller[a.Seller], sold{b.DateTime, a.ID, b.Price})
		}
	}
	var out []row
	for seller, ss := range bySeller {
		slices.SortFunc(ss, func(x, y sold) int {
			if x.t != y.t {
				return cmp64(x.t, y.t)
			}
			return cmp64(x.id, y.id)
		})
		ss = ss[max(0, len(ss)-11):]
		var sum int64
		for _, s := range ss {
			sum += s.price
		}
		out = append(out, row{"seller": seller, "avg_price": sum / int64(len(ss))})
	}
	return out
}

func modelQ7(_ []nexmark.Person, _ []nexmark.Auction, bs []nexmark.Bid) []row {
	maxOf := map[int64]int64{} // window start → highest price
	for _, b := range bs {
		s := b.DateTime - b.DateTime%10000
		if m, ok := maxOf[s]; !ok || b.Price > m {
			maxOf[s] = b.Price
		}
	}
	var out []row
	for _, b := range bs {
		for s, m := range maxOf { // B.dateTime BETWEEN end - 10 s AND end
			if s <= b.DateTime && b.DateTime <= s+10000 && b.Price == m {
				out = append(out, bidCols(b))
			}
		}
	}
	return out
}

func modelQ8(ps []nexmark.Person, as []nexmark.Auction, _ []nexmark.Bid) []row {
	type key struct{ id, start int64 }
	sold := map[key]bool{}
	for _, a := range as {
		sold[key{a.Seller, a.DateTime - a.DateTime%10000}] = true
	}
	seen := map[string]bool{}
	var out []row
	for _, p := range ps {
		r := row{"id": p.ID, "name": p.Name, "stime": p.DateTime - p.DateTime%10000}
		if sold[key{p.ID, p.DateTime - p.DateTime%10000}] && !seen[canon(r)] {
			seen[canon(r)] = true
			out = append(out, r)
		}
	}
	return out
}

func modelQ9(_ []nexmark.Person, as []nexmark.Auction, bs []nexmark.Bid) []row {
	w := winnersOf(as, bs)
	var out []row
	for _, a := range as {
		b, ok := w[a.ID]
		if !ok {
			continue
		}
		out = append(out, row{"id": a.ID, "itemName": a.ItemName, "description": a.Description,
			"initialBid": a.InitialBid, "reserve": a.Reserve, "dateTime": a.DateTime, "expires": a.Expires,
			"seller": a.Seller, "category": a.Category, "extra": a.Extra,
			"auction": b.Auction, "bidder": b.Bidder, "price": b.Price, "bid_dateTime": b.DateTime, "bid_extra": b.Extra})
	}
	return out
}

func modelQ10(_ []nexmark.Person, _ []nexmark.Auction, bs []nexmark.Bid) []row {
	var out []row
	for _, b := range bs {
		r := bidCols(b)
		t := time.UnixMilli(b.DateTime).UTC()
		r["dt"] = fmt.Sprintf("%04d-%02d-%02d", t.Year(), t.Month(), t.Day())
		r["hm"] = fmt.Sprintf("%02d:%02d", t.Hour(), t.Minute())
		out = append(out, r)
	}
	return out
}

func modelQ11(_ []nexmark.Person, _ []nexmark.Auction, bs []nexmark.Bid) []row {
	times := map[int64][]int64{}
	for _, b := range bs {
		times[b.Bidder] = append(times[b.Bidder], b.DateTime)
	}
	var out []row
	for bidder, ts := range times {
		slices.Sort(ts)
		start, n := ts[0], int64(1)
		for i := 1; i <= len(ts); i++ {
			if i < len(ts) && ts[i]-ts[i-1] <= 10000 { // [t, t+10 s) windows that touch merge
				n++
				continue
			}
			out = append(out, row{"bidder": bidder, "bid_count": n, "starttime": start, "endtime": ts[i-1] + 10000})
			if i < len(ts) {
				start, n = ts[i], 1
			}
		}
	}
	return out
}

// modelQ12Totals is what q12's processing-time windows must add up to:
// every bidder's number of bids.
func modelQ12Totals(bs []nexmark.Bid) map[int64]int64 {
	n := map[int64]int64{}
	for _, b := range bs {
		n[b.Bidder]++
	}
	return n
}
