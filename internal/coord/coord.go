package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/eddyflow/eddy/internal/manifest"
)

// Ack is a subtask's answer to a checkpoint barrier.
type Ack = manifest.Ack

// Task is what a Coordinator drives.
type Task interface {
	// Trigger asks every source of the task to inject the barrier of
	// checkpoint id; a trigger a source has not taken yet is replaced.
	Trigger(id uint64, final bool)
	// Complete writes checkpoint c, whose acknowledgements have all
	// arrived, and commits its sinks' transactions. It returns the
	// transactions that wait for a later checkpoint. An error marked with
	// Failed fails only this checkpoint (counted against the tolerated
	// failures); any other ends Run.
	Complete(ctx context.Context, c *Checkpoint) (pending map[string][]manifest.Txn, err error)
}

// Checkpoint is a checkpoint whose acknowledgements have all arrived.
type Checkpoint struct {
	ID    uint64
	Final bool
	// Savepoint asks Complete to retain the checkpoint (a savepoint was
	// requested); Complete sets SavepointErr if it could not, though the
	// checkpoint completed.
	Savepoint    bool
	SavepointErr error
	Started      time.Time
	SyncDur      time.Duration // the longest synchronous part of a subtask
	Acks         []Ack
	Last         Ack // the acknowledgement that completed it
	// Pending are the sink transactions of this and earlier checkpoints
	// that never completed (their records precede this barrier).
	Pending map[string][]manifest.Txn
}

// Config configures a Coordinator.
type Config struct {
	// FirstID is the id of the first checkpoint it starts.
	FirstID uint64
	// Tick starts a checkpoint on each value while none is in flight and
	// sources are still running; nil: none but the final one.
	Tick <-chan time.Time
	// Timeout aborts a checkpoint in flight this long; 0: an hour.
	Timeout time.Duration
	// Tolerable is how many checkpoints in a row may fail before Run
	// fails with the last one's error; negative: any number.
	Tolerable int
	// Acks is how many acknowledgements complete a checkpoint: one per
	// subtask of the task.
	Acks int
	// Sources is how many source subtasks signal that they finished.
	Sources int
	Logger  *slog.Logger
	// OnFailed, if set, is called with the id of each checkpoint that
	// fails (timed out, a failed acknowledgement, a failed Complete).
	OnFailed func(id uint64)
	// Savepoints are requests for a savepoint: a checkpoint triggered
	// after the request (at once, or once the one in flight is done) and
	// retained. Nil: none.
	Savepoints <-chan SavepointRequest
	// Reserve, if set, runs before each checkpoint is triggered, with its
	// id; an error fails that checkpoint without triggering it (the run,
	// if it is the final one).
	Reserve func(ctx context.Context, id uint64) error
}

// SavepointRequest asks for a savepoint; Done receives exactly one result.
// It must have room for it: the coordinator does not wait.
type SavepointRequest struct {
	Done chan<- SavepointResult
	// Plain asks for a checkpoint now that retention treats like any
	// other: not retained as a savepoint (unless another request asks for
	// one of the same checkpoint).
	Plain bool
}

// SavepointResult is the id of the savepoint taken, or why none was.
type SavepointResult struct {
	ID  uint64
	Err error
}

// failedError marks an error that fails one checkpoint, not the run.
type failedError struct{ err error }

func (e failedError) Error() string { return e.err.Error() }
func (e failedError) Unwrap() error { return e.err }

// Failed marks err, returned by Task.Complete, as failing only the
// checkpoint.
func Failed(err error) error { return failedError{err} }

// Coordinator runs the checkpoints of one task.
type Coordinator struct {
	cfg  Config
	task Task

	ctx      context.Context // Run's
	nextID   uint64
	inflight *Checkpoint
	finished int
	failures int
	pending  map[string][]manifest.Txn
	timeout  *time.Timer
	// Savepoint requests not yet attached to a checkpoint, and those of
	// the checkpoint in flight.
	waiting, savers []SavepointRequest
}

// New returns a coordinator of task.
func New(task Task, cfg Config) *Coordinator {
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{cfg: cfg, task: task, nextID: cfg.FirstID, pending: map[string][]manifest.Txn{}}
}

// Run triggers checkpoints and completes them as acks arrive, until the
// final checkpoint (taken once finished has delivered Config.Sources
// signals) is complete, which returns nil, or an error: a failed final
// checkpoint, more failed checkpoints in a row than tolerated, a fatal ack,
// an error of Task.Complete, or ctx's end.
func (c *Coordinator) Run(ctx context.Context, acks <-chan Ack, finished <-chan struct{}) (err error) {
	c.ctx = ctx
	c.timeout = time.NewTimer(time.Hour)
	defer c.timeout.Stop()
	defer func() {
		why := errors.New("the job ended before the savepoint was taken")
		if err != nil {
			why = fmt.Errorf("the job stopped before the savepoint was taken: %w", err)
		}
		c.answer(append(c.waiting, c.savers...), 0, why)
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-c.cfg.Savepoints:
			c.waiting = append(c.waiting, r)
			if c.inflight == nil && c.finished < c.cfg.Sources {
				if err := c.start(false); err != nil {
					return err
				}
			}
		case <-c.cfg.Tick:
			if c.inflight == nil && c.finished < c.cfg.Sources {
				if err := c.start(false); err != nil {
					return err
				}
			}
		case <-finished:
			c.finished++
			if err := c.maybeFinal(); err != nil {
				return err
			}
		case <-c.timeout.C:
			if c.inflight == nil {
				continue
			}
			id := c.inflight.ID
			c.cfg.Logger.Warn("checkpoint timed out; aborting it", "checkpoint", id, "timeout", c.cfg.Timeout)
			if c.inflight.Final {
				return fmt.Errorf("eddy: the final checkpoint %d timed out", id)
			}
			if err := c.fail(id, fmt.Errorf("checkpoint %d timed out after %v", id, c.cfg.Timeout)); err != nil {
				return err
			}
		case a := <-acks:
			done, err := c.ack(ctx, a)
			if err != nil || done {
				return err
			}
		}
	}
}

