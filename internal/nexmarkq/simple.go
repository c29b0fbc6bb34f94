package nexmarkq

import (
	"strconv"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/discard"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/connector/nexmark"
)

// BidRow is a row of q0's and q7's sink tables: a bid without its
// channel and url.
type BidRow struct {
	Auction  int64  `proto:"1" json:"auction"`
	Bidder   int64  `proto:"2" json:"bidder"`
	Price    int64  `proto:"3" json:"price"`
	DateTime int64  `proto:"4" json:"dateTime"`
	Extra    string `proto:"5" json:"extra"`
}

func bidRow(b *nexmark.Bid) BidRow {
	return BidRow{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra}
}

// buildQ0 is the pass-through: every bid.
func buildQ0(env *eddy.Env, src *nexmark.Source, dir string) {
	sink(bidColumns(events(env, src), bidRow), dir)
}

// Decimal3 is a decimal with three digits after the point, held in
// thousandths: q1's DECIMAL(23, 3). Its JSON form is the exact number,
// 1234.500 for 1234500.
type Decimal3 int64

// MarshalJSON writes d as an exact JSON number with three decimals.
func (d Decimal3) MarshalJSON() ([]byte, error) { return d.AppendText(nil) }

// AppendText appends d as text: the integer part, a point, three digits.
func (d Decimal3) AppendText(b []byte) ([]byte, error) {
	v := int64(d)
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	b = strconv.AppendInt(b, v/1000, 10)
	f := v % 1000
	return append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10)), nil
}

// Q1Row is a row of q1's sink table: a bid with its price in euros.
type Q1Row struct {
	Auction  int64    `proto:"1" json:"auction"`
	Bidder   int64    `proto:"2" json:"bidder"`
	Price    Decimal3 `proto:"3" json:"price"`
	DateTime int64    `proto:"4" json:"dateTime"`
	Extra    string   `proto:"5" json:"extra"`
}

// buildQ1 converts every bid's price from dollars to euros (× 0.908),
// exactly, as DECIMAL(23, 3).
func buildQ1(env *eddy.Env, src *nexmark.Source, dir string) {
	sink(bidColumns(events(env, src), func(b *nexmark.Bid) Q1Row {
		return Q1Row{Auction: b.Auction, Bidder: b.Bidder, Price: Decimal3(908 * b.Price), DateTime: b.DateTime, Extra: b.Extra}
	}), dir)
}

// Q2Row is a row of q2's sink table.
type Q2Row struct {
	Auction int64 `proto:"1" json:"auction"`
	Price   int64 `proto:"2" json:"price"`
}

// buildQ2 selects the bids on auctions whose id is a multiple of 123.
func buildQ2(env *eddy.Env, src *nexmark.Source, dir string) {
	rows := bidColumns(events(env, src), func(b *nexmark.Bid) Q2Row { return Q2Row{Auction: b.Auction, Price: b.Price} })
	sink(eddy.Filter(rows, func(r *Q2Row) bool { return r.Auction%123 == 0 }), dir)
}

// Q10Row is a row of q10's sink table: a bid with its UTC day and minute,
// which also name its partition, dt=<DT>/hm=<HM>.
type Q10Row struct {
	Auction  int64  `proto:"1" json:"auction"`
	Bidder   int64  `proto:"2" json:"bidder"`
	Price    int64  `proto:"3" json:"price"`
	DateTime int64  `proto:"4" json:"dateTime"`
	Extra    string `proto:"5" json:"extra"`
	DT       string `proto:"6" json:"dt"`
	HM       string `proto:"7" json:"hm"`
}

// Partition is the row's Hive-style directory: "dt=2015-07-15/hm=00:00".
func (r *Q10Row) Partition() string { return "dt=" + r.DT + "/hm=" + r.HM }

// buildQ10 writes every bid into the partition of its day and minute (UTC).
func buildQ10(env *eddy.Env, src *nexmark.Source, dir string) {
	rows := bidColumns(events(env, src), func(b *nexmark.Bid) Q10Row {
		t := time.UnixMilli(b.DateTime).UTC()
		return Q10Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra,
			DT: t.Format("2006-01-02"), HM: t.Format("15:04")}
	})
	if dir == "" {
		eddy.ToSink(rows, discard.Sink[Q10Row](), eddy.UID("sink"))
		return
	}
	eddy.ToSink(rows, file.PartitionedJSONLines(dir, (*Q10Row).Partition), eddy.UID("sink"))
}
