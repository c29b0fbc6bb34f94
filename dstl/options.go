package dstl

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"time"
)

// Options configure a Log. Zero fields take the defaults documented on
// each field.
type Options struct {
	// FlushInterval, if set, is how long a change may wait in the current
	// batch: the batch is uploaded once this much time has passed since
	// its first change was queued, whether or not a checkpoint barrier
	// came. By default there is no timer, as in Flink's DSTL: a batch ends
	// at a barrier (Cut, Persist) or at a size threshold, so a process
	// uploads one object per checkpoint interval, however long the
	// interval, unless its log outgrows FlushBytes. A timer shorter than
	// the interval splits each interval's log into more objects, each a
	// request and one more draw from the store's latency tail that the
	// checkpoint waits for; what it buys is less to upload at the barrier.
	FlushInterval time.Duration
	// PersistDelay is how long a Cut (a checkpoint barrier) waits for
	// the other writers' Cuts of the same checkpoint before its batch is
	// sealed: the batch ends once every writer holding unsealed changes
	// has cut, or PersistDelay after the first Cut, so the subtasks of a
	// process reaching one barrier share one object (Flink's
	// dstl.dfs.batch.persist-delay). Default 10ms; negative seals at
	// every Cut.
	PersistDelay time.Duration
	// FlushBytes uploads the current batch early, before the barrier that
	// would end it, once this many bytes of changes are queued in it, over
	// all writers; the Append that crosses the threshold seals the batch,
	// so a batch exceeds it by at most that change. On a store that builds
	// objects from parts (S3) an early batch is a part of the interval's
	// one object when Parts is set; otherwise it is an object of its own.
	// Default 15 MiB: the most one request uploads to S3 through blob/s3
	// with its default multipart threshold (16 MiB, less the object's
	// header, trailer and the change that crossed), so an interval that
	// logs less is one PUT. Lower it for a store slow per byte, to upload
	// more of an interval's log before its barrier.
	FlushBytes int
	// WriterFlushBytes uploads the current batch early once one writer
	// holds this many bytes of it. Default FlushBytes: one busy subtask
	// may fill the batch alone. (A lower per-writer threshold splits the
	// barrier's object whenever one subtask logs most of the interval.)
	WriterFlushBytes int
	// MaxInFlight bounds the bytes queued or uploading; Append blocks
	// (backpressure) while more than this many are, and never fails for
	// it. Memory for the log is bounded by it, whatever the thresholds:
	// the default holds the batch being filled and five full ones
	// uploading. Default 100 MB, at most 512 MB.
	MaxInFlight int
	// UploadTimeout is how long an upload attempt may take before a second
	// attempt starts in parallel (a hedged request). The first attempt to
	// succeed wins; the others are cancelled and their objects deleted.
	// Default 1s.
	UploadTimeout time.Duration
	// HedgeAfterP90 hedges sooner than UploadTimeout when the store is
	// faster: once an attempt has run this many times the 90th percentile
	// of the last 64 successful attempts (after 16 of them, and never
	// sooner than 50ms), a second one starts. The hedge then follows the
	// store's own tail, as hedged requests do in "The Tail at Scale",
	// rather than waiting a fixed second: against object storage with a
	// p50 of 20ms, about 1% of batches are hedged after some 200ms instead
	// of 0.1-0.5% after 1s. UploadTimeout stays the latest a hedge starts.
	// Default 3; negative turns it off (hedging after UploadTimeout only).
	HedgeAfterP90 float64
	// MaxAttempts is the number of upload attempts per batch, hedges and
	// retries after failures together. When all of them have failed, the
	// batch fails, and so do Persist and later Appends. Default 3.
	MaxAttempts int
	// AttemptTimeout cancels an attempt that has not finished after this
	// long; it then counts as failed. It keeps a stalled store from
	// blocking a batch forever. Default 30s.
	AttemptTimeout time.Duration
	// RetryBackoff is the pause before the retry that follows a failed
	// attempt; it doubles with each failure of the batch, up to
	// UploadTimeout. Default 10ms.
	RetryBackoff time.Duration
	// Compression compresses each object with zstd.
	Compression bool
	// LocalDir, if set, receives a local copy of every uploaded object,
	// under the object's name. Read with the same ReadOptions.LocalDir
	// reads local copies first (local recovery), verifying their
	// checksums and falling back to the store.
	LocalDir string
	// ObjectName names the n-th batch uploaded by the log (n from 1). It is
	// called when the batch is sealed; extra attempts of the batch add
	// "-h1", "-h2", ... to the name. Names must never repeat across logs
	// sharing a store, also across restarts: a Put replaces an existing
	// object, which may belong to a checkpoint. The runtime names batches
	// "checkpoints/<id>/dstl-<run>-<n>", so that the checkpoint garbage
	// collection deletes them (see the package documentation). The
	// default is "dstl/<run>/<%020d n>", with run a random token drawn by
	// Open.
	ObjectName func(seq uint64) string
	// NoParts turns off streaming an interval's log into one object. By
	// default, on a store that builds objects from parts (blob.Parter:
	// S3), a checkpoint interval's batches go into ONE object: the
	// batches sealed early (FlushBytes) go up as parts of a multipart
	// upload as the log grows, and the barrier's batch uploads the rest as
	// the last part. The checkpoint is durable once that part is up; the
	// log completes the object (the request that makes it visible, which
	// a server may make as slow as copying it) in the background, and the
	// handles name the upload (Handle.Uploads) so that a reader completes
	// it if the writer never did. One object per interval, whatever it
	// logs. With NoParts, or on a store without parts, every batch is an
	// object of its own (one PUT). A MaxInFlight below four of the
	// store's least part sizes (20 MiB on S3) turns streaming off too.
	NoParts bool
}

