package eddy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	goruntime "runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddyflow/eddy/blob"
	_ "github.com/eddyflow/eddy/blob/file" // registers file:// storage
	"github.com/eddyflow/eddy/internal/graph"
	"github.com/eddyflow/eddy/internal/runtime"
	"github.com/eddyflow/eddy/state"
)

// Env holds a job under construction and runs it.
type Env struct {
	cfg      config
	graph    runtime.Graph
	ops      int // operators created, for default names
	streams  []*streamInfo
	nodes    []graph.Node // the checkpointed parts, for the identity check
	stats    runtime.Counters
	buildErr error // the first misuse of the API while building the job
	svc      opsState
	// savepoints carries Savepoint's requests to the running attempt.
	savepoints chan runtime.SavepointRequest
}

// config is the runtime's configuration and the default parallelism,
// which only building the job uses.
type config struct {
	runtime.Config
	parallelism int
	params      map[string]string     // JobParameters
	registerer  prometheus.Registerer // Metrics
	admin       *adminConfig          // Admin
}

// Option configures an Env.
type Option func(*config)

// Checkpoints stores checkpoints at url ("file://./eddy-data" or a
// directory path) every interval (10 ms or more). Without it a job keeps no
// checkpoints and restarts from the beginning.
func Checkpoints(url string, interval time.Duration) Option {
	return func(c *config) { c.StorageURL, c.Interval = url, interval }
}

// CheckpointStore stores checkpoints in an open blob.Store (tests, S3).
func CheckpointStore(s blob.Store, interval time.Duration) Option {
	return func(c *config) { c.Store, c.Interval = s, interval }
}

// CheckpointTimeout aborts a checkpoint that has not completed in d
// (default 1 minute); the next one is triggered on schedule.
func CheckpointTimeout(d time.Duration) Option { return func(c *config) { c.Timeout = d } }

// RetainCheckpoints keeps the newest n complete checkpoints (default 3).
func RetainCheckpoints(n int) Option { return func(c *config) { c.Retain = n } }

// Parallelism sets the default number of subtasks per operator (default:
// the number of CPUs).
func Parallelism(n int) Option { return func(c *config) { c.parallelism = n } }

// MaxParallelism sets the number of key groups (default 128): the upper
// bound of any keyed operator's parallelism, fixed for the life of the job's
// state.
func MaxParallelism(n int) Option { return func(c *config) { c.MaxParallelism = n } }

// JobParameters marks parameters as part of the job's identity (a seed,
// an input's event count; keys and values as pairs): with the job's
// checkpointed parts, their ids and record types, they make the
// fingerprint every checkpoint records. A job resumed from a checkpoint
// whose fingerprint differs is refused with both shown (AllowChangedJob
// resumes anyway), so a changed parameter never mixes two jobs' output.
func JobParameters(kv ...string) Option {
	return func(c *config) {
		if c.params == nil {
			c.params = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			c.params[kv[i]] = kv[i+1]
		}
		if len(kv)%2 == 1 {
			c.params[kv[len(kv)-1]] = ""
		}
	}
}

// AllowChangedJob resumes from a checkpoint written by a job with another
// fingerprint (see JobParameters): the parts whose ids match take their
// state; it is the user's call that the output stays meaningful.
func AllowChangedJob() Option { return func(c *config) { c.AllowChangedJob = true } }

// AllowDuplicatesOnFallback lets a restore fall back past checkpoints that
// turned out unusable (corrupt or missing) even though they committed
// output to a sink that cannot roll it back (Kafka): that output is
// committed again, and the job logs so at Error level. Without it such a
// restore is refused. Sinks that can roll back (the file sink) do, and
// need no permission.
func AllowDuplicatesOnFallback() Option { return func(c *config) { c.AllowDuplicates = true } }

// RestoreCheckpoint restores checkpoint id (a savepoint, say) instead of
// the newest one. The checkpoints after it are passed over for good
// (quarantined, so no later restart restores them), and what they
// committed is handled as for a fallback: sinks that can roll it back do;
// for a sink that cannot, Run refuses unless AllowDuplicatesOnFallback. A
// checkpoint id that is missing or unusable fails Run, naming why.
func RestoreCheckpoint(id uint64) Option { return func(c *config) { c.RestoreFrom = id } }

// TolerableCheckpointFailures fails the job once more than n checkpoints
// in a row have failed (timed out, an upload or the manifest failed), with
// the last failure's error (default 3; negative: never), like Flink's
// tolerable-failed-checkpoints. The restart strategy then applies.
func TolerableCheckpointFailures(n int) Option { return func(c *config) { c.TolerableFailures = n } }

