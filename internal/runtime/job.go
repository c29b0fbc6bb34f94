package runtime

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/internal/errs"
	"github.com/eddyflow/eddy/internal/graph"
	"github.com/eddyflow/eddy/internal/inbox"
	"github.com/eddyflow/eddy/internal/manifest"
)

// Job is one attempt of running the job: its channels, the restored
// checkpoint and the coordinator's inboxes.
type Job struct {
	env        *runner
	storage    *checkpoint.Storage
	lease      blob.Lease // the lock on the storage, nil if it has none
	blobs      blob.Store
	restored   *checkpoint.Manifest
	nextID     uint64
	inboxes    map[*Stage][]*inbox.Inbox[msg] // of each subtask of each Stage fed by a shuffle
	triggers   [][]chan trigger               // [source][subtask]
	wmSlots    [][]atomic.Int64               // [source][subtask] watermarks, for alignment
	dlog       *dstl.Log                      // the changelog's durable short-term log, if on
	partHedger *blob.Hedger                   // when to hedge a materialization part's upload, learned from the parts before
	readHedger *blob.Hedger                   // when to hedge a restore's read of a log object, learned from the reads before
	partReader *blob.Hedger                   // the same for materialized parts: megabytes, not the log's kilobytes, so learned apart
	logShared  *dstl.Shared                   // the restored log's objects, fetched once for all subtasks
	runID      string                         // names this attempt's log writers and objects
	building   atomic.Uint64                  // id of the checkpoint now being built
	acks       chan ack
	finished   chan struct{}
	wg         sync.WaitGroup
	pruneCtx   context.Context    // the retention goroutines' context: the attempt's, cut short at its end
	stopPrune  context.CancelFunc // cancels pruneCtx
	prunes     sync.WaitGroup     // retention goroutines
	pruneID    atomic.Uint64      // the checkpoint whose retention runs now, 0 if none: one runs at a time
}

// PruneGrace is how long a job that has finished waits for the retention of
// its last checkpoints to finish deleting what they replaced. Past it the
// deletion is cancelled and Run returns: nothing needed is lost, and the
// next prune (the first checkpoint of the next run) deletes the rest.
const PruneGrace = 3 * time.Second

// ack is a subtask's answer to a checkpoint barrier.
type ack = manifest.Ack

