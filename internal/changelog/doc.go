// Package changelog is the glue of the changelog state backend for one
// keyed operator subtask (Operator): every change its state.Backend makes
// is appended to the operator's dstl.Writer (Attach), the state is
// materialized in the background a few key groups per step (Step, between
// records, or after Due while no record comes), each part uploaded with
// hedging, and a checkpoint at a barrier is the last materialized base plus
// the log range since it (Checkpoint), which it adds to the subtask's
// manifest.Ack once the log is durable up to the barrier. For a backend
// whose state lives in a store (Pebble), a materialization is instead a
// checkpoint of the store (Env.TakeStore, StoreSnapshot): started between
// two batches, taken and uploaded in the background, one at a time; until
// one completes after a restore, the restored parts are carried narrowed
// to the subtask's key groups, each with the key groups its database held.
//
// When a materialization starts is a pure decision (shouldStart): the
// interval, or early when the log since the base makes a checkpoint carry
// more redundant bytes than Config.LogRatio of the live state (logHeavy),
// at most every Config.MinInterval, and a second one only while the newest
// waits for its uploads. A materialization that finished becomes the base
// and drops the older ones (finishMaterializations); three failures in a
// row fail the job.
//
// Data enters through the backend's change hook and Step; it leaves as
// parts written to Env.Store, as log objects written by the dstl.Writer,
// and as the checkpoint.StatePart and checkpoint.LogPart entries that
// Checkpoint adds to the acknowledgement. The runtime supplies the job's
// side in Env: where parts go and how they are named, the attempt's wait
// group, the log, and its counters.
package changelog
