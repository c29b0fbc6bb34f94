package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/eddyflow/eddy/blob"
	_ "github.com/eddyflow/eddy/blob/file" // registers file:// storage
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/internal/changelog"
	"github.com/eddyflow/eddy/internal/coord"
	"github.com/eddyflow/eddy/internal/errs"
	"github.com/eddyflow/eddy/internal/restore"
)

// Config is what the runtime takes from a job's options.
type Config struct {
	StorageURL     string     // where checkpoints go (blob.Open), unless Store is set
	Store          blob.Store // an open checkpoint store
	Interval       time.Duration
	Timeout        time.Duration
	Retain         int
	MaxParallelism int
	Restarts       int
	RestartDelay   time.Duration // before the first restart; doubled for each next one
	// TolerableFailures is how many checkpoints in a row may fail before
	// the job fails (negative: any number).
	TolerableFailures int
	BatchSize         int
	ChannelBatches    int // credits per input of an inbox
	Job               string
	Logger            *slog.Logger
	OnCheckpoint      func(CheckpointStats)
	Changelog         *ChangelogConfig // nil: the heap backend alone
	Pebble            *PebbleConfig    // nil: keyed state in the heap
	// Fingerprint is recorded in every manifest; a restore from a
	// checkpoint with another one is refused unless AllowChangedJob.
	Fingerprint     string
	AllowChangedJob bool
	// AllowDuplicates lets a restore fall back past checkpoints that
	// committed output to sinks that cannot roll it back.
	AllowDuplicates bool
	// RestoreFrom, when not 0, is the checkpoint the first attempt
	// restores instead of the newest.
	RestoreFrom uint64
	// Claim, when set, takes the store over for this run instead of a
	// lock or blob.Claim (eddy.ClaimStore).
	Claim func(ctx context.Context, store blob.Store, owner string) (blob.Lease, error)
	// Metrics receives the Run's measurements (NewMetrics of the same
	// graph and counters); nil: Run keeps its own.
	Metrics *Metrics
	// Savepoints are requests for a retained checkpoint, served by the
	// coordinator of whichever attempt runs.
	Savepoints <-chan SavepointRequest
}

// ChangelogConfig turns on the changelog state backend (internal/changelog).
type ChangelogConfig = changelog.Config

// NewChangelogConfig returns the defaults, materializing every
// materialize (10 minutes if not positive).
func NewChangelogConfig(materialize time.Duration) *ChangelogConfig {
	return changelog.NewConfig(materialize)
}

// SavepointRequest asks a running job for a savepoint: a checkpoint taken
// after the request that retention keeps (checkpoint.Storage.Retain).
type SavepointRequest = coord.SavepointRequest

// SavepointResult is the savepoint's checkpoint id, or why none was taken.
type SavepointResult = coord.SavepointResult

// runner is one Run of a job graph: its configuration, graph and counters.
type runner struct {
	cfg     *Config
	stages  []*Stage
	sources []*SourceEntry
	sinks   []*SinkEntry
	stats   *Counters
	metrics *Metrics
	// unusable are the checkpoints found corrupt or incomplete, and why.
	unusable map[uint64]string
	pebble   *pebbleRun // with the Pebble state backend
}

