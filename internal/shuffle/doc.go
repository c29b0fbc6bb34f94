// Package shuffle owns the hand-off of records between the stages of a job:
// what travels from a subtask to the subtasks of the next stage (Msg: a
// batch of records, or a barrier, end of data, termination or idleness),
// the keyed batch (records with their keys, key groups, event times and the
// watermarks among them), the recycling of batches per edge (Pool), and the
// Writer that partitions a stage's records by key group over the next
// stage's subtasks.
//
// Records enter at Writer.Push (from the sending stage's operator chain) and
// leave, batched, through a Sender into the receiving subtask's inbox
// (internal/inbox); the receiver hands each batch to Deliver, which calls
// the receiving stage's KeyedPush per record and a mark function per
// watermark, in the order they were sent, and recycles the batch.
// Watermarks ride inside the batches (Mark), so they neither are messages of
// their own nor force partial batches out.
package shuffle
