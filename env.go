package eddy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/eddyflow/eddy/blob"
	_ "github.com/eddyflow/eddy/blob/file" // registers file:// storage
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/internal/errs"
	"github.com/eddyflow/eddy/internal/graph"
	"github.com/eddyflow/eddy/state"
)

// Env holds a job under construction and runs it.
type Env struct {
	cfg      config
	stages   []*stage
	sinks    []*sinkEntry
	sources  []*sourceEntry
	ops      int // operators created, for default names
	streams  []*streamInfo
	nodes    []graph.Node // the checkpointed parts, for the identity check
	stats    stats
	buildErr error // the first misuse of the API while building the job
}

type config struct {
	storageURL     string
	interval       time.Duration
	timeout        time.Duration
	retain         int
	parallelism    int
	maxParallelism int
	restarts       int
	restartDelay   time.Duration
	batchSize      int
	channelBatches int
	job            string
	logger         *slog.Logger
	onCheckpoint   func(CheckpointStats)
	store          blob.Store
	changelog      *changelogConfig
}

// Option configures an Env.
type Option func(*config)

// Checkpoints stores checkpoints at url ("file://./eddy-data" or a
// directory path) every interval (10 ms or more). Without it a job keeps no
// checkpoints and restarts from the beginning.
func Checkpoints(url string, interval time.Duration) Option {
	return func(c *config) { c.storageURL, c.interval = url, interval }
}

// CheckpointStore stores checkpoints in an open blob.Store (tests, S3).
func CheckpointStore(s blob.Store, interval time.Duration) Option {
	return func(c *config) { c.store, c.interval = s, interval }
}

// CheckpointTimeout aborts a checkpoint that has not completed in d
// (default 1 minute); the next one is triggered on schedule.
func CheckpointTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// RetainCheckpoints keeps the newest n complete checkpoints (default 3).
func RetainCheckpoints(n int) Option { return func(c *config) { c.retain = n } }

// Parallelism sets the default number of subtasks per operator (default:
// the number of CPUs).
func Parallelism(n int) Option { return func(c *config) { c.parallelism = n } }

// MaxParallelism sets the number of key groups (default 128): the upper
// bound of any keyed operator's parallelism, fixed for the life of the job's
// state.
func MaxParallelism(n int) Option { return func(c *config) { c.maxParallelism = n } }

// Restarts restarts a failed job from its last checkpoint up to attempts
// times, waiting delay before each (default 3 attempts, 1 s).
func Restarts(attempts int, delay time.Duration) Option {
	return func(c *config) { c.restarts, c.restartDelay = attempts, delay }
}

// BatchSize sets how many records travel between subtasks in one batch
// (default 512).
func BatchSize(n int) Option { return func(c *config) { c.batchSize = n } }

// JobName names the job in checkpoints and logs (default "eddy-job").
func JobName(name string) Option { return func(c *config) { c.job = name } }

// Logger sends the runtime's messages (restores, fallbacks, restarts,
// failed checkpoints) to l, with levels (Info for progress, Warn for what
// the job survives, Error for what ends it) and attributes (checkpoint,
// operator, subtask, err). Default: text to standard error.
func Logger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// LogOutput sends the runtime's messages to w as slog text lines, at Info
// and above.
func LogOutput(w io.Writer) Option {
	return func(c *config) { c.logger = slog.New(slog.NewTextHandler(w, nil)).With("component", "eddy") }
}

// OnCheckpoint calls fn after each completed checkpoint, from the
// coordinator goroutine.
func OnCheckpoint(fn func(CheckpointStats)) Option { return func(c *config) { c.onCheckpoint = fn } }

// CheckpointStats describes one completed checkpoint.
type CheckpointStats struct {
	ID       uint64
	Duration time.Duration // trigger to manifest written
	// SyncDuration is the longest time a subtask spent at the barrier
	// (snapshotting, or cutting the log); the rest is asynchronous.
	SyncDuration time.Duration
	Bytes        int64 // state bytes written for this checkpoint (snapshots, or log with the changelog)
	FullSize     int64 // bytes of every state blob and log object the checkpoint refers to
	StateEntries int64 // keyed state entries (state, key) at the checkpoint
	Final        bool  // the checkpoint that ends a bounded job
	// Last is the subtask whose acknowledgement completed the checkpoint
	// and where its time went; with ManifestWrite it explains a slow one.
	Last AckTiming
	// ManifestWrite is the time spent writing the manifest, retries
	// included, after the last acknowledgement.
	ManifestWrite time.Duration
	// MaterializationStall is the longest time one step of a changelog
	// materialization held up a subtask's records since the previous
	// checkpoint completed (see Stats.MaterializationStall).
	MaterializationStall time.Duration
}

// AckTiming splits one subtask's part of a checkpoint: Barrier from the
// trigger until the barrier reached the subtask (aligned over its
// inputs), Sync at the barrier, Async after it (uploading state, or
// waiting for the log to be durable) until the coordinator had the
// acknowledgement.
type AckTiming struct {
	Stage, Subtask       int // the stage's position in the job graph, sources first
	Barrier, Sync, Async time.Duration
}

// New returns an environment for one job.
func New(opts ...Option) *Env {
	cfg := config{
		timeout: time.Minute, retain: 3, parallelism: runtime.NumCPU(),
		maxParallelism: state.DefaultMaxParallelism, restarts: 3, restartDelay: time.Second,
		batchSize: 512, channelBatches: 4, job: "eddy-job",
		logger: slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "eddy"),
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.parallelism < 1 {
		cfg.parallelism = 1
	}
	if cfg.batchSize < 1 {
		cfg.batchSize = 1
	}
	return &Env{cfg: cfg}
}

