// Package nexmark owns the Nexmark benchmark's event generator: persons
// opening accounts, auctions opening and bids on them, in the proportions
// 1:3:46 and with the hot auctions, bidders and sellers, price, time and id
// formulas of the reference generator (github.com/nexmark/nexmark,
// nexmark-flink's generator package, itself derived from Apache Beam's).
//
// Data enters nowhere: New(opts...) is a connector.Source[Event] whose
// event i (counted from 0 over all splits) is computed from i, the Seed, the
// Rate and the BaseTime alone, so a job reads the same events at any
// parallelism, with any number of Splits, and after any resume. Events
// leave through SplitReader.Next as Event values in Flink's nested row shape
// (Kind, and one of Person, Auction, Bid); Source.Event(i) computes one
// event without a reader, for tests and models; Event.AppendJSON writes the
// JSON line `eddy nexmark gen` writes. What a checkpoint stores of the
// source is a split's next index, a uvarint.
//
// # The generator
//
// Of every 50 consecutive events starting at a multiple of 50, the first is
// a person, the next three are auctions and the other 46 are bids (KindOf).
// Person ids count from FirstPersonID and auction ids from FirstAuctionID
// in the order of their events. Event i happens at
// BaseTime + floor(i × 10⁶/Rate µs) truncated to milliseconds.
//
// An auction's seller is, with probability 3/4, the hot seller: the first
// person of the newest batch of 100 persons; otherwise one of the 1000
// newest persons or of the next 10 to come. A bid's auction is, with
// probability 1/2, the hot auction (the first of the newest batch of 100
// auctions), otherwise one of the 100 newest auctions or of the next 10
// to come; its bidder is, with probability 3/4, the hot bidder (the second
// person of the newest batch of 100), otherwise chosen as a seller is.
// Like the reference, then, an auction or a bid may name a person or an
// auction up to 10 ids ahead of the newest one, which the stream creates
// a little later (the reference's PERSON_ID_LEAD and AUCTION_ID_LEAD:
// "newPerson and newAuction events appear to have been swapped in time");
// hot sellers and hot auctions always exist already. About 5% of the events
// name such an id, mostly bids on an auction to come. Prices are
// log-uniform from $1 to $10⁶ in cents; a reserve is the initial bid plus
// such a price; an auction expires 1 ms to twice the event time of 1666
// events (the time in which 100 auctions are created) after it opens, that
// time on average;
// categories are 10 to 14. Names, cities, states and channels come from
// the reference's lists; half of the bids come through one of its four hot
// channels. Every record ends with an extra string that brings its size to
// the reference's average (person 200, auction 500, bid 100 bytes), ±20%.
//
// # Differences from the reference generator
//
// Deliberate, each because the reference's behaviour would break
// determinism or is a bug:
//
//   - Randomness: the reference draws from one unseeded SplittableRandom per
//     generator, so its events differ at every run. Here every event has
//     its own SplitMix64 stream seeded from (Seed, i). Strings and numbers
//     therefore differ from any run of the reference; their distributions
//     are the same.
//   - Event numbering: the reference's Flink table source starts at event
//     id 2 (firstEventId 1 plus firstEventNumber 1), so its first event is
//     an auction and person 1000 is never created; here event 0 is
//     person 1000 and happens at BaseTime exactly.
//   - Parallelism: the reference splits the id space into one contiguous
//     range per parallel generator, each on its own timeline starting at
//     the base time with the inter-event delay multiplied by the
//     parallelism, so the events depend on the parallelism. Here there is
//     one timeline at Rate, and split s generates the indexes ≡ s mod
//     Splits. The auction length horizon (1666 events) is counted on that
//     one timeline, as the reference does at parallelism 1: at the default
//     Rate of 10⁷ events/s auctions last 1 or 2 ms of event time, at
//     10⁴ events/s a sixth of a second on average.
//   - Base time: the reference uses the wall clock at job start; here the
//     BaseTime option, by default 2015-07-15T00:00:00Z (Beam's base time).
//   - Bidder ids: nexmark-flink's BidGenerator adds FIRST_PERSON_ID to the
//     bidder twice, so its bidders are persons 1000 ids above the intended
//     one (often persons that do not exist yet); here it is added once, as
//     in Apache Beam, and bidders are real persons.
//   - Shared tables: the reference builds its hot URLs, its 10,000-channel
//     URL cache and its 1 MiB pool of extra strings from an unseeded random
//     per process; here they come from a fixed seed, identical in every
//     process and for every Seed. The pool holds lowercase letters only
//     (the reference's pool also holds the characters 'H' to '`', from a
//     negative remainder). The channel id in a channel URL is
//     |reverse32(i)| taken in 64 bits (channel 1: 2147483648, where the
//     reference writes -2147483648).
//   - Person names: a first and a last name are drawn as one index into the
//     99 combinations (one draw instead of two: the same distribution).
//   - Integer draws use Lemire's multiply-shift instead of Java's
//     rejection sampling. Prices are computed from tables of powers of 10
//     and a short polynomial instead of Math.pow (they agree with math.Pow
//     to the cent): math.Pow and math.Exp are assembly on some
//     architectures and may differ in the last bit between them, and the
//     generator uses no floating-point operation whose result could differ
//     between CPU architectures, so that the output is meant to be
//     byte-identical on all of them (tested on amd64 only).
//   - Not implemented: the reference's rate shapes (square/sine rate
//     changes), out-of-order groups (outOfOrderGroupSize > 1), delayed
//     events and the side-input generator; proportions, hot ratios and
//     average sizes are fixed at the reference's defaults.
//   - Wall-clock emission: the reference emits at maximum speed by default
//     (maxEmitSpeed) and otherwise sleeps until each event's wall-clock
//     time; here Paced makes a reader return connector.Idle until then,
//     and a resumed reader is paced from the moment it reopens.
package nexmark
