// Package snapshot owns the asynchronous half of a subtask's checkpoint:
// once the subtask has taken its snapshots at a barrier (synchronously,
// between records), an Acker writes them to storage, waits for whatever
// else must be durable first (the changelog up to the barrier), and sends
// the subtask's acknowledgement to the coordinator, all in the background
// while records flow again.
//
// Acknowledgements leave in barrier order, whatever order their uploads
// finish in: a subtask's sink transactions travel with its acks, and a
// later checkpoint completing before an earlier (aborted) one's ack
// arrived would leave that transaction out of its manifest, and a restore
// from it would abort output that precedes its barrier.
//
// Data enters as a manifest.Ack (filled in by the subtask) with the
// subtask's Parts and waits; the parts leave to a blob.Store, and the ack,
// with the parts' names, sizes and checksums (or the first error), leaves
// through the send function the runtime gives.
package snapshot
