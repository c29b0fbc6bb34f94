package nexmarkq

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/discard"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/connector/nexmark"
)

// MaxOutOfOrderness is how far the watermark trails the largest event time
// seen: the reference DDL's WATERMARK FOR dateTime AS dateTime - 4 s.
const MaxOutOfOrderness = 4 * time.Second

// Query is one Nexmark query.
type Query struct {
	// Name is the reference's name: "q0" to "q12".
	Name string
	// Updating says the query writes eddy.Change rows (+I, -U, +U, -D)
	// whose fold is its result table, not plain rows.
	Updating bool
	// Build adds the query to env: src read with event time, and the
	// result written as JSON lines into dir (exactly once), or discarded
	// if dir is "".
	Build func(env *eddy.Env, src *nexmark.Source, dir string)
}

// All lists the queries in the reference's order.
var All = []Query{
	{Name: "q0", Build: buildQ0},
	{Name: "q1", Build: buildQ1},
	{Name: "q2", Build: buildQ2},
	{Name: "q3", Build: buildQ3},
	{Name: "q4", Updating: true, Build: buildQ4},
	{Name: "q5", Build: buildQ5},
	{Name: "q6", Updating: true, Build: buildQ6},
	{Name: "q7", Build: buildQ7},
	{Name: "q8", Build: buildQ8},
	{Name: "q9", Build: buildQ9},
	{Name: "q10", Build: buildQ10},
	{Name: "q11", Build: buildQ11},
	{Name: "q12", Build: buildQ12},
}

// Lookup returns the queries a comma-separated list names ("q0,q5"), or
// all of them for "all", in the order given.
func Lookup(list string) ([]Query, error) {
	if list == "all" {
		return All, nil
	}
	var qs []Query
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, q := range All {
			if q.Name == name {
				qs, found = append(qs, q), true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown query %q (known: q0 to q12, or all)", name)
		}
	}
	return qs, nil
}

// EventTime is an event's dateTime: the reference DDL's computed column.
func EventTime(e *nexmark.Event) time.Time {
	switch {
	case e.Person != nil:
		return time.UnixMilli(e.Person.DateTime)
	case e.Auction != nil:
		return time.UnixMilli(e.Auction.DateTime)
	case e.Bid != nil:
		return time.UnixMilli(e.Bid.DateTime)
	}
	return time.Time{}
}

// events is the source table: src with event time and watermarks. Its
// readers reuse one Event (eddy.ReuseRecords, as the reference runs Flink
// with pipeline.object-reuse): the views below copy the record they emit.
func events(env *eddy.Env, src *nexmark.Source) *eddy.Stream[nexmark.Event] {
	return eddy.FromSource(env, src, eddy.UID("nexmark"), eddy.Watermarks(EventTime, MaxOutOfOrderness), eddy.ReuseRecords())
}

// persons, auctions and bids are the reference's views of the source table.
func persons(s *eddy.Stream[nexmark.Event]) *eddy.Stream[nexmark.Person] {
	return eddy.FlatMap(s, func(e *nexmark.Event, emit func(nexmark.Person)) error {
		if e.Person != nil {
			emit(*e.Person)
		}
		return nil
	})
}

func auctions(s *eddy.Stream[nexmark.Event]) *eddy.Stream[nexmark.Auction] {
	return eddy.FlatMap(s, func(e *nexmark.Event, emit func(nexmark.Auction)) error {
		if e.Auction != nil {
			emit(*e.Auction)
		}
		return nil
	})
}

func bids(s *eddy.Stream[nexmark.Event]) *eddy.Stream[nexmark.Bid] {
	return bidColumns(s, func(b *nexmark.Bid) nexmark.Bid { return *b })
}

// bidColumns is the bids view with only the columns a query reads, which
// cols picks from each bid: the projection the reference's SQL planner
// pushes into the view, so that the query does not copy, shuffle and keep
// whole bids (with their strings) to use one or two of their fields.
func bidColumns[T any](s *eddy.Stream[nexmark.Event], cols func(*nexmark.Bid) T) *eddy.Stream[T] {
	return eddy.FlatMap(s, func(e *nexmark.Event, emit func(T)) error {
		if e.Bid != nil {
			emit(cols(e.Bid))
		}
		return nil
	})
}

// personColumns and auctionColumns are bidColumns for the other views.
func personColumns[T any](s *eddy.Stream[nexmark.Event], cols func(*nexmark.Person) T) *eddy.Stream[T] {
	return eddy.FlatMap(s, func(e *nexmark.Event, emit func(T)) error {
		if e.Person != nil {
			emit(cols(e.Person))
		}
		return nil
	})
}

func auctionColumns[T any](s *eddy.Stream[nexmark.Event], cols func(*nexmark.Auction) T) *eddy.Stream[T] {
	return eddy.FlatMap(s, func(e *nexmark.Event, emit func(T)) error {
		if e.Auction != nil {
			emit(cols(e.Auction))
		}
		return nil
	})
}

// sink writes s into dir as JSON lines, or discards it if dir is "".
func sink[T any](s *eddy.Stream[T], dir string) {
	if dir == "" {
		eddy.ToSink(s, discard.Sink[T](), eddy.UID("sink"))
		return
	}
	eddy.ToSink(s, file.JSONLines[T](dir), eddy.UID("sink"))
}

// Dir is where `eddy nexmark run --out root` writes query q's output.
func Dir(root, q string) string { return filepath.Join(root, q) }

// ms is t in epoch milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }
