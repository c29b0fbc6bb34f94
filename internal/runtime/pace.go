package runtime

import (
	"time"

	"github.com/eddyflow/eddy/internal/inbox"
	"github.com/eddyflow/eddy/internal/shuffle"
)

// inFlightTarget is how long a receiver aims to take, at most, to work
// through a full inbox: a checkpoint barrier queues behind everything in
// it, so this bounds how long a barrier waits at a slow operator. A
// receiver that handles a record in a microsecond keeps whole batches
// (BatchSize); one that needs hundreds (cold reads of Pebble state on
// disk, a slow external call) has its senders send smaller ones.
const inFlightTarget = 50 * time.Millisecond

// minPacedBatch is the least batch size a receiver asks for: below it the
// cost per batch (a channel hand-off, a state flush) dominates.
const minPacedBatch = 4

// pace measures how fast a receiver works through its records and sets
// its inbox's batch limit so that a full inbox (credits batches per input)
// holds about inFlightTarget of work. Flink calls this buffer debloating.
type pace struct {
	ib     *inbox.Inbox[shuffle.Msg]
	queued int // batches a full inbox holds
	max    int // the job's BatchSize
	// Since the last update: records handled and the time spent on them.
	recs int
	busy time.Duration
	// nsPerRecord is the smoothed cost of a record; 0 before the first
	// update.
	nsPerRecord float64
}

// Windows of measurement: an update once this many records or this much
// busy time were seen, whichever comes first.
const (
	paceRecords = 2048
	paceBusy    = 10 * time.Millisecond
)

func newPace(ib *inbox.Inbox[shuffle.Msg], batchSize int) *pace {
	return &pace{ib: ib, queued: ib.Inputs() * ib.Credits(), max: batchSize}
}

// observe counts a batch of n records that took busy to handle.
func (p *pace) observe(n int, busy time.Duration) {
	p.recs += n
	p.busy += busy
	if p.recs < paceRecords && p.busy < paceBusy {
		return
	}
	cost := float64(p.busy) / float64(max(p.recs, 1))
	p.recs, p.busy = 0, 0
	if p.nsPerRecord == 0 {
		p.nsPerRecord = cost
	} else {
		p.nsPerRecord = (p.nsPerRecord + cost) / 2
	}
	limit := p.max
	if p.nsPerRecord > 0 {
		limit = int(float64(inFlightTarget) / (p.nsPerRecord * float64(p.queued)))
	}
	limit = min(max(limit, minPacedBatch), p.max)
	if limit != p.ib.BatchLimit() {
		p.ib.SetBatchLimit(limit)
	}
}