// Stats is a live view of a running job, safe to read from any goroutine.
type Stats struct {
	RecordsIn           int64         // records read from sources
	RecordsOut          int64         // records written to sinks
	StateEntries        int64         // keyed state entries at the last checkpoint
	Checkpoints         int64         // checkpoints completed
	LastCheckpoint      time.Duration // duration of the last completed checkpoint
	LastBytes           int64         // state bytes of the last completed checkpoint
	Restarts            int64         // restarts after failures
	LateRecords         int64         // records that arrived after their windows were gone
	LastUploaded        int64         // bytes uploaded for the last checkpoint (state parts and log)
	LastFullSize        int64         // bytes of everything the last checkpoint refers to
	Materializations    int64         // changelog materializations completed
	LastMaterialization time.Duration // duration of the last one
	// MaterializationStall is the longest time one step of a
	// materialization held up its subtask's records (serializing key
	// groups); the uploads run in the background.
	MaterializationStall time.Duration
	Recovery             time.Duration // time the current attempt spent restoring state: its slowest subtask's restore
	RestoredFrom         uint64        // checkpoint the current attempt restored from (0: none)
}

type stats struct {
	recordsIn, recordsOut, stateEntries, checkpoints, lastDur, lastBytes, restarts, restored, lateRecords atomic.Int64
	lastUploaded, lastFull, materializations, lastMaterialization, recovery                               atomic.Int64
	materializationStall, stallSinceCheckpoint                                                            atomic.Int64
}

// Stats returns the job's counters.
func (e *Env) Stats() Stats {
	s := &e.stats
	return Stats{RecordsIn: s.recordsIn.Load(), RecordsOut: s.recordsOut.Load(), StateEntries: s.stateEntries.Load(),
		Checkpoints: s.checkpoints.Load(), LastCheckpoint: time.Duration(s.lastDur.Load()), LastBytes: s.lastBytes.Load(),
		Restarts: s.restarts.Load(), RestoredFrom: uint64(s.restored.Load()), LateRecords: s.lateRecords.Load(),
		LastUploaded: s.lastUploaded.Load(), LastFullSize: s.lastFull.Load(), Materializations: s.materializations.Load(),
		LastMaterialization: time.Duration(s.lastMaterialization.Load()), Recovery: time.Duration(s.recovery.Load()),
		MaterializationStall: time.Duration(s.materializationStall.Load())}
}

// permanentError marks a failure that a restart cannot fix (an incompatible
// state schema, a bad job graph).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Is makes errors.Is(err, ErrPermanent) hold.
func (e *permanentError) Is(target error) bool { return target == errs.Permanent }

// Run runs the job until its bounded inputs are exhausted and their output
// is committed, or ctx is cancelled. It first restores the latest complete
// checkpoint in the job's storage, falling back to the one before while a
// checkpoint's state or log turns out corrupt or missing (without counting
// a restart); on a failure it restarts from the last checkpoint as the
// restart strategy allows.
func (e *Env) Run(ctx context.Context) error {
	if err := e.validate(); err != nil {
		return err
	}
	var store *checkpoint.Storage
	bs := e.cfg.store
	if bs == nil && e.cfg.storageURL != "" {
		var err error
		if bs, err = blob.Open(e.cfg.storageURL); err != nil {
			return errs.Kind(errs.Storage, fmt.Errorf("eddy: checkpoint storage: %w", err), true)
		}
	}
	if bs != nil {
		store = checkpoint.NewStorage(bs, e.cfg.retain)
	}
	var before uint64 // restore a checkpoint older than this one, when not 0
	for attempt := 0; ; attempt++ {
		err := e.runAttempt(ctx, store, bs, before)
		before = 0
		if err == nil || ctx.Err() != nil {
			if ctx.Err() != nil && err != nil {
				return ctx.Err()
			}
			return err
		}
		// A checkpoint whose state is unreadable is skipped at once; this
		// is not a restart. Each fallback goes to an older checkpoint, so
		// fallbacks end.
		var re *restoreError
		if errors.As(err, &re) {
			e.cfg.logger.Warn("checkpoint unusable; falling back to the previous complete checkpoint (output committed after it may repeat)",
				"checkpoint", re.id, "err", re.err)
			before = re.id
			attempt--
			continue
		}
		if errs.IsPermanent(err) || attempt >= e.cfg.restarts {
			return err
		}
		e.stats.restarts.Add(1)
		e.cfg.logger.Warn(fmt.Sprintf("job failed (attempt %d of %d); restarting from the last checkpoint", attempt+1, e.cfg.restarts+1),
			"err", err, "delay", e.cfg.restartDelay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(e.cfg.restartDelay):
		}
	}
}

func (e *Env) validate() error {
	if len(e.sources) == 0 {
		return errors.New("eddy: the job has no source")
	}
	if e.buildErr != nil {
		return e.buildErr
	}
	if err := graph.Check(e.nodes); err != nil {
		return err
	}
	for _, s := range e.streams {
		if !s.consumed {
			return fmt.Errorf("eddy: the output of %s is not consumed; end the pipeline in a sink (eddy.ToSink)", s.desc)
		}
	}
	if e.cfg.interval != 0 && e.cfg.interval < 10*time.Millisecond {
		return fmt.Errorf("eddy: checkpoint interval %v is below the 10ms minimum", e.cfg.interval)
	}
	return nil
}

// noteStall records a materialization step that held its subtask for d.
func (s *stats) noteStall(d time.Duration) {
	storeMax(&s.materializationStall, int64(d))
	storeMax(&s.stallSinceCheckpoint, int64(d))
}

// storeMax sets a to v if v is larger.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}
