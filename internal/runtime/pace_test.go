package runtime

import (
	"testing"
	"time"

	"github.com/eddyflow/eddy/internal/inbox"
	"github.com/eddyflow/eddy/internal/shuffle"
)

// TestPaceBoundsInFlightWork: a receiver that works slowly lowers its
// inbox's batch limit so that a full inbox holds about inFlightTarget of
// its work; fast again, it gives senders whole batches back; the limit
// never leaves [minPacedBatch, BatchSize].
func TestPaceBoundsInFlightWork(t *testing.T) {
	ib := inbox.New[shuffle.Msg](2, 4) // a full inbox: 8 batches
	p := newPace(ib, 512)
	feed := func(perRecord time.Duration, batches, size int) {
		for range batches {
			p.observe(size, time.Duration(size)*perRecord)
		}
	}
	// 1 µs a record: 8 full batches are 4 ms of work; no limit below 512.
	feed(time.Microsecond, 20, 512)
	if got := ib.BatchLimit(); got != 512 {
		t.Fatalf("at 1 µs a record: batch limit %d, want 512", got)
	}
	// 400 µs a record (cold reads from disk): 50 ms is 125 records, 15
	// per batch of 8; the smoothing gets there within a few updates.
	feed(400*time.Microsecond, 200, 20)
	if got := ib.BatchLimit(); got < 14 || got > 16 {
		t.Fatalf("at 400 µs a record: batch limit %d, want about 15", got)
	}
	queued := time.Duration(ib.BatchLimit()*ib.Inputs()*ib.Credits()) * 400 * time.Microsecond
	if queued > 2*inFlightTarget {
		t.Fatalf("a full inbox holds %v of work, want about %v", queued, inFlightTarget)
	}
	// 20 ms a record: the floor.
	feed(20*time.Millisecond, 20, 4)
	if got := ib.BatchLimit(); got != minPacedBatch {
		t.Fatalf("at 20 ms a record: batch limit %d, want %d", got, minPacedBatch)
	}
	// Fast again.
	feed(time.Microsecond, 100, 512)
	if got := ib.BatchLimit(); got != 512 {
		t.Fatalf("fast again: batch limit %d, want 512", got)
	}
}
