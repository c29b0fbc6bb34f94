// Package pebble is the Pebble state backend: keyed state larger than
// memory, on one github.com/cockroachdb/pebble/v2 database per keyed
// subtask, with incremental checkpoints to a blob.Store.
//
// It owns the local databases (DB), the memory they share (Pool: one block
// cache for the process and the memtable budget, set with the one knob
// Memory), the key layout, the checkpoint file lists (Checkpoint, File),
// and restores from them at any parallelism. It does not own the state
// types: a state.Backend built with state.NewStoreBackend on a DB keeps the
// Value, Reducing, List and Map API and caches the decoded values of the
// keys of recent batches in its heap tables.
//
// How data enters: the runtime sets the current key and the operator's
// state calls read the backend's cache, which loads a missing key from the
// DB (a point read for Value and Reducing, a prefix scan for List and Map),
// and writes into it; element writes (Map.Put, Map.Delete, List.Add) and
// clears go to the DB's pending batch as they happen and are committed by
// Backend.EndBatch, which the runtime calls after every batch of records
// (there is no write-ahead log: durability comes from checkpoints and, with
// the changelog backend, from the DSTL). Whole values stay decoded in the
// backend's cache, sized in bytes (Pool.ValueCacheBytes), and reach the DB
// at Backend.Flush, before a checkpoint or materialization, or when
// EndBatch evicts key groups from a full cache (write-back). Timers
// are a List state of the runtime and live in the same DB.
//
// How data leaves: at a checkpoint, between two batches, DB.TakeCheckpoint
// flushes the memtables and hard-links the DB's files into a directory next
// to it; LocalCheckpoint.Upload (which may run concurrently with further
// writes) uploads the SSTs that the previous checkpoint does not list, under
// names carrying the run's token, four at a time, and the small files of
// every checkpoint as one bundle object, and returns the Checkpoint to
// record in the manifest. A restore downloads four objects at a time. With the
// changelog state backend, a materialization is a checkpoint of the DB
// that does not wait for the flush: DB.TakeCheckpointAsync only starts it
// between two batches and takes the checkpoint later, on another goroutine
// (it may then hold later writes, which the log replays anyway), and
// LocalCheckpoint.Objects names what its upload may write, for the
// checkpoints in between to keep. Unreferenced tells
// retention which objects the dropped checkpoints free. Pool.Restore
// downloads a checkpoint's files, verifying each one's size and CRC-32C
// (or takes intact local copies of them from the directories
// Pool.SetLocalCopies names: local recovery), and opens them; at another parallelism it opens the part that overlaps
// most, deletes its foreign key groups with range deletions and copies the
// other parts' key groups in. Health reports L0 sublevels, compaction debt,
// cache hits and disk usage. A Checkpoint may be narrowed to some of its
// key groups (OwnStart, OwnEnd): the changelog lists a DB restored at
// another parallelism so until its next materialization, and a restore
// then takes only those key groups from it, cutting the others; a
// Checkpoint without files stands for key groups that start empty.
//
// Memory: Memory is the one knob; half of it holds the backends' decoded
// values, a quarter sizes the memtables of the pool's DBs, half is the
// block cache, and Pebble charges every
// memtable it allocates (the one filling, those flushing, flushed ones an
// iterator still reads and one kept for reuse: usually at most four per
// DB, half of Memory for the pool) to that cache with Cache.Reserve, so
// the cache and the memtables together stay within half of Memory while
// the memtables fit in it. Built with cgo they are C allocations
// that GOMEMLIMIT does not see (set GOMEMLIMIT to the process's target
// minus Memory); built without cgo they are Go heap that it counts (set it
// to at least Memory plus the job's own heap). See Memory.
//
// Reads: a key missing from the backend's cache costs a point read
// (SeekPrefixGE on an iterator kept until the next Commit, so the reads of
// one record batch share its per-file iterators); every level has bloom
// filters, so the L0 files a read passes over cost a filter probe each.
// The read iterators are closed on a goroutine of their own: closing the last one
// of an old version of the DB evicts replaced files from the block cache,
// which would otherwise hold up the records.
//
// Failures: a local directory that is full, deleted or damaged fails the
// DB with a *DirError naming the directory, what failed and the cause
// (errors.Is sees syscall.ENOSPC, fs.ErrNotExist); the backend returns it
// from EndBatch and Flush, the runtime fails the attempt with the operator
// and subtask ("eddy: probe subtask 1: pebble: state directory DIR: ...")
// and restarts it from the last checkpoint into new directories. A DB
// fails for good with the first such error (DB.Err): every later read,
// write, flush and checkpoint returns it, so no state, and no empty
// state, is read from the directory again, even once the disk has room.
// What fails it: a background flush or compaction (Pebble's
// EventListener.BackgroundError), a damaged block (DataCorruption, found
// by Pebble's block checksums), a read or write of the DB, the directory
// missing before a flush (Pebble would retry that flush for ever), and
// what Pebble holds fatal: a MANIFEST write that fails on a full disk
// calls its Logger's Fatalf, which here records the failure instead of
// ending the process, and Pebble returns the error as well. Pebble
// retries a failed flush at once and for ever, and a write that waits for
// a flush (full memtables, a full L0, an ingest overlapping a memtable)
// would wait for ever: such writes run on a writer goroutine of the DB,
// and the caller returns the failure as soon as it happens. Close then
// abandons a DB whose write still waits (Pebble's Close would wait for
// it): its pool slot is freed, its file operations block from then on,
// which stops Pebble's retries, and its memtables and goroutines stay
// until the process ends. A checkpoint file that downloads with another
// size or checksum than recorded fails the restore with a
// *CorruptFileError naming the file.
//
// The formats are described in docs/pebble.md.
//
// The runtime (internal/runtime/pebble.go, eddy.Pebble) uses it so: one
// Pool per Run; a keyed subtask opens its DB (or Pool.Restore with the
// operator's Pebble parts of the restored checkpoint), builds its backend
// with state.NewStoreBackend and Pool.ValueCacheBytes, calls
// Backend.EndBatch after each batch (failing the task on an error), and at
// a barrier Backend.Flush and DB.TakeCheckpoint, then
// Upload in the background, after the subtask's previous upload, with Prev
// = that upload (DB.Restored after a restore); the manifest's part lists the
// returned files, next to a blob with the backend's state header (key and
// value schemas, watermark: state.Backend.AppendHeader). With the
// changelog, the barrier takes no DB checkpoint: the changelog's
// materializations do (internal/runtime Keyed.takeStore). Retention needs no
// Unreferenced there: every manifest lists the objects it uses, and the
// checkpoint storage deletes what no retained manifest lists.
package pebble
