// Package kafka connects Eddy jobs to Apache Kafka with franz-go: a
// replayable source whose positions live in Eddy's checkpoints, and a sink
// that writes exactly once with Kafka transactions.
//
// # Source
//
//	src := kafka.Source[Order](kafka.Brokers("localhost:9092"), kafka.Topics("orders"))
//	orders := eddy.FromSource(env, src)
//
// Splits are partitions: split s reads partition s / len(topics) of topic
// s % len(topics), and there are MaxPartitions (default 64) splits per topic,
// so the split count does not depend on the broker and stays fixed between
// runs. A split whose partition does not exist yet is idle; the source checks
// the topics' metadata every few seconds (MetadataInterval) and starts reading
// a partition once it appears, from its first offset. A topic with more
// partitions than MaxPartitions fails the job with an error that says so.
//
// A split's position (stored in checkpoints) is the next offset to read. A
// split without one — the first run — starts where StartEarliest (default),
// StartLatest, StartAt or StartCommitted says; the start is resolved to a
// concrete offset when the split opens, so a checkpoint taken before the
// first record already pins it. Records are read with read_committed
// isolation: aborted transactions are never seen, and open ones hold back
// the records behind them. Bounded makes the source end at the offsets that
// were the partitions' ends when the job first opened them.
//
// Values are decoded by a Decoder: Values (serde protobuf, the default) or
// JSONValues, or any function. A record that does not decode fails the job
// with an error naming its topic, partition and offset, unless DeadLetter or
// DeadLetterTopic routes it elsewhere; a record is never dropped silently.
// Records that carry the schema-fingerprint header (see SchemaHeader) are
// checked before decoding: a fingerprint that is neither the reader's own
// nor one of a known compatible schema (see Values) is rejected like a record
// that does not decode.
//
// # Sink
//
//	eddy.ToSink(totals, kafka.Sink[Total]("totals", kafka.Brokers("localhost:9092"),
//		kafka.Key(func(t *Total) []byte { return []byte(t.Driver) })))
//
// The default guarantee is ExactlyOnce, with a write-ahead design that does
// not need to resume another process's Kafka transaction (which franz-go, like
// most clients, cannot do):
//
//   - A writer buffers the encoded records of the current checkpoint epoch in
//     memory, up to MaxBufferedBytes (default 64 MiB; more fails the job with
//     an error that says to checkpoint more often or raise the limit).
//   - At the checkpoint barrier, PreCommit hands the epoch's records to the
//     runtime as the transaction handle; the runtime stores it in the
//     checkpoint's manifest, so the records are durable exactly when the
//     checkpoint is. This suits modest volumes per checkpoint: the manifest
//     holds every record of the epoch.
//   - Once the checkpoint is complete, Commit produces each epoch's records in
//     one Kafka transaction, with the transactional id "eddy-<name>-<subtask>"
//     (see SinkName), and in the same transaction commits a marker: the
//     offset of consumer group "eddy-<name>-<subtask>" on partition 0 of the
//     topic is set to the checkpoint id, with the run's lineage as metadata.
//     Commit and Recover skip a handle whose marker is already there, so a
//     handle committed before a crash is not written twice. After each
//     commit the marker is read back (stable offsets required): franz-go
//     v1.22.3 can turn a commit into an abort and still report success, so
//     a marker that did not move means the records are not visible, and the
//     transaction is produced again on a fresh producer; after 3 such aborts
//     Commit fails naming the checkpoint. This costs one OffsetFetch per
//     subtask and checkpoint.
//   - Each subtask's transactional producer is initialised when its writer
//     opens, and Recover initialises those of every subtask the restored
//     handles name (up to their parallelism). Initialising fences every older
//     producer with the same transactional id (a zombie's next produce or
//     commit fails with ProducerFenced) and aborts any transaction a killed
//     process left open, so no transaction lingers and read_committed readers
//     are not held back. Only a subtask beyond both the current parallelism
//     and that of the restored handles (a job restarted with fewer subtasks
//     from an older checkpoint) is left to the broker, which aborts its
//     transaction after TransactionTimeout.
//
// Markers are consumer-group offsets, so the brokers' offsets.retention.minutes
// (7 days by default) applies: a job stopped for longer than that loses its
// markers, and on restart commits its restored checkpoint's output again
// (only that checkpoint's, once). Raise the retention for jobs that may stay
// down longer.
//
// The lineage is a random id chosen when a job starts without a checkpoint
// holding handles of this sink, and carried on in handles. It keeps a job
// started afresh (new checkpoint storage, ids from 1 again) from mistaking
// the markers of an earlier run for its own.
//
// Kafka transactions only ever exist inside Commit, which runs after the
// checkpoint is complete: a crash leaves at most one transaction per subtask
// open, that of the handle being committed, and the handle is in the
// checkpoint that the next run restores.
//
// AtLeastOnce produces records as they come and flushes at every checkpoint
// barrier; None produces without waiting for anything (Close still flushes).
//
// Sinks writing the same topic need distinct names (SinkName); so do jobs
// sharing a Kafka cluster, since the name determines the transactional ids.
//
// # Errors
//
// Brokers that cannot be reached fail the job after ConnectTimeout (default
// 10 s) with the addresses and the last dial error; a missing topic fails it
// with the topic's name; authorization failures name the resource (topic,
// group or transactional id) that was refused.
package kafka
