// Package dstl is Eddy's durable short-term log (DSTL): the log of state
// changes behind the changelog state backend. Operators write each state
// change twice, to their state backend and to the DSTL; a checkpoint then
// only has to make the changes since the last materialization durable,
// which takes about as long as one small upload, however large the state.
//
// # Shape
//
// A process has one Log, shared by all its stateful subtasks. Each subtask
// has a Writer (named stably, e.g. "distance-3") that appends changes —
// key group, state id, key, an operation (put or delete the key's value,
// or put or delete one element of it: a map entry, a list slot) with the
// element's key and the value — each with the writer's next sequence
// number. Element operations keep a write to a large collection as small
// as the element; every operation sets or removes, so applying a change
// twice is harmless. The Log batches the changes of all writers and
// seals a batch at a checkpoint barrier, once every writer holding
// changes has called Cut (or PersistDelay after the first Cut); early only
// when FlushBytes are queued (or one writer holds WriterFlushBytes), and
// on a timer only if FlushInterval is
// set. See "Objects and requests per checkpoint". A Persist
// call is a checkpoint boundary: it ends the current batch at once, waits
// for every change of the writer after a given sequence number (the last
// materialization) to be uploaded, and returns a Handle naming the objects
// holding them. The checkpoint stores the Handle; recovery is the
// materialized snapshot plus Read, which replays the handles' changes. A
// subtask that must not wait at its barrier calls Cut there (ending its
// share of the batch at the barrier; the batch ends when every writer's
// has) and PersistUpto in the background while it keeps appending. A restored subtask continues its numbering with WriterFrom.
//
// # Mapping to Flink's DSTL (FLIP-158, Flink 1.15)
//
//   - Per-process batching: Flink's changelog storage batches the changes of
//     all tasks of a TaskManager into one file per upload to avoid the small
//     file problem; so does Log, with the same triggers (persist at
//     checkpoint, gathered over PersistDelay, and size thresholds). Like
//     Flink, Log uploads nothing on a timer unless FlushInterval is set.
//   - Long-tail latency: Flink retries a write not done within a timeout
//     (default 1s). Log hedges instead of abandoning: after UploadTimeout a
//     second attempt under another name ("-h1") runs in parallel with the
//     first; the first to succeed wins, the others are cancelled and their
//     objects deleted, also if they finish later. The hedge starts sooner
//     when the store is faster than that: after HedgeAfterP90 (3) times
//     the 90th percentile of recent attempts, at least 50ms, so the
//     checkpoint tail follows the store's own tail rather than a fixed
//     second. Failed attempts are retried with backoff; MaxAttempts bounds
//     hedges and retries together.
//     A batch whose attempts all failed fails the log: Persist and Append
//     return a *BatchError, and the job fails over to its last checkpoint.
//   - Backpressure: like Flink's in-flight data limit, Append blocks while
//     more than MaxInFlight bytes are queued or uploading; it never fails
//     for it.
//   - Truncation: Flink deletes changelog files once a materialization
//     covers them and no checkpoint uses them. Here the runtime names
//     objects "checkpoints/<id>/dstl-<run>-<n>" (Options.ObjectName), so the
//     checkpoint garbage collection truncates the log: Storage.Complete(m)
//     deletes every object under "checkpoints/<id>/" with id <= m.ID that no
//     retained manifest lists in Files. The checkpoint lists its handles'
//     objects in its Files, so an object lives as long as a retained
//     checkpoint needs it; objects of aborted checkpoints, losing hedges
//     whose deletion failed, and failed attempts are collected the same
//     way. Two rules make this safe: the id in a batch's name must be one
//     that no checkpoint can complete with before the batch is referenced —
//     the id of the next checkpoint to be triggered (a batch sealed while
//     checkpoint N is in flight may hold changes from after N's barrier,
//     which only N+1 references) — and names must be unique across runs and
//     processes (hence the run token), because a Put replaces an object.
//   - Local recovery (Flink 1.16): with LocalDir set, every uploaded object
//     is also written to local disk; Read with ReadOptions.LocalDir reads
//     the local copy first and falls back to the store when it is missing or
//     fails its checksum. Local copies are deleted when no writer tracks
//     their batch any more; PruneLocal clears those of earlier runs after a
//     restore.
//   - Truncation in memory: a writer tracks its sealed batches to build
//     handles. Flink truncates the writer when a materialization is
//     confirmed; here Persist does it implicitly, one materialization point
//     late: when a Persist brings a larger after, the batches that only the
//     point before the previous one needed are forgotten. So the
//     checkpoints of the previous point can still persist (out of order)
//     and restore from local copies.
//
// # Objects and requests per checkpoint
//
// An object store bills requests and draws each one's latency from its
// tail, and a checkpoint waits for all of its log's objects, so the log
// aims at one object per process per checkpoint interval. An interval
// that logs less than the size threshold FlushBytes (15 MiB, the most
// blob/s3 uploads with one PUT under its default multipart threshold of
// 16 MiB) is one PUT. On a store that builds objects from parts
// (blob.Parter: S3's multipart upload), the batches a larger interval
// seals early are frames of the interval's one object: they go up as
// its parts as soon as they add up to the store's least part size (5 MiB
// on S3), and the batch the barrier seals uploads the rest as the last
// part. The checkpoint is durable once that part is up: S3 keeps uploaded
// parts durably, and only the completion (the request that makes the
// object visible, which a server may make as slow as copying the object:
// versitygw does) is missing. So the barrier waits for one request, the
// last part, and the log completes the object in the background: one
// request for the create, one per part, one for the completion, off the
// checkpoint's path. The handles naming such an object carry its upload
// (Handle.Uploads: the upload id, the part count and the object's size),
// which checkpoints store; a reader that finds the object missing
// completes the upload itself (blob.Parter.CompleteParts; on S3 ListParts
// gives the parts' ETags) and reads it, the object's checksum verifying
// the bytes; an upload already completed is fine, and one gone while its
// object is not there yet is being completed elsewhere, which the reader
// waits for (up to 30 s). The writer retries a failed completion
// (MaxAttempts, with backoff); if all attempts fail, the log fails with a
// *BatchError, and the job's restore completes the upload. Close waits for
// a completion in progress but does not retry one that fails then: that
// upload is left to a reader. A Persist that needs an early batch while no
// barrier batch comes (a writer cutting with nothing new) ends the object
// itself; after 64 batches without a barrier the 64th ends it. With
// Options.NoParts (or on a store without parts, such as a directory),
// FlushBytes splits an interval's log into ceil(bytes / FlushBytes)
// objects of one PUT each instead (see BENCHMARKS.md, "One log object per
// checkpoint interval on S3", for the measured trade).
//
// Retention sees an object only once it is complete: a pruned checkpoint's
// object whose completion comes later is deleted by the next prune (it is
// named for a checkpoint id at most the pruned one's, and no retained
// manifest lists it), so at most the last prune of a job leaves one
// behind, for the next run's first prune. An upload neither completed nor
// aborted (its writer died and no restore read it) is invisible but costs
// storage: give the bucket a lifecycle rule that aborts
// incomplete multipart uploads after a day. The Append that crosses the
// threshold seals the batch itself, so a batch exceeds FlushBytes by at
// most that change (and the encoding's sequence numbers, about a byte per
// change), however late a busy machine runs the log's goroutines. Memory
// stays bounded by MaxInFlight (100 MB): Appends wait while that many
// bytes are queued or uploading.
//
// # Beyond Flink: last change per key within a batch
//
// Within one batch the log uploads only the last change per (writer,
// state, key) — per (writer, state, key, element) for element operations;
// earlier ones are dropped (Metrics.DroppedChanges). This is
// safe because a checkpoint boundary always ends a batch: no checkpoint
// can reference a state between two changes of one batch. Replaying a
// batch thus gives the state at its end, which is all recovery needs. It
// also holds for a materialization point inside a batch: the snapshot at
// sequence number m plus the batch's kept changes after m gives the
// batch's final state, because a kept change after m supersedes every
// dropped one.
//
// # Object format
//
// A 20-byte header (magic "DSTL", version, compression flag, stored and
// raw body length, CRC-32C over header and body) is followed by the body,
// zstd-compressed if Options.Compression: a writer table, each writer's
// name followed by its changes in sequence order, every field an unsigned
// varint or a length-prefixed byte string and sequence numbers
// delta-coded. See DecodeObject and the comment on the format in
// format.go. The blob store checksums objects too; the log's own checksum
// catches torn local copies, which are written without the store.
// DecodeObject never panics on any input (FuzzDecodeObject).
//
// # Concurrency
//
// Log is safe for concurrent use. A Writer's Append and Cut belong to its
// subtask's goroutine; PersistUpto may run in the background. Appends of
// different writers do not contend: each writer fills its own buffers (64
// KB chunks and blocks of entries, recycled through the log, so a steady
// Append allocates nothing), and the log takes them all when it seals a
// batch; Appends pause only while a seal swaps the buffers. Encoding,
// compression and uploads run in their own goroutines. Read applies key
// groups in parallel: its apply callback is called concurrently for
// different key groups.
package dstl