// Defaults.
const (
	DefaultFlushInterval    time.Duration = 0 // no timer
	DefaultPersistDelay                   = 10 * time.Millisecond
	DefaultFlushBytes                     = 15 << 20
	DefaultWriterFlushBytes               = DefaultFlushBytes
	DefaultMaxInFlight                    = 100 << 20
	DefaultUploadTimeout                  = time.Second
	DefaultMaxAttempts                    = 3
	DefaultAttemptTimeout                 = 30 * time.Second
	DefaultRetryBackoff                   = 10 * time.Millisecond
	DefaultHedgeAfterP90                  = 3

	maxInFlightLimit = 512 << 20
)

// withDefaults validates o and fills in its zero fields.
func (o Options) withDefaults() (Options, error) {
	type check struct {
		name string
		neg  bool
	}
	for _, c := range []check{
		{"FlushInterval", o.FlushInterval < 0},
		{"FlushBytes", o.FlushBytes < 0},
		{"WriterFlushBytes", o.WriterFlushBytes < 0},
		{"MaxInFlight", o.MaxInFlight < 0},
		{"UploadTimeout", o.UploadTimeout < 0},
		{"MaxAttempts", o.MaxAttempts < 0},
		{"AttemptTimeout", o.AttemptTimeout < 0},
		{"RetryBackoff", o.RetryBackoff < 0},
	} {
		if c.neg {
			return o, fmt.Errorf("dstl: Options.%s is negative", c.name)
		}
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	switch {
	case o.PersistDelay == 0:
		o.PersistDelay = DefaultPersistDelay
	case o.PersistDelay < 0:
		o.PersistDelay = 0
	}
	def(&o.UploadTimeout, DefaultUploadTimeout)
	def(&o.AttemptTimeout, DefaultAttemptTimeout)
	def(&o.RetryBackoff, DefaultRetryBackoff)
	defInt(&o.FlushBytes, DefaultFlushBytes)
	defInt(&o.WriterFlushBytes, o.FlushBytes)
	defInt(&o.MaxInFlight, DefaultMaxInFlight)
	defInt(&o.MaxAttempts, DefaultMaxAttempts)
	if math.IsNaN(o.HedgeAfterP90) {
		return o, fmt.Errorf("dstl: Options.HedgeAfterP90 is NaN")
	}
	if o.HedgeAfterP90 == 0 {
		o.HedgeAfterP90 = DefaultHedgeAfterP90
	}
	if o.MaxInFlight > maxInFlightLimit {
		return o, fmt.Errorf("dstl: Options.MaxInFlight %d exceeds the limit of %d bytes", o.MaxInFlight, maxInFlightLimit)
	}
	if o.ObjectName == nil {
		var b [8]byte
		rand.Read(b[:])
		run := hex.EncodeToString(b[:])
		o.ObjectName = func(seq uint64) string { return fmt.Sprintf("dstl/%s/%020d", run, seq) }
	}
	return o, nil
}

// Metrics are counters of a Log since Open, and gauges of its present
// state.
type Metrics struct {
	Changes        int64 // changes sealed into batches
	DroppedChanges int64 // of those, superseded by a later change of the same writer, state and key in the same batch, and not uploaded
	Batches        int64 // batches sealed
	Uploads        int64 // batches uploaded successfully
	FailedBatches  int64 // batches that failed after all attempts
	Attempts       int64 // upload attempts started
	HedgedUploads  int64 // attempts started because earlier ones were slow (HedgeAfterP90, UploadTimeout)
	Retries        int64 // attempts started after a failed one
	FailedAttempts int64 // attempts that failed (including those cancelled by AttemptTimeout)
	LoserDeletes   int64 // objects of attempts that did not win, deleted
	DeleteErrors   int64 // deletions of losers' objects that failed (the checkpoint GC removes them later)
	BytesRaw       int64 // uncompressed bytes of the uploaded objects' bodies
	BytesUploaded  int64 // bytes of the uploaded objects (winning attempts)
	BytesInFlight  int64 // bytes queued or uploading now (gauge)
	BlockedAppends int64 // Appends that had to wait for MaxInFlight
	BlockedTime    time.Duration
	Persists       int64 // Persist calls that returned a Handle
	LocalWrites    int64 // local copies written
	LocalErrors    int64 // local copies that could not be written (reads fall back to the store)
	LocalDeletes   int64 // local copies deleted because no writer needs them any more
	Objects        int64 // objects written: one per batch, or per stream of batches (Parts, on a blob.Parter)
	Parts          int64 // part uploads of streamed objects (each with its hedges)
	// UploadLatency is how long the uploaded objects took to become
	// durable, hedges and retries included (Count is Objects): for a
	// streamed object, from its last batch's turn until its last part is
	// up (its completion follows in the background).
	UploadLatency Latency
	// Completions counts the streamed objects completed in the
	// background after their handles were returned (Parts, on a
	// blob.Parter), CompletionTime the time they took, retries included;
	// FailedCompletions those whose every attempt failed (the log failed
	// with it, unless it was closing: a reader completes them).
	Completions       int64
	CompletionTime    time.Duration
	FailedCompletions int64
}
