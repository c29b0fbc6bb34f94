package nexmark

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/internal/cacheline"
)

// Source is the Nexmark generator as a connector.Source: New makes one.
// Event i (counted over all splits, from 0) depends only on i and the
// options Seed, Rate and BaseTime; Events says how many there are, Splits
// how they are read.
type Source struct {
	cfg config
	tab *tables
}

var _ connector.Source[Event] = (*Source)(nil)

// New returns a Nexmark source, or an error that names the option whose
// value is out of range.
func New(opts ...Option) (*Source, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Source{cfg: c, tab: sharedTables()}, nil
}

// Name identifies the source in checkpoints: "nexmark".
func (s *Source) Name() string { return "nexmark" }

// Splits is the number of splits (the Splits option).
func (s *Source) Splits() int { return s.cfg.splits }

// Len is the number of events: Events, or if that is 0, the largest
// number whose event times fit in an int64 of milliseconds.
func (s *Source) Len() int64 { return s.cfg.end() }

// EventTime is the event time of event i in epoch milliseconds.
func (s *Source) EventTime(i int64) int64 { return s.cfg.eventTime(i) }

// Event returns event i without opening a reader: the reference that tests
// and models compare readers with. i should be in [0, Len()).
func (s *Source) Event(i int64) Event {
	g := generator{cfg: &s.cfg, tab: s.tab}
	var e Event
	g.fill(i, &e)
	return e
}

// OpenSplit opens split at pos, a Position of an earlier reader of the
// split, or at its first event if pos is nil. A position is the split's
// next index as a uvarint; one that is malformed, belongs to another split
// or lies past the split's end is an error.
func (s *Source) OpenSplit(_ context.Context, split int, pos []byte) (connector.SplitReader[Event], error) {
	n := int64(s.cfg.splits)
	if split < 0 || int64(split) >= n {
		return nil, fmt.Errorf("%s: split %d out of range [0, %d)", s.Name(), split, n)
	}
	next := int64(split)
	if pos != nil {
		i, err := s.decodePosition(int64(split), pos)
		if err != nil {
			return nil, err
		}
		next = i
	}
	r := &reader{
		gen:   generator{cfg: &s.cfg, tab: s.tab},
		step:  n,
		next:  next,
		end:   s.cfg.end(),
		paced: s.cfg.paced,
		now:   s.cfg.now,
	}
	if r.paced {
		r.wallStart = r.now()
		r.firstMs = s.cfg.eventTime(next)
		r.dueMs = r.firstMs
	}
	return r, nil
}

// decodePosition checks pos for split and returns the index it holds.
func (s *Source) decodePosition(split int64, pos []byte) (int64, error) {
	n := int64(s.cfg.splits)
	v, k := binary.Uvarint(pos)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: split %d: invalid position %x: %s", s.Name(), split, pos, fmt.Sprintf(format, args...))
	}
	switch {
	case k == 0:
		return 0, bad("truncated varint")
	case k < 0:
		return 0, bad("varint overflows 64 bits")
	case k != len(pos):
		return 0, bad("%d trailing bytes", len(pos)-k)
	case v > math.MaxInt64:
		return 0, bad("index %d out of range", v)
	}
	i := int64(v)
	if i%n != split {
		return 0, bad("index %d belongs to split %d of %d", i, i%n, n)
	}
	// The split ends at its first index at or past the end.
	end := s.cfg.end()
	if last := end + (split-end%n+n)%n; i > last {
		return 0, bad("index %d is past the split's end %d (%d events)", i, last, end)
	}
	return i, nil
}

type reader struct {
	_         cacheline.Pad // written per event; one per split, each read by its own subtask
	gen       generator
	step      int64 // the number of splits
	next, end int64 // next index; one past the last index of the source

	// Paced only: event i is due when its event time is at most dueMs,
	// which is the first event's time plus the wall time since wallStart,
	// last read from the clock.
	paced     bool
	now       func() time.Time
	wallStart time.Time
	firstMs   int64
	dueMs     int64
	_         cacheline.Pad
}

func (r *reader) Next(e *Event) (connector.ReadStatus, error) {
	if r.next >= r.end {
		return connector.End, nil
	}
	if r.paced && r.gen.cfg.eventTime(r.next) > r.dueMs {
		// The clock is read only when the events due at the last
		// reading are spent.
		r.dueMs = r.firstMs + r.now().Sub(r.wallStart).Milliseconds()
		if r.gen.cfg.eventTime(r.next) > r.dueMs {
			return connector.Idle, nil
		}
	}
	r.gen.fill(r.next, e)
	r.next += r.step
	return connector.Record, nil
}

func (r *reader) Position() []byte { return binary.AppendUvarint(nil, uint64(r.next)) }

func (r *reader) Close() error { return nil }
