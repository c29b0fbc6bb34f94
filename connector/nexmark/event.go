package nexmark

import "strconv"

// Kind says which of an Event's three records is set: the event_type column
// of Flink's Nexmark table.
type Kind int32

// The kinds of Nexmark events, numbered as the reference numbers them.
const (
	PersonEvent  Kind = 0
	AuctionEvent Kind = 1
	BidEvent     Kind = 2
)

// String names the kind: "person", "auction", "bid", or "Kind(n)".
func (k Kind) String() string {
	switch k {
	case PersonEvent:
		return "person"
	case AuctionEvent:
		return "auction"
	case BidEvent:
		return "bid"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// EnumValues names the kinds in the .proto that serde.ProtoFile writes.
func (Kind) EnumValues() map[string]int32 {
	return map[string]int32{"PERSON": 0, "AUCTION": 1, "BID": 2}
}

// Event is one Nexmark event in the nested row shape of Flink's Nexmark
// table: Kind names the one of Person, Auction and Bid that is set; the
// other two are nil. Its JSON form (encoding/json, or AppendJSON without
// reflection) is
//
//	{"event_type":2,"person":null,"auction":null,"bid":{"auction":1000,...}}
//
// with the reference's column names, and its protobuf form (serde) has the
// three records as optional sub-messages. Times are epoch milliseconds.
type Event struct {
	Kind    Kind     `proto:"1,name=event_type" json:"event_type"`
	Person  *Person  `proto:"2" json:"person"`
	Auction *Auction `proto:"3" json:"auction"`
	Bid     *Bid     `proto:"4" json:"bid"`
}

// Person is a new user of the auction site.
type Person struct {
	ID           int64  `proto:"1" json:"id"`
	Name         string `proto:"2" json:"name"`
	EmailAddress string `proto:"3" json:"emailAddress"`
	CreditCard   string `proto:"4" json:"creditCard"`
	City         string `proto:"5" json:"city"`
	State        string `proto:"6" json:"state"`
	DateTime     int64  `proto:"7" json:"dateTime"`
	Extra        string `proto:"8" json:"extra"`
}

// Auction is a new item for sale, open until Expires.
type Auction struct {
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
}

// Bid is a bid of a person (Bidder) on an auction, Price in cents.
type Bid struct {
	Auction  int64  `proto:"1" json:"auction"`
	Bidder   int64  `proto:"2" json:"bidder"`
	Price    int64  `proto:"3" json:"price"`
	Channel  string `proto:"4" json:"channel"`
	URL      string `proto:"5" json:"url"`
	DateTime int64  `proto:"6" json:"dateTime"`
	Extra    string `proto:"7" json:"extra"`
}

// DateTime is the event time of e in epoch milliseconds: the dateTime of
// the record that Kind names (the computed dateTime column of Flink's
// table), or 0 if that record is nil.
func (e *Event) DateTime() int64 {
	switch {
	case e.Kind == PersonEvent && e.Person != nil:
		return e.Person.DateTime
	case e.Kind == AuctionEvent && e.Auction != nil:
		return e.Auction.DateTime
	case e.Kind == BidEvent && e.Bid != nil:
		return e.Bid.DateTime
	}
	return 0
}

// AppendJSON appends e as one JSON object, without a newline, to dst and
// returns the extended slice. The bytes are those of encoding/json with
// HTML escaping off (json.Encoder.SetEscapeHTML(false)) for strings that are
// valid UTF-8, which all generated strings are; AppendJSON neither reflects
// nor allocates beyond growing dst.
func (e *Event) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"event_type":`...)
	dst = strconv.AppendInt(dst, int64(e.Kind), 10)
	dst = append(dst, `,"person":`...)
	if p := e.Person; p == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendInt(dst, `{"id":`, p.ID)
		dst = appendString(dst, `,"name":`, p.Name)
		dst = appendString(dst, `,"emailAddress":`, p.EmailAddress)
		dst = appendString(dst, `,"creditCard":`, p.CreditCard)
		dst = appendString(dst, `,"city":`, p.City)
		dst = appendString(dst, `,"state":`, p.State)
		dst = appendInt(dst, `,"dateTime":`, p.DateTime)
		dst = appendString(dst, `,"extra":`, p.Extra)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"auction":`...)
	if a := e.Auction; a == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendInt(dst, `{"id":`, a.ID)
		dst = appendString(dst, `,"itemName":`, a.ItemName)
		dst = appendString(dst, `,"description":`, a.Description)
		dst = appendInt(dst, `,"initialBid":`, a.InitialBid)
		dst = appendInt(dst, `,"reserve":`, a.Reserve)
		dst = appendInt(dst, `,"dateTime":`, a.DateTime)
		dst = appendInt(dst, `,"expires":`, a.Expires)
		dst = appendInt(dst, `,"seller":`, a.Seller)
		dst = appendInt(dst, `,"category":`, a.Category)
		dst = appendString(dst, `,"extra":`, a.Extra)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"bid":`...)
	if b := e.Bid; b == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendInt(dst, `{"auction":`, b.Auction)
		dst = appendInt(dst, `,"bidder":`, b.Bidder)
		dst = appendInt(dst, `,"price":`, b.Price)
		dst = appendString(dst, `,"channel":`, b.Channel)
		dst = appendString(dst, `,"url":`, b.URL)
		dst = appendInt(dst, `,"dateTime":`, b.DateTime)
		dst = appendString(dst, `,"extra":`, b.Extra)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

func appendInt(dst []byte, key string, v int64) []byte {
	return strconv.AppendInt(append(dst, key...), v, 10)
}

const hexDigits = "0123456789abcdef"

// appendString appends key and s as a JSON string, escaped as
// encoding/json escapes it with HTML escaping off: quote, backslash and
// control characters, and U+2028 and U+2029. Bytes of invalid UTF-8 are
// copied as they are (encoding/json would write U+FFFD instead); the
// generator never makes them.
func appendString(dst []byte, key, s string) []byte {
	dst = append(dst, key...)
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != 0xe2 {
			continue
		}
		if c == 0xe2 { // U+2028 and U+2029 are E2 80 A8 and E2 80 A9
			if i+2 < len(s) && s[i+1] == 0x80 && s[i+2]&^1 == 0xa8 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\u202`...)
				dst = append(dst, hexDigits[s[i+2]&0xf])
				i += 2
				start = i + 1
			}
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, `\u00`...)
			dst = append(dst, hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
