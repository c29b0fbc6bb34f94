// Package manifest owns what a checkpoint's manifest holds: Assemble turns
// the acknowledgements of every subtask of a checkpoint, and the sink
// transactions pre-committed so far, into the checkpoint.Manifest the
// coordinator writes and the transactions that commit once it is written.
// It is a pure function: the coordinator does the I/O around it, so what a
// manifest holds is unit-tested without running a job.
//
// Data enters as Acks (one per subtask: its source positions, state parts,
// log ranges and watermarks per operator, its sink transactions) and leaves
// as a Result. Nothing here depends on how many sources a job has: the same
// assembly serves one checkpoint of a whole job or, later, of one task.
package manifest
