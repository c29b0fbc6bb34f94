// Package coord owns the checkpoint coordinator of one task: the part of a
// job whose sources it triggers and whose acknowledgements it collects
// (today the whole job; the scale-out issue runs one per source split).
//
// It decides when a checkpoint starts (on the interval's ticks, and the
// final one once every source has finished), which acknowledgements
// complete it, when it has timed out or failed, how many failures in a row
// are tolerated, and which sinks' transactions wait for a later checkpoint
// because theirs was aborted. It does no I/O.
//
// Data enters as Acks and source-finished signals on channels given to
// Run; it leaves through the Task interface: Trigger to inject barriers,
// Complete to write a checkpoint whose acknowledgements have all arrived
// and commit its transactions.
package coord