// Run runs the job graph g until its bounded inputs are exhausted and their
// output is committed, or ctx is cancelled. It first restores the latest
// complete checkpoint in the job's storage, falling back to the one before
// while a checkpoint's state or log turns out corrupt or missing (without
// counting a restart); on a failure it restarts from the last checkpoint as
// cfg allows, unless the error is permanent.
func Run(ctx context.Context, g *Graph, cfg *Config, stats *Counters) error {
	e := &runner{cfg: cfg, stages: g.stages, sources: g.sources, sinks: g.sinks, stats: stats, metrics: cfg.Metrics, unusable: map[uint64]string{}}
	if e.metrics == nil {
		e.metrics = NewMetrics(g, stats)
	}
	if cfg.Pebble != nil {
		var err error
		if e.pebble, err = openPebble(cfg.Pebble, e.stages); err != nil {
			return err
		}
		defer e.pebble.close()
	}
	var store *checkpoint.Storage
	bs := cfg.Store
	if bs == nil && cfg.StorageURL != "" {
		var err error
		if bs, err = blob.Open(cfg.StorageURL); err != nil {
			return errs.Kind(errs.Storage, fmt.Errorf("eddy: checkpoint storage: %w", err), true)
		}
	}
	if bs != nil && cfg.Metrics != nil {
		bs = blob.Count(bs, &cfg.Metrics.blobs)
	}
	var lease blob.Lease
	if bs != nil && cfg.Claim != nil {
		var err error
		if lease, err = cfg.Claim(ctx, bs, owner(cfg.Job)); err != nil {
			return errs.Kind(errs.Storage, fmt.Errorf("eddy: checkpoint storage: claiming it: %w", err), true)
		}
		defer lease.Release()
	} else if l, ok := bs.(blob.Locker); ok {
		// One process per job's storage: a second one would write the
		// same checkpoints and commit the same output.
		var err error
		if lease, err = l.Lock(owner(cfg.Job)); err != nil {
			var held *blob.HeldError
			if errors.As(err, &held) {
				return errs.Kind(errs.Fenced, fmt.Errorf("eddy: checkpoint storage: %w", err), true)
			}
			// Not another writer: the storage cannot take the lock
			// (read-only, full, no permission).
			return errs.Kind(errs.Storage, fmt.Errorf("eddy: checkpoint storage: %w", err), true)
		}
		defer lease.Release()
	} else if _, ok := bs.(blob.Creator); ok {
		// An object store cannot be locked, but a claim fences every
		// earlier writer; it comes before the restore reads the storage.
		var err error
		lease, err = blob.Claim(ctx, bs, owner(cfg.Job))
		switch {
		case errors.Is(err, blob.ErrNoConditionalCreate):
			// A wrapper that is a Creator over a store that is none:
			// nothing to claim with.
			lease = nil
		case err != nil:
			return errs.Kind(errs.Storage, fmt.Errorf("eddy: checkpoint storage: %w", err), true)
		default:
			defer lease.Release()
		}
	}
	if bs != nil {
		store = checkpoint.NewStorage(bs, cfg.Retain)
	}
	var before uint64 // restore a checkpoint older than this one, when not 0
	if id := cfg.RestoreFrom; id != 0 {
		if store == nil {
			return errs.Kind(errs.Permanent, fmt.Errorf("eddy: restore checkpoint %d: the job keeps no checkpoints (eddy.Checkpoints)", id), true)
		}
		ids, err := store.List(ctx)
		if err != nil {
			return errs.Kind(errs.Storage, fmt.Errorf("eddy: restore checkpoint %d: %w", id, err), false)
		}
		if !slices.Contains(ids, id) {
			return errs.Kind(errs.Permanent, fmt.Errorf("eddy: restore checkpoint %d: no such complete checkpoint (complete: %v)", id, ids), true)
		}
		if m, skipped, err := store.Before(ctx, id+1); err != nil {
			return errs.Kind(errs.Storage, fmt.Errorf("eddy: restore checkpoint %d: %w", id, err), false)
		} else if m == nil || m.ID != id {
			return errs.Kind(errs.CorruptCheckpoint, fmt.Errorf("eddy: restore checkpoint %d: it is not usable: %w", id, errors.Join(skipped...)), true)
		}
		// Newer checkpoints are passed over as a fallback passes over
		// unusable ones: their output is rolled back or the restore refused,
		// and they are quarantined so that no restart restores them.
		for _, newer := range ids {
			if newer > id {
				e.unusable[newer] = fmt.Sprintf("newer than checkpoint %d, which the job restored on purpose (eddy.RestoreCheckpoint)", id)
			}
		}
		before = id + 1
	}
	for attempt := 0; ; attempt++ {
		err := e.runAttempt(ctx, store, bs, lease, before)
		if cfg.RestoreFrom != 0 && before == cfg.RestoreFrom+1 {
			var re *restore.Error
			if errors.As(err, &re) && re.ID == cfg.RestoreFrom {
				// The checkpoint asked for is unusable: no falling back
				// past it to an older one nobody asked for.
				return errs.Kind(errs.CorruptCheckpoint, fmt.Errorf("eddy: restore checkpoint %d: %w", cfg.RestoreFrom, re), true)
			}
		}
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
		var re *restore.Error
		if errors.As(err, &re) {
			cfg.Logger.Warn("checkpoint unusable; falling back to the previous complete checkpoint (output committed after it may repeat)",
				"checkpoint", re.ID, "err", re.Err)
			before = re.ID
			e.unusable[re.ID] = re.Err.Error()
			attempt--
			continue
		}
		if errs.IsPermanent(err) || attempt >= cfg.Restarts {
			// A fenced job leaves the sinks alone: their pending output
			// may be the new owner's, which settling would delete.
			if store != nil && !errors.Is(err, errs.Fenced) {
				e.abandonPending(store)
			}
			return err
		}
		stats.restarts.Add(1)
		delay := restartDelay(cfg.RestartDelay, attempt)
		cfg.Logger.Warn(fmt.Sprintf("job failed (attempt %d of %d); restarting from the last checkpoint", attempt+1, cfg.Restarts+1),
			"err", err, "delay", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// owner describes this process for the lock of its checkpoint storage.
func owner(job string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("job %q, pid %d on host %s, since %s", job, os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
}

// restartDelay is the wait before restart attempt+1: first, doubled for
// each restart before it, at most a minute (or first, if that is longer).
func restartDelay(first time.Duration, attempt int) time.Duration {
	limit := max(first, time.Minute)
	d := first
	for range attempt {
		if d *= 2; d >= limit {
			return limit
		}
	}
	return d
}

// abandonPending runs when the job fails for good: every sink settles what
// the latest complete checkpoint recorded and aborts the rest, so the output
// of failed checkpoints does not lie around pending until a next run (it is
// produced again from that checkpoint). Best effort: a failure is logged.
func (e *runner) abandonPending(store *checkpoint.Storage) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, _, err := store.Latest(ctx)
	var latest uint64
	if m != nil {
		latest = m.ID
	}
	if err == nil {
		// A manifest write this run gave up on may still land: its
		// checkpoint is made void before its output is aborted.
		_, err = store.VoidInFlight(ctx, latest)
	}
	if err != nil {
		e.cfg.Logger.Warn("the job failed; its sinks' pending output stays for the next run to abort", "err", err)
		return
	}
	for _, s := range e.sinks {
		var txns [][]byte
		if m != nil {
			for _, ss := range m.Sinks {
				if ss.Name == s.name {
					txns = ss.Txns
				}
			}
		}
		if err := s.recover(ctx, txns); err != nil {
			e.cfg.Logger.Warn("the job failed; aborting a sink's pending output failed too (the next run aborts it)", "sink", s.name, "err", err)
		}
	}
}
