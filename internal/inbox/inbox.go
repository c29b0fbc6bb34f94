package inbox

import (
	"math"
	"sync/atomic"
)

// Envelope is a message with the input it came from.
type Envelope[M any] struct {
	From int
	Msg  M
}

// Inbox is the queue of one receiving subtask.
type Inbox[M any] struct {
	ch      chan Envelope[M]
	credits []chan struct{}
	limit   atomic.Int32 // records per message senders aim at (BatchLimit)
}

// New returns the inbox of a subtask with inputs inputs, each allowed
// credits unreleased messages.
func New[M any](inputs, credits int) *Inbox[M] {
	in := &Inbox[M]{ch: make(chan Envelope[M], inputs*credits), credits: make([]chan struct{}, inputs)}
	for i := range in.credits {
		in.credits[i] = make(chan struct{}, credits)
	}
	in.limit.Store(math.MaxInt32)
	return in
}

// BatchLimit is the most records a sender should put in one message to
// this inbox: the receiver lowers it while it drains slowly, so that a
// full inbox holds about as much time of its work as it aims at (see
// SetBatchLimit). It is math.MaxInt32 until set.
func (in *Inbox[M]) BatchLimit() int { return int(in.limit.Load()) }

// SetBatchLimit sets BatchLimit to n (at least 1). The receiver calls it;
// senders see it at their next record.
func (in *Inbox[M]) SetBatchLimit(n int) { in.limit.Store(int32(min(max(n, 1), math.MaxInt32))) }

// Credits is the number of messages each input may have unreleased.
func (in *Inbox[M]) Credits() int { return cap(in.credits[0]) }

// Send delivers m from input i, waiting while input i has all its credits
// out. It returns false, without sending, once done is closed.
func (in *Inbox[M]) Send(done <-chan struct{}, i int, m M) bool {
	select {
	case in.credits[i] <- struct{}{}:
	case <-done:
		return false
	}
	// The queue holds every input's credits, so this never waits.
	in.ch <- Envelope[M]{From: i, Msg: m}
	return true
}

// TrySend delivers m from input i if the input has a credit left, without
// waiting; it reports whether it did. A sender tries it first to tell a
// wait for credits (backpressure) from none.
func (in *Inbox[M]) TrySend(i int, m M) bool {
	select {
	case in.credits[i] <- struct{}{}:
	default:
		return false
	}
	in.ch <- Envelope[M]{From: i, Msg: m}
	return true
}

// C is where the receiver takes messages from.
func (in *Inbox[M]) C() <-chan Envelope[M] { return in.ch }

// Release gives input i back the credit of one message the receiver took
// from C and has handled (not merely held).
func (in *Inbox[M]) Release(i int) { <-in.credits[i] }

// Inputs is the number of inputs.
func (in *Inbox[M]) Inputs() int { return len(in.credits) }