func (j *Job) sendAck(ctx context.Context, a ack) error {
	select {
	case j.acks <- a:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (j *Job) sourceFinished(ctx context.Context) error {
	select {
	case j.finished <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runAttempt runs one attempt of the job, restoring the newest complete
// checkpoint, or the newest one before the checkpoint id before when before
// is not 0.
func (e *runner) runAttempt(parent context.Context, storage *checkpoint.Storage, blobs blob.Store, lease blob.Lease, before uint64) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	pruneCtx, stopPrune := context.WithCancel(ctx)
	defer stopPrune()
	j := &Job{lease: lease, pruneCtx: pruneCtx, stopPrune: stopPrune, env: e, storage: storage, blobs: blobs, nextID: 1, inboxes: map[*Stage][]*inbox.Inbox[msg]{},
		acks: make(chan ack, 64), finished: make(chan struct{}, 64),
		readHedger: blob.NewHedger(dstl.DefaultHedgeAfterP90, dstl.DefaultUploadTimeout),
		partReader: blob.NewHedger(dstl.DefaultHedgeAfterP90, dstl.DefaultUploadTimeout)}
	// Restore the newest readable checkpoint. Its state is read by the
	// subtasks as they start; if some of it turns out unreadable, the
	// attempt fails with a *restoreError and Run falls back to the one
	// before it.
	if storage != nil {
		var m *checkpoint.Manifest
		var skipped []error
		var err error
		if before == 0 {
			m, skipped, err = storage.Latest(ctx)
		} else {
			m, skipped, err = storage.Before(ctx, before)
		}
		for _, s := range skipped {
			e.cfg.Logger.Warn("skipping a checkpoint", "err", s)
			var se *checkpoint.SkipError
			if errors.As(s, &se) {
				e.unusable[se.ID] = se.Err.Error()
			}
		}
		if err != nil {
			return errs.Kind(errs.Storage, fmt.Errorf("eddy: reading checkpoints: %w", err), false)
		}
		j.restored = m
	}
	if storage != nil {
		if err := e.settleFallback(ctx, storage, j.restored); err != nil {
			return err
		}
	}
	if m := j.restored; m != nil && m.Fingerprint != "" && m.Fingerprint != e.cfg.Fingerprint && !e.cfg.AllowChangedJob {
		return errs.Kind(errs.IncompatibleState, fmt.Errorf("eddy: checkpoint %d was written by a job that declared other parts or parameters (- the checkpoint's, + this job's):\n%s\n"+
			"resuming would mix two jobs' output: run this job with its own checkpoint storage and output, or pass eddy.AllowChangedJob()",
			m.ID, graph.FingerprintDiff(m.Fingerprint, e.cfg.Fingerprint)), true)
	}
	if j.restored != nil {
		j.logShared = dstl.NewShared()
	}
	if storage != nil {
		// Ids keep growing past anything stored, also after a fallback.
		id, err := storage.NextID(ctx)
		if err != nil {
			return errs.Kind(errs.Storage, fmt.Errorf("eddy: reading checkpoints: %w", err), false)
		}
		j.nextID = id
	}
	j.building.Store(j.nextID)
	if err := j.openChangelog(); err != nil {
		return err
	}
	if j.dlog != nil {
		defer j.dlog.Close()
	}
	e.stats.recovery.Store(0)
	if j.restored != nil {
		e.stats.restored.Store(int64(j.restored.ID))
		e.cfg.Logger.Info("restoring from checkpoint", "checkpoint", j.restored.ID)
	} else {
		e.stats.restored.Store(0)
	}
	// Sinks first settle what the restored checkpoint pre-committed.
	for _, s := range e.sinks {
		var txns [][]byte
		if j.restored != nil {
			for _, ss := range j.restored.Sinks {
				if ss.Name == s.name {
					txns = ss.Txns
				}
			}
		}
		if err := s.recover(ctx, txns); err != nil {
			return fmt.Errorf("eddy: sink %s recovery: %w", s.name, err)
		}
	}
	for _, st := range e.stages {
		if st.input == nil {
			continue
		}
		ibs := make([]*inbox.Inbox[msg], st.parallelism)
		for b := range ibs {
			ibs[b] = inbox.New[msg](st.input.from.parallelism, j.env.cfg.ChannelBatches)
		}
		j.inboxes[st] = ibs
	}
	j.triggers = make([][]chan trigger, len(e.sources))
	j.wmSlots = make([][]atomic.Int64, len(e.sources))
	for i, s := range e.sources {
		j.wmSlots[i] = make([]atomic.Int64, s.st.parallelism)
		for k := range j.wmSlots[i] {
			j.wmSlots[i][k].Store(noWatermark)
		}
		j.triggers[i] = make([]chan trigger, s.st.parallelism)
		for k := range j.triggers[i] {
			j.triggers[i][k] = make(chan trigger, 1)
		}
	}
	var tasks sync.WaitGroup
	total := 0
	for _, st := range e.stages {
		for i := 0; i < st.parallelism; i++ {
			total++
			sc := &Subtask{ctx: ctx, job: j, st: st, subtask: i, par: st.parallelism}
			tasks.Add(1)
			go func() {
				defer tasks.Done()
				if err := runSubtask(sc); err != nil {
					cancel(err) // the first cancel's cause is the attempt's error
				}
			}()
		}
	}
	done := make(chan error, 1)
	go func() { done <- j.coordinate(ctx, total) }()
	var coordErr error
	select {
	case coordErr = <-done:
		if coordErr != nil {
			cancel(coordErr)
		}
	case <-ctx.Done():
	}
	tasks.Wait()
	if coordErr == nil && ctx.Err() != nil {
		// A subtask failed, or the caller cancelled; let the coordinator stop.
		coordErr = <-done
	}
	j.finishPrunes(PruneGrace)
	j.wg.Wait()
	// The first failure cancelled the attempt with itself as the cause:
	// it is the root cause, whatever the others then saw (a subtask
	// stopped by the cancellation reports only "context canceled").
	if cause := context.Cause(ctx); cause != nil {
		if parent.Err() != nil && errors.Is(cause, context.Canceled) {
			return parent.Err()
		}
		return cause
	}
	return coordErr
}

// finishPrunes waits up to grace for the retention goroutine, then cancels
// it (saying so) and waits for it to return.
func (j *Job) finishPrunes(grace time.Duration) {
	done := make(chan struct{})
	go func() {
		j.prunes.Wait()
		close(done)
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	if j.pruneCtx.Err() == nil {
		j.env.cfg.Logger.Warn("the job is done; cleaning up after a checkpoint did not finish in time and was cut short: the next run's first checkpoint deletes the rest",
			"checkpoint", j.pruneID.Load(), "grace", grace)
	}
	j.stopPrune()
	<-done
}

// runSubtask builds a subtask's operator chain and runs its loop.
// A panic in user code fails the attempt like an error, so the restart
// strategy applies.
func runSubtask(sc *Subtask) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errs.Kind(errs.UserFunction, fmt.Errorf("eddy: stage %d subtask %d panicked: %v\n%s", sc.st.id, sc.subtask, r, debug.Stack()), false)
		}
	}()
	if sc.st.source != nil {
		return sc.st.source.run(sc)
	}
	process, err := sc.st.receive(sc)
	if err != nil {
		return err
	}
	return sc.runReceiver(process)
}

// pendingCheckpoint collects acks for one checkpoint.
type pendingCheckpoint struct {
	id      uint64
	final   bool
	started time.Time
	syncDur time.Duration // the longest synchronous part of a subtask
	acks    []ack
	last    AckTiming // of the acknowledgement that completed it
}

// coordinate triggers checkpoints, collects acks, writes manifests and
// commits sinks. It returns nil once the final checkpoint of a bounded job is
// complete, or an error.
func (j *Job) coordinate(ctx context.Context, totalTasks int) error {
	e := j.env
	nextID := j.nextID
	var tick <-chan time.Time
	if e.cfg.Interval > 0 {
		t := time.NewTicker(e.cfg.Interval)
		defer t.Stop()
		tick = t.C
	}
	totalSources := 0
	for _, s := range e.sources {
		totalSources += s.st.parallelism
	}
	finishedSources := 0
	var inflight *pendingCheckpoint
	// Sink transactions pre-committed by checkpoints not yet complete,
	// including aborted ones: their records precede later barriers.
	pendingTxns := map[string][]manifest.Txn{}
	timeout := time.NewTimer(time.Hour)
	defer timeout.Stop()

	start := func(final bool) {
		inflight = &pendingCheckpoint{id: nextID, final: final, started: time.Now()}
		nextID++
		j.building.Store(nextID)
		timeout.Reset(e.cfg.Timeout)
		for _, ts := range j.triggers {
			for _, ch := range ts {
				// A trigger the source has not taken yet (its checkpoint
				// timed out or failed) is replaced: every source injects
				// the newest id, and receivers give up an alignment on
				// a newer barrier.
				select {
				case <-ch:
				default:
				}
				ch <- trigger{id: inflight.id, final: final}
			}
		}
	}
	// failed counts a failed checkpoint: past the tolerated number in a
	// row, the job fails with it (a full disk does not heal by taking
	// more checkpoints, and their pending output piles up).
	failures := 0
	failed := func(err error) error {
		failures++
		if tol := e.cfg.TolerableFailures; tol >= 0 && failures > tol {
			return fmt.Errorf("eddy: %d checkpoints in a row failed (%d tolerated); the last: %w", failures, tol, err)
		}
		return nil
	}
	// retryFinal starts the final checkpoint once a checkpoint in flight
	// when the last source finished has failed: no tick triggers one then.
	retryFinal := func() {
		if finishedSources == totalSources && inflight == nil {
			start(true)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			if inflight == nil && finishedSources < totalSources {
				start(false)
			}
		case <-j.finished:
			finishedSources++
			if finishedSources == totalSources && inflight == nil {
				start(true)
			}
		case <-timeout.C:
			if inflight != nil {
				e.cfg.Logger.Warn("checkpoint timed out; aborting it", "checkpoint", inflight.id, "timeout", e.cfg.Timeout)
				if inflight.final {
					return fmt.Errorf("eddy: the final checkpoint %d timed out", inflight.id)
				}
				if err := failed(fmt.Errorf("checkpoint %d timed out after %v", inflight.id, e.cfg.Timeout)); err != nil {
					return err
				}
				inflight = nil
				retryFinal()
			}
		case a := <-j.acks:
			for name, t := range a.SinkTxns {
				pendingTxns[name] = append(pendingTxns[name], manifest.Txn{ID: a.ID, Data: t})
			}
			if a.Err != nil {
				if a.Fatal {
					return fmt.Errorf("eddy: checkpoint %d: %w", a.ID, a.Err)
				}
				// A failed upload fails this checkpoint, not the job: the
				// next one is triggered on schedule.
				e.cfg.Logger.Warn("checkpoint failed", "checkpoint", a.ID, "stage", a.Stage, "subtask", a.Subtask, "err", a.Err)
				if inflight != nil && inflight.id == a.ID {
					if inflight.final {
						return fmt.Errorf("eddy: the final checkpoint %d failed: %w", a.ID, a.Err)
					}
					if err := failed(fmt.Errorf("checkpoint %d: %w", a.ID, a.Err)); err != nil {
						return err
					}
					inflight = nil
					timeout.Reset(time.Hour)
					retryFinal()
				}
				continue
			}
			if inflight == nil || a.ID != inflight.id {
				continue // an aborted checkpoint
			}
			if a.SyncDur > inflight.syncDur {
				inflight.syncDur = a.SyncDur
			}
			inflight.acks = append(inflight.acks, a)
			if len(inflight.acks) < totalTasks {
				continue
			}
			inflight.last = AckTiming{Stage: a.Stage, Subtask: a.Subtask, Barrier: a.Barrier.Sub(inflight.started),
				Sync: a.SyncDur, Async: time.Since(a.Barrier) - a.SyncDur}
			c := inflight
			inflight = nil
			timeout.Reset(time.Hour)
			r := manifest.Assemble(c.id, e.cfg.Job, time.Now().UnixNano(), e.cfg.MaxParallelism, c.acks, pendingTxns)
			m, commits := r.Manifest, r.Commits
			m.Fingerprint = e.cfg.Fingerprint
			bytes, entries, uploaded, full := r.Bytes, r.Entries, r.Uploaded, r.Full
			writeStart := time.Now()
			if j.lease != nil {
				// Another process may have taken the storage over (its
				// lock was removed): stop without committing.
				if err := j.lease.Check(); err != nil {
					return errs.Kind(errs.Fenced, fmt.Errorf("eddy: checkpoint %d: %w", c.id, err), true)
				}
			}
			if j.storage != nil {
				// A manifest write is retried a few times: a lost final
				// checkpoint cannot be taken again without a restart.
				var err error
				for try := 0; try < 4; try++ {
					if err = j.storage.Write(ctx, m); err == nil || ctx.Err() != nil {
						break
					}
					time.Sleep(time.Duration(50<<try) * time.Millisecond)
				}
				if err == nil && j.pruneID.Load() == 0 {
					// Retention runs in the background, one at a time: the
					// checkpoint is complete once its manifest is written.
					j.pruneID.Store(m.ID)
					j.prunes.Add(1)
					go func(m *checkpoint.Manifest) {
						defer j.prunes.Done()
						defer j.pruneID.Store(0)
						if err := j.storage.Prune(j.pruneCtx, m); err != nil && j.pruneCtx.Err() == nil {
							e.cfg.Logger.Warn("checkpoint complete; cleaning up old checkpoints failed", "checkpoint", m.ID, "err", err)
						}
					}(m)
				}
				if err != nil {
					// Write does no pruning (that runs in the background),
					// so an error means no manifest, no checkpoint: its
					// transactions wait for the next one.
					if ctx.Err() != nil {
						return ctx.Err()
					}
					if c.final {
						return errs.Kind(errs.Storage, fmt.Errorf("eddy: writing the manifest of the final checkpoint %d: %w", c.id, err), false)
					}
					e.cfg.Logger.Warn("checkpoint failed: writing its manifest", "checkpoint", c.id, "err", err)
					if err := failed(fmt.Errorf("checkpoint %d: writing its manifest: %w", c.id, err)); err != nil {
						return err
					}
					retryFinal()
					continue
				}
			}
			manifestWrite := time.Since(writeStart)
			failures = 0
			pendingTxns = r.Pending
			// The checkpoint exists; now its output becomes visible.
			for _, s := range e.sinks {
				if txns := commits[s.name]; len(txns) > 0 {
					if err := s.commit(ctx, txns); err != nil {
						return fmt.Errorf("eddy: sink %s commit of checkpoint %d: %w", s.name, c.id, err)
					}
				}
			}
			dur := time.Since(c.started)
			e.stats.checkpoints.Add(1)
			e.stats.lastDur.Store(int64(dur))
			e.stats.lastBytes.Store(bytes)
			e.stats.stateEntries.Store(entries)
			e.stats.lastUploaded.Store(bytes + uploaded)
			e.stats.lastFull.Store(full)
			if e.cfg.OnCheckpoint != nil {
				e.cfg.OnCheckpoint(CheckpointStats{ID: c.id, Duration: dur, SyncDuration: c.syncDur, Bytes: bytes + uploaded, FullSize: full, StateEntries: entries, Final: c.final,
					Last: c.last, ManifestWrite: manifestWrite, MaterializationStall: time.Duration(e.stats.stallSinceCheckpoint.Swap(0))})
			}
			if c.final {
				return nil
			}
			if finishedSources == totalSources {
				start(true)
			}
		}
	}
}
