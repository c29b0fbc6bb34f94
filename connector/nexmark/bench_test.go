package nexmark

import (
	"testing"

	"github.com/eddyflow/eddy/connector"
)

func benchRead(b *testing.B, reuse bool) {
	src := mustNew(b, Splits(1))
	r, err := src.OpenSplit(ctx, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	var e Event
	b.ReportAllocs()
	for b.Loop() {
		if !reuse {
			e = Event{} // as the runtime does: records go downstream
		}
		if st, _ := r.Next(&e); st != connector.Record {
			b.Fatal(st)
		}
	}
}

// BenchmarkNext generates events into one reused record (as `eddy nexmark
// gen` does): no allocation for bids, one for a person or an auction.
func BenchmarkNext(b *testing.B) { benchRead(b, true) }

// BenchmarkNextFresh generates into a zeroed record each time, as Eddy's
// source loop calls it without eddy.ReuseRecords: the record's Person,
// Auction or Bid is new, carved from a chunk (connector.Slab).
func BenchmarkNextFresh(b *testing.B) { benchRead(b, false) }

// BenchmarkNextJSON generates events and appends them as JSON lines into a
// reused buffer: the work of `eddy nexmark gen` without the file.
func BenchmarkNextJSON(b *testing.B) {
	src := mustNew(b, Splits(1))
	r, err := src.OpenSplit(ctx, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	var e Event
	var buf []byte
	var bytes int64
	b.ReportAllocs()
	for b.Loop() {
		r.Next(&e)
		buf = append(e.AppendJSON(buf[:0]), '\n')
		bytes += int64(len(buf))
	}
	b.SetBytes(bytes / int64(b.N))
}
