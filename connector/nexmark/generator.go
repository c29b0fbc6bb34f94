package nexmark

import (
	"math"
	"math/bits"

	"github.com/eddyflow/eddy/connector"
)

// The reference generator's constants.
const (
	personProportion  = 1
	auctionProportion = 3
	bidProportion     = 46
	totalProportion   = personProportion + auctionProportion + bidProportion

	// FirstPersonID and FirstAuctionID are the ids of the first person
	// and the first auction; FirstCategoryID is the smallest category.
	FirstPersonID   = 1000
	FirstAuctionID  = 1000
	FirstCategoryID = 10

	numCategories       = 5
	personIDLead        = 10 // ids of not-yet-created persons a random choice may pick
	auctionIDLead       = 10
	numActivePeople     = 1000
	numInFlightAuctions = 100

	hotAuctionRatio = 2   // a bid is on a hot auction with probability 1 - 1/2
	hotSellersRatio = 4   // an auction is by a hot seller with probability 1 - 1/4
	hotBiddersRatio = 4   // a bid is by a hot bidder with probability 1 - 1/4
	hotBatch        = 100 // hot ids are the first (seller, auction) or second (bidder) of the last batch of 100
	hotChannelRatio = 2   // a bid comes through a hot channel with probability 1 - 1/2

	avgPersonBytes  = 200
	avgAuctionBytes = 500
	avgBidBytes     = 100

	// auctionHorizonEvents is the number of events over which
	// numInFlightAuctions auctions are created: auctions last that long on
	// average.
	auctionHorizonEvents = numInFlightAuctions * totalProportion / auctionProportion
)

// KindOf is the kind of event i: of every 50 consecutive indexes starting
// at a multiple of 50, the first is a person, the next 3 are auctions and
// the last 46 are bids.
func KindOf(i int64) Kind {
	switch r := i % totalProportion; {
	case r < personProportion:
		return PersonEvent
	case r < personProportion+auctionProportion:
		return AuctionEvent
	}
	return BidEvent
}

// lastPersonID is the base-0 id of the newest person at event i (its own
// id if i is a person).
func lastPersonID(i int64) int64 {
	epoch, off := i/totalProportion, i%totalProportion
	if off >= personProportion {
		off = personProportion - 1
	}
	return epoch*personProportion + off
}

// lastAuctionID is the base-0 id of the newest auction at event i (its own
// id if i is an auction); -1 before the first auction.
func lastAuctionID(i int64) int64 {
	epoch, off := i/totalProportion, i%totalProportion
	switch {
	case off < personProportion:
		epoch--
		off = auctionProportion - 1
	case off >= personProportion+auctionProportion:
		off = auctionProportion - 1
	default:
		off -= personProportion
	}
	return epoch*auctionProportion + off
}

// randomPersonID picks one of the last numActivePeople persons, or one of
// the personIDLead persons that come next (base 0).
func randomPersonID(i int64, r *rng) int64 {
	people := lastPersonID(i) + 1
	active := min(people, numActivePeople)
	return people - active + r.intn(active+personIDLead)
}

// randomAuctionID picks one of the last numInFlightAuctions auctions, or
// one of the auctionIDLead that come next (base 0).
func randomAuctionID(i int64, r *rng) int64 {
	last := lastAuctionID(i)
	lo := max(last-numInFlightAuctions, 0)
	return lo + r.intn(last-lo+1+auctionIDLead)
}

// price is log-uniform from 1 to 10⁶ dollars, in cents: the reference's
// round(10^(6u) × 100) for a uniform u in [0, 1).
func (t *tables) price(r *rng) int64 {
	// 6u in units of 2⁻¹⁵: n = d×2¹⁵ + hi×2¹⁰ + lo and a fraction f, so
	// 10^(6u) = 10^d × 10^(hi/32) × 10^(lo/32768) × 10^(f/32768).
	n, frac := bits.Mul64(r.uint64(), 6<<15)
	d, hi, lo := n>>15, n>>10&31, n&1023
	x := float64(frac>>11) * (0x1p-53 * math.Ln10 / (1 << 15)) // < 7.1e-5
	// e^x to within 1e-18: a Taylor polynomial. The float64 conversions
	// keep the compiler from fusing multiply-adds, which some
	// architectures would round differently.
	poly := float64(1 + float64(x*float64(1+float64(x*float64(0.5+float64(x*(1.0/6)))))))
	v := float64(float64(float64(centsOfPow10[d]*t.pow10Hi[hi])*t.pow10Lo[lo]) * poly)
	return int64(math.Round(v))
}

var centsOfPow10 = [6]float64{1e2, 1e3, 1e4, 1e5, 1e6, 1e7}

// expSeries is e^x for 0 ≤ x < 2.5 by its Taylor series, in plain
// multiplications and additions so that every architecture computes the
// same bits (math.Exp and math.Pow are assembly on some).
func expSeries(x float64) float64 {
	sum, term := 1.0, 1.0
	for k := 1; k < 40; k++ {
		term = float64(term*x) / float64(k)
		sum = float64(sum + term)
	}
	return sum
}

// extraLen is the length of the extra string that brings a record of
// current bytes to avg on average: uniform in ±20% around the rest.
func extraLen(r *rng, current, avg int64) int64 {
	if current > avg {
		return 0
	}
	rest := avg - current
	delta := (2*rest + 5) / 10 // round(rest × 0.2), exactly
	n := rest - delta
	if delta > 0 {
		n += r.intn(2 * delta)
	}
	return n
}

// extra cuts an extra string of extraLen bytes from the shared pool.
func (t *tables) extra(r *rng, current, avg int64) string {
	n := extraLen(r, current, avg)
	off := r.intn(int64(len(t.extraPool)) - n)
	return t.extraPool[off : off+n]
}

// generator fills events; it belongs to one reader (or one call of
// Source.Event) because of its scratch buffer.
type generator struct {
	cfg     *config
	tab     *tables
	scratch []byte
	// spare records taken out of an Event that switched kind, for the next
	// event of their kind.
	person  *Person
	auction *Auction
	bid     *Bid
	// New records and their strings, for an Event whose record is nil (as
	// the runtime passes them: records must own their memory), are carved
	// from chunks.
	persons  connector.Slab[Person]
	auctions connector.Slab[Auction]
	bids     connector.Slab[Bid]
	strs     connector.Strings
}

// fill makes *e event i. It reuses the records e points to and then, for
// bids, allocates nothing; new records and the strings of a person or an
// auction come from chunks shared by many events.
func (g *generator) fill(i int64, e *Event) {
	if e.Person != nil {
		g.person, e.Person = e.Person, nil
	}
	if e.Auction != nil {
		g.auction, e.Auction = e.Auction, nil
	}
	if e.Bid != nil {
		g.bid, e.Bid = e.Bid, nil
	}
	r := eventRNG(g.cfg.seed, i)
	ts := g.cfg.eventTime(i)
	e.Kind = KindOf(i)
	switch e.Kind {
	case PersonEvent:
		p := g.person
		if p == nil {
			p = g.persons.New()
		}
		g.person, e.Person = nil, p
		g.fillPerson(i, ts, &r, p)
	case AuctionEvent:
		a := g.auction
		if a == nil {
			a = g.auctions.New()
		}
		g.auction, e.Auction = nil, a
		g.fillAuction(i, ts, &r, a)
	default:
		b := g.bid
		if b == nil {
			b = g.bids.New()
		}
		g.bid, e.Bid = nil, b
		g.fillBid(i, ts, &r, b)
	}
}

func (g *generator) fillPerson(i, ts int64, r *rng, p *Person) {
	p.ID = lastPersonID(i) + FirstPersonID
	p.Name = g.tab.names[r.intn(int64(len(g.tab.names)))]
	b := g.scratch[:0]
	b = appendRandomString(b, r, 7, ' ')
	b = append(b, '@')
	b = appendRandomString(b, r, 5, ' ')
	b = append(b, ".com"...)
	emailEnd := len(b)
	for k := range 4 {
		if k > 0 {
			b = append(b, ' ')
		}
		n := r.intn(10_000)
		b = append(b, byte('0'+n/1000), byte('0'+n/100%10), byte('0'+n/10%10), byte('0'+n%10))
	}
	g.scratch = b
	s := g.strs.String(b)
	p.EmailAddress, p.CreditCard = s[:emailEnd], s[emailEnd:]
	p.City = usCities[r.intn(int64(len(usCities)))]
	p.State = usStates[r.intn(int64(len(usStates)))]
	p.DateTime = ts
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = g.tab.extra(r, int64(size), avgPersonBytes)
}

func (g *generator) fillAuction(i, ts int64, r *rng, a *Auction) {
	a.ID = lastAuctionID(i) + FirstAuctionID
	if r.intn(hotSellersRatio) > 0 {
		a.Seller = lastPersonID(i) / hotBatch * hotBatch
	} else {
		a.Seller = randomPersonID(i, r)
	}
	a.Seller += FirstPersonID
	a.Category = FirstCategoryID + r.intn(numCategories)
	a.InitialBid = g.tab.price(r)
	horizon := g.cfg.eventTime(i+auctionHorizonEvents) - ts
	a.DateTime = ts
	a.Expires = ts + 1 + r.intn(max(2*horizon, 1))
	b := g.scratch[:0]
	b = appendRandomString(b, r, 20, ' ')
	nameEnd := len(b)
	b = appendRandomString(b, r, 100, ' ')
	g.scratch = b
	s := g.strs.String(b)
	a.ItemName, a.Description = s[:nameEnd], s[nameEnd:]
	a.Reserve = a.InitialBid + g.tab.price(r)
	size := 8 + len(a.ItemName) + len(a.Description) + 8*5
	a.Extra = g.tab.extra(r, int64(size), avgAuctionBytes)
}

func (g *generator) fillBid(i, ts int64, r *rng, b *Bid) {
	if r.intn(hotAuctionRatio) > 0 {
		b.Auction = lastAuctionID(i) / hotBatch * hotBatch
	} else {
		b.Auction = randomAuctionID(i, r)
	}
	b.Auction += FirstAuctionID
	if r.intn(hotBiddersRatio) > 0 {
		// The second person of the batch, so that hot bidders are not
		// hot sellers.
		b.Bidder = lastPersonID(i)/hotBatch*hotBatch + 1
	} else {
		b.Bidder = randomPersonID(i, r)
	}
	b.Bidder += FirstPersonID
	b.Price = g.tab.price(r)
	if r.intn(hotChannelRatio) > 0 {
		k := r.intn(int64(len(hotChannel)))
		b.Channel, b.URL = hotChannel[k], g.tab.hotURLs[k]
	} else {
		k := r.intn(channels)
		b.Channel, b.URL = g.tab.channelName[k], g.tab.channelURL[k]
	}
	b.DateTime = ts
	b.Extra = g.tab.extra(r, 8*4, avgBidBytes)
}
