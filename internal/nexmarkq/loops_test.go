package nexmarkq

import (
	"time"

	"github.com/eddyflow/eddy/connector/nexmark"
)

// The hand loops: each query computed in one goroutine over the events in
// order, with plain maps, no checkpoints and no output but a count of the
// result rows: the speed limit the benchmarks compare the jobs with. They
// rely on the events coming in time order (one reader), which a job
// cannot; winners are taken at the end of the input.

type loop func(e *nexmark.Event)

// loops builds each query's loop; rows counts the result rows (changes
// for q4 and q6 are counted as result rows too: one per update).
func loops(rows *int64) map[string]func() (loop, func()) {
	noEnd := func() {}
	emit := func() { *rows++ }
	return map[string]func() (loop, func()){
		"q0": func() (loop, func()) {
			var r BidRow
			return func(e *nexmark.Event) {
				if e.Bid != nil {
					r = bidRow(e.Bid)
					emit()
				}
				_ = r
			}, noEnd
		},
		"q1": func() (loop, func()) {
			var r Q1Row
			return func(e *nexmark.Event) {
				if b := e.Bid; b != nil {
					r = Q1Row{Auction: b.Auction, Bidder: b.Bidder, Price: Decimal3(908 * b.Price), DateTime: b.DateTime, Extra: b.Extra}
					emit()
				}
				_ = r
			}, noEnd
		},
		"q2": func() (loop, func()) {
			return func(e *nexmark.Event) {
				if e.Bid != nil && e.Bid.Auction%123 == 0 {
					emit()
				}
			}, noEnd
		},
		"q3": func() (loop, func()) {
			sellers := map[int64]sellerInfo{}
			waiting := map[int64][]int64{}
			return func(e *nexmark.Event) {
				switch {
				case e.Person != nil:
					p := e.Person
					if p.State == "OR" || p.State == "ID" || p.State == "CA" {
						sellers[p.ID] = sellerInfo{Name: p.Name, City: p.City, State: p.State}
						for range waiting[p.ID] {
							emit()
						}
						delete(waiting, p.ID)
					}
				case e.Auction != nil && e.Auction.Category == 10:
					if _, ok := sellers[e.Auction.Seller]; ok {
						emit()
					} else {
						waiting[e.Auction.Seller] = append(waiting[e.Auction.Seller], e.Auction.ID)
					}
				}
			}, noEnd
		},
		"q4": func() (loop, func()) {
			w, end := winnerLoop()
			return w, func() {
				sum, n := map[int64]int64{}, map[int64]int64{}
				for _, x := range end() {
					sum[x.Auction.Category] += x.Bid.Price
					n[x.Auction.Category]++
					emit()
				}
			}
		},
		"q5": func() (loop, func()) {
			counts := map[int64]map[int64]int64{} // window start → auction → bids
			closeBefore := func(t int64) {
				for s, m := range counts {
					if s+10_000 <= t {
						var top int64
						for _, n := range m {
							top = max(top, n)
						}
						for _, n := range m {
							if n == top {
								emit()
							}
						}
						delete(counts, s)
					}
				}
			}
			var lastClose int64
			return func(e *nexmark.Event) {
					b := e.Bid
					if b == nil {
						return
					}
					if b.DateTime-lastClose >= 2000 {
						closeBefore(b.DateTime)
						lastClose = b.DateTime
					}
					last := b.DateTime - b.DateTime%2000
					for s := last - 8000; s <= last; s += 2000 {
						m := counts[s]
						if m == nil {
							m = map[int64]int64{}
							counts[s] = m
						}
						m[b.Auction]++
					}
				}, func() {
					closeBefore(1 << 62)
				}
		},
		"q6": func() (loop, func()) {
			w, end := winnerLoop()
			return w, func() {
				last := map[int64][]sale{}
				for _, x := range end() {
					last[x.Auction.Seller] = keepLast(last[x.Auction.Seller], sale{Time: x.Bid.DateTime, Auction: x.Auction.ID, Price: x.Bid.Price})
					emit()
				}
			}
		},
		"q7": func() (loop, func()) {
			type win struct {
				max   int64
				atMax []BidRow
			}
			var cur win
			var curStart, prevMax int64 = -1, -1
			return func(e *nexmark.Event) {
					b := e.Bid
					if b == nil {
						return
					}
					s := b.DateTime - b.DateTime%10_000
					if s != curStart {
						prevMax = -1
						if curStart >= 0 {
							for range cur.atMax {
								emit()
							}
							if s == curStart+10_000 {
								prevMax = cur.max
							}
						}
						cur, curStart = win{}, s
					}
					if b.DateTime == s && b.Price == prevMax {
						emit() // at the previous window's end exactly
					}
					switch {
					case b.Price > cur.max:
						cur.max, cur.atMax = b.Price, append(cur.atMax[:0], bidRow(b))
					case b.Price == cur.max:
						cur.atMax = append(cur.atMax, bidRow(b))
					}
				}, func() {
					for range cur.atMax {
						emit()
					}
				}
		},
		"q8": func() (loop, func()) {
			var start int64 = -1
			persons := map[int64]string{}
			sellers := map[int64]bool{}
			flush := func() {
				for id := range persons {
					if sellers[id] {
						emit()
					}
				}
				clear(persons)
				clear(sellers)
			}
			return func(e *nexmark.Event) {
				t := EventTime(e).UnixMilli()
				if s := t - t%10_000; s != start {
					flush()
					start = s
				}
				switch {
				case e.Person != nil:
					persons[e.Person.ID] = e.Person.Name
				case e.Auction != nil:
					sellers[e.Auction.Seller] = true
				}
			}, flush
		},
		"q9": func() (loop, func()) {
			w, end := winnerLoop()
			return w, func() {
				for _, x := range end() {
					r := q9Row(&x)
					_ = r
					emit()
				}
			}
		},
		"q10": func() (loop, func()) {
			var r Q10Row
			return func(e *nexmark.Event) {
				if b := e.Bid; b != nil {
					t := time.UnixMilli(b.DateTime).UTC()
					r = Q10Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra,
						DT: t.Format("2006-01-02"), HM: t.Format("15:04")}
					emit()
				}
				_ = r
			}, noEnd
		},
		"q11": func() (loop, func()) {
			type session struct{ start, last, n int64 }
			open := map[int64]session{}
			return func(e *nexmark.Event) {
					b := e.Bid
					if b == nil {
						return
					}
					s, ok := open[b.Bidder]
					switch {
					case !ok:
						s = session{b.DateTime, b.DateTime, 1}
					case b.DateTime-s.last <= 10_000:
						s.last, s.n = b.DateTime, s.n+1
					default:
						emit()
						s = session{b.DateTime, b.DateTime, 1}
					}
					open[b.Bidder] = s
				}, func() {
					for range open {
						emit()
					}
				}
		},
		"q12": func() (loop, func()) {
			counts := map[int64]int64{}
			return func(e *nexmark.Event) {
					if e.Bid != nil {
						counts[e.Bid.Bidder]++
					}
				}, func() {
					for range counts {
						emit()
					}
				}
		},
	}
}

// winnerLoop keeps every auction's best bid; end lists the winners.
func winnerLoop() (loop, func() []Winner) {
	open := map[int64]*Winner{}
	early := map[int64][]nexmark.Bid{}
	has := map[int64]bool{}
	offer := func(w *Winner, b *nexmark.Bid) {
		if b.DateTime < w.Auction.DateTime || b.DateTime > w.Auction.Expires {
			return
		}
		if !has[w.Auction.ID] || beats(b, &w.Bid) {
			w.Bid, has[w.Auction.ID] = *b, true
		}
	}
	return func(e *nexmark.Event) {
			switch {
			case e.Auction != nil:
				w := &Winner{Auction: *e.Auction}
				open[e.Auction.ID] = w
				for _, b := range early[e.Auction.ID] {
					offer(w, &b)
				}
				delete(early, e.Auction.ID)
			case e.Bid != nil:
				if w, ok := open[e.Bid.Auction]; ok {
					offer(w, e.Bid)
				} else {
					early[e.Bid.Auction] = append(early[e.Bid.Auction], *e.Bid)
				}
			}
		}, func() []Winner {
			var out []Winner
			for id, w := range open {
				if has[id] {
					out = append(out, *w)
				}
			}
			return out
		}
}
