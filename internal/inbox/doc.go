// Package inbox owns the hand-off of messages into a receiving subtask: one
// queue per subtask that all its inputs send into, so the receive loop waits
// on one channel whatever the number of inputs (no reflect.Select, no
// allocation per message), with credit-based backpressure per input: an
// input may have at most Credits messages that the receiver has not yet
// released. An input held at a checkpoint barrier therefore stops at its
// credits while the others flow, as if it had a bounded channel of its own.
// The receiver also sets a batch limit that senders honour, so that what a
// full inbox holds stays a bounded time of its work however slow that work
// gets (a barrier queues behind all of it).
//
// Data enters through Send (by an upstream subtask) and leaves through C
// (to the receive loop), which calls Release once it has handled a message.
package inbox