// Restarts restarts a failed job from its last checkpoint up to attempts
// times, waiting delay before the first and twice as long before each next
// one, at most a minute (default 3 attempts, 1 s). Permanent errors
// (ErrPermanent) are not retried.
func Restarts(attempts int, delay time.Duration) Option {
	return func(c *config) { c.Restarts, c.RestartDelay = attempts, delay }
}

// BatchSize sets how many records travel between subtasks in one batch
// (default 512). It is the most: a subtask that works through its records
// slowly (hundreds of microseconds each: state read from disk, a slow
// call) asks for smaller batches, so that its full input queue (4 batches
// per input) holds about 50 ms of its work and a checkpoint barrier, which
// queues behind all of it, is not held up for seconds. Flink calls this
// buffer debloating.
func BatchSize(n int) Option { return func(c *config) { c.BatchSize = n } }

// JobName names the job in checkpoints and logs (default "eddy-job").
func JobName(name string) Option { return func(c *config) { c.Job = name } }

// Logger sends the runtime's messages (restores, fallbacks, restarts,
// failed checkpoints) to l, with levels (Info for progress, Warn for what
// the job survives, Error for what ends it) and attributes (checkpoint,
// operator, subtask, err). Default: text to standard error.
func Logger(l *slog.Logger) Option { return func(c *config) { c.Logger = l } }

// LogOutput sends the runtime's messages to w as slog text lines, at Info
// and above.
func LogOutput(w io.Writer) Option {
	return func(c *config) { c.Logger = slog.New(slog.NewTextHandler(w, nil)).With("component", "eddy") }
}

// OnCheckpoint calls fn after each completed checkpoint, from the
// coordinator goroutine.
func OnCheckpoint(fn func(CheckpointStats)) Option { return func(c *config) { c.OnCheckpoint = fn } }

// CheckpointStats describes one completed checkpoint (see
// runtime.CheckpointStats for its fields).
type CheckpointStats = runtime.CheckpointStats

// AckTiming splits one subtask's part of a checkpoint into barrier, sync
// and async time.
type AckTiming = runtime.AckTiming

// Stats is a live view of a running job, safe to read from any goroutine.
type Stats = runtime.Stats

// New returns an environment for one job.
func New(opts ...Option) *Env {
	cfg := config{Config: runtime.Config{
		Timeout: time.Minute, Retain: 3,
		MaxParallelism: state.DefaultMaxParallelism, Restarts: 3, RestartDelay: time.Second, TolerableFailures: 3,
		BatchSize: 512, ChannelBatches: 4, Job: "eddy-job",
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "eddy"),
	}, parallelism: goruntime.NumCPU()}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.parallelism < 1 {
		cfg.parallelism = 1
	}
	if cfg.BatchSize < 1 {
		cfg.BatchSize = 1
	}
	e := &Env{cfg: cfg, savepoints: make(chan runtime.SavepointRequest)}
	e.cfg.Savepoints = e.savepoints
	return e
}

// Stats returns the job's counters.
func (e *Env) Stats() Stats { return e.stats.Stats() }

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
	e.cfg.Fingerprint = graph.Fingerprint(e.nodes, e.cfg.params)
	stop, err := e.startOps()
	defer stop()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	e.svc.mu.Lock()
	e.svc.stopRun = cancel
	e.svc.mu.Unlock()
	defer func() {
		e.svc.mu.Lock()
		e.svc.stopRun = nil
		e.svc.mu.Unlock()
	}()
	err = runtime.Run(ctx, &e.graph, &e.cfg.Config, &e.stats)
	if err != nil && errors.Is(context.Cause(ctx), errStoppedWithSavepoint) {
		return nil // stopped on purpose, after a savepoint
	}
	return err
}

func (e *Env) validate() error {
	if e.graph.NumSources() == 0 {
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
		if s.reuse {
			for _, op := range s.ops {
				if op != "map" && op != "flatMap" {
					return fmt.Errorf("eddy: %s reuses its records (eddy.ReuseRecords), so only Map and FlatMap may consume it, not %s, which keeps records past the call", s.desc, op)
				}
			}
		}
	}
	if e.cfg.Interval != 0 && e.cfg.Interval < 10*time.Millisecond {
		return fmt.Errorf("eddy: checkpoint interval %v is below the 10ms minimum", e.cfg.Interval)
	}
	return nil
}
