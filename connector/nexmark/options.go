package nexmark

import (
	"fmt"
	"math"
	"time"
)

// Option configures New.
type Option func(*config)

type config struct {
	seed   uint64
	events int64 // 0: unbounded
	rate   float64
	splits int
	base   time.Time
	paced  bool
	now    func() time.Time // the clock of Paced; tests replace it

	// derived by check
	delayUs  float64 // event-time distance between events, microseconds
	baseMs   int64
	maxIndex int64 // indexes are in [0, maxIndex)
}

// Defaults of the options.
const (
	DefaultSeed   = 1
	DefaultRate   = 10_000_000 // events per second of event time, as in the reference's benchmark suite
	DefaultSplits = 8
)

// DefaultBaseTime is the event time of event 0 unless BaseTime says
// otherwise: 2015-07-15T00:00:00Z, the base time of Apache Beam's Nexmark
// launcher.
var DefaultBaseTime = time.Date(2015, 7, 15, 0, 0, 0, 0, time.UTC)

// Seed sets the seed that, with an event's index, determines the event's
// content (default DefaultSeed).
func Seed(s uint64) Option { return func(c *config) { c.seed = s } }

// Events bounds the source to n events in total over all splits, indexes
// 0 to n-1 (default 0: unbounded, which ends only at the largest index whose
// event time an int64 of milliseconds can hold).
func Events(n int64) Option { return func(c *config) { c.events = n } }

// Rate sets the event rate in event time, in events per second over all
// splits (default DefaultRate): event i happens at
// BaseTime + floor(i × 10⁶/r µs) truncated to the millisecond, the
// reference's inter-event delay formula. It does not pace reading unless
// Paced is given too.
func Rate(r float64) Option { return func(c *config) { c.rate = r } }

// Splits sets the number of splits (default DefaultSplits). Split s
// generates the events whose index i has i % n == s, in increasing i, so
// all splits advance through event time together. The events do not depend
// on n.
func Splits(n int) Option { return func(c *config) { c.splits = n } }

// BaseTime sets the event time of event 0 (default DefaultBaseTime),
// truncated to the millisecond.
func BaseTime(t time.Time) Option { return func(c *config) { c.base = t } }

// Paced makes readers emit in wall-clock time at the event rate, as the
// reference does unless it is told to emit at maximum speed: a reader opened
// at wall time w at index i₀ emits event i no earlier than
// w + (event time of i − event time of i₀). A reader ahead of that returns
// connector.Idle; it never sleeps. Event times do not depend on the wall
// clock.
func Paced() Option { return func(c *config) { c.paced = true } }

// maxSplits bounds Splits: far more than any parallelism, and small enough
// that index + splits never overflows.
const maxSplits = 1 << 20

func newConfig(opts []Option) (config, error) {
	c := config{seed: DefaultSeed, rate: DefaultRate, splits: DefaultSplits, base: DefaultBaseTime, now: time.Now}
	for _, o := range opts {
		o(&c)
	}
	if !(c.rate > 0) || math.IsInf(c.rate, 0) {
		return c, fmt.Errorf("nexmark: Rate(%v): want a finite number of events per second above 0", c.rate)
	}
	if c.splits < 1 || c.splits > maxSplits {
		return c, fmt.Errorf("nexmark: Splits(%d): want 1 to %d", c.splits, maxSplits)
	}
	if c.events < 0 {
		return c, fmt.Errorf("nexmark: Events(%d): want 0 (unbounded) or more", c.events)
	}
	c.delayUs = 1e6 / c.rate
	c.baseMs = c.base.UnixMilli()
	// Keep i × delay (µs), with room for the auction horizon and the
	// base time, well inside int64, and i exact in a float64.
	limit := math.Min(1<<53, math.Floor(1<<61/c.delayUs))
	c.maxIndex = int64(limit) - auctionHorizonEvents
	if c.maxIndex < 1 {
		return c, fmt.Errorf("nexmark: Rate(%v): too slow, event times would overflow", c.rate)
	}
	if b := c.baseMs; b < -1<<60 || b > 1<<60 {
		return c, fmt.Errorf("nexmark: BaseTime(%v): out of range", c.base)
	}
	if c.events > c.maxIndex {
		return c, fmt.Errorf("nexmark: Events(%d): at most %d at Rate(%v)", c.events, c.maxIndex, c.rate)
	}
	return c, nil
}

// end is one past the last index of the source.
func (c *config) end() int64 {
	if c.events > 0 {
		return c.events
	}
	return c.maxIndex
}

// eventTime is the event time of event i in epoch milliseconds: the
// reference's baseTime + (long)(eventNumber × interEventDelayUs) / 1000.
func (c *config) eventTime(i int64) int64 {
	return c.baseMs + int64(float64(i)*c.delayUs)/1000
}