// ack handles one acknowledgement; done reports the final checkpoint
// complete.
func (c *Coordinator) ack(ctx context.Context, a Ack) (done bool, err error) {
	for name, t := range a.SinkTxns {
		c.pending[name] = append(c.pending[name], manifest.Txn{ID: a.ID, Data: t})
	}
	if a.Err != nil {
		if a.Fatal {
			return false, fmt.Errorf("eddy: checkpoint %d: %w", a.ID, a.Err)
		}
		// A failed upload fails this checkpoint, not the job: the next
		// one is triggered on schedule.
		c.cfg.Logger.Warn("checkpoint failed", "checkpoint", a.ID, "stage", a.Stage, "subtask", a.Subtask, "err", a.Err)
		if c.inflight == nil || c.inflight.ID != a.ID {
			return false, nil
		}
		if c.inflight.Final {
			return false, fmt.Errorf("eddy: the final checkpoint %d failed: %w", a.ID, a.Err)
		}
		return false, c.fail(a.ID, fmt.Errorf("checkpoint %d: %w", a.ID, a.Err))
	}
	cp := c.inflight
	if cp == nil || a.ID != cp.ID {
		return false, nil // of an aborted checkpoint
	}
	cp.SyncDur = max(cp.SyncDur, a.SyncDur)
	cp.Acks = append(cp.Acks, a)
	if len(cp.Acks) < c.cfg.Acks {
		return false, nil
	}
	cp.Last = a
	c.inflight = nil
	c.timeout.Reset(time.Hour)
	cp.Pending = c.pending
	pending, err := c.task.Complete(ctx, cp)
	if err != nil {
		var f failedError
		if !errors.As(err, &f) {
			return false, err
		}
		if cp.Final {
			return false, f.err
		}
		// No checkpoint: its transactions wait for the next one.
		return false, c.fail(cp.ID, f.err)
	}
	c.failures = 0
	c.pending = pending
	if pending == nil {
		c.pending = map[string][]manifest.Txn{}
	}
	if len(c.savers) > 0 {
		c.answer(c.savers, cp.ID, cp.SavepointErr)
		c.savers = nil
	}
	if cp.Final {
		return true, nil
	}
	return false, c.next()
}

// start starts checkpoint nextID. Its error ends Run: a failed
// reservation of the final checkpoint, or one failed checkpoint more
// than tolerated.
func (c *Coordinator) start(final bool) error {
	c.savers, c.waiting = append(c.savers, c.waiting...), nil
	retain := slices.ContainsFunc(c.savers, func(r SavepointRequest) bool { return !r.Plain })
	c.inflight = &Checkpoint{ID: c.nextID, Final: final, Started: time.Now(), Savepoint: retain}
	c.nextID++
	if c.cfg.Reserve != nil {
		if err := c.cfg.Reserve(c.ctx, c.inflight.ID); err != nil {
			if final || c.ctx.Err() != nil {
				return fmt.Errorf("eddy: checkpoint %d: %w", c.inflight.ID, err)
			}
			c.cfg.Logger.Warn("checkpoint failed", "checkpoint", c.inflight.ID, "err", err)
			return c.fail(c.inflight.ID, fmt.Errorf("checkpoint %d: %w", c.inflight.ID, err))
		}
	}
	c.timeout.Reset(c.cfg.Timeout)
	c.task.Trigger(c.inflight.ID, final)
	return nil
}

// maybeFinal starts the final checkpoint once every source has finished
// and none is in flight: also after one in flight then has failed, as no
// tick triggers one.
func (c *Coordinator) maybeFinal() error {
	if c.finished >= c.cfg.Sources && c.inflight == nil {
		return c.start(true)
	}
	return nil
}

// fail counts a failed checkpoint: past the tolerated number in a row, the
// run fails with it (a full disk does not heal by taking more checkpoints,
// and their pending output piles up).
func (c *Coordinator) fail(id uint64, err error) error {
	if c.cfg.OnFailed != nil {
		c.cfg.OnFailed(id)
	}
	c.answer(c.savers, 0, fmt.Errorf("checkpoint %d failed: %w", id, err))
	c.savers = nil
	c.inflight = nil
	c.timeout.Reset(time.Hour)
	c.failures++
	if tol := c.cfg.Tolerable; tol >= 0 && c.failures > tol {
		return fmt.Errorf("eddy: %d checkpoints in a row failed (%d tolerated); the last: %w", c.failures, tol, err)
	}
	return c.next()
}

// next starts the final checkpoint if it is due, else one for waiting
// savepoint requests, if any.
func (c *Coordinator) next() error {
	if err := c.maybeFinal(); err != nil {
		return err
	}
	if c.inflight == nil && len(c.waiting) > 0 && c.finished < c.cfg.Sources {
		return c.start(false)
	}
	return nil
}

// answer sends each request its result.
func (c *Coordinator) answer(rs []SavepointRequest, id uint64, err error) {
	for _, r := range rs {
		select {
		case r.Done <- SavepointResult{ID: id, Err: err}:
		default: // no room: the requester gave up
		}
	}
}
