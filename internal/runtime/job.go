package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/internal/changelog"
	"github.com/eddyflow/eddy/internal/coord"
	"github.com/eddyflow/eddy/internal/errs"
	"github.com/eddyflow/eddy/internal/graph"
	"github.com/eddyflow/eddy/internal/inbox"
	"github.com/eddyflow/eddy/internal/manifest"
	"github.com/eddyflow/eddy/internal/shuffle"
	"github.com/eddyflow/eddy/internal/snapshot"
	"github.com/eddyflow/eddy/internal/source"
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
	inboxes    map[*Stage][]*inbox.Inbox[shuffle.Msg] // of each subtask of each Stage fed by a shuffle
	triggers   [][]chan source.Trigger                // [source][subtask]
	wmSlots    [][]atomic.Int64                       // [source][subtask] watermarks, for alignment
	dlog       *dstl.Log                              // the changelog's durable short-term log, if on
	partHedger *blob.Hedger                           // when to hedge a materialization part's upload, learned from the parts before
	readHedger *blob.Hedger                           // when to hedge a restore's read of a log object, learned from the reads before
	partReader *blob.Hedger                           // the same for materialized parts: megabytes, not the log's kilobytes, so learned apart
	logShared  *dstl.Shared                           // the restored log's objects, fetched once for all subtasks
	runID      string                                 // names this attempt's state parts, log writers and objects
	building   atomic.Uint64                          // id of the checkpoint now being built
	acks       chan ack
	finished   chan struct{}
	wg         sync.WaitGroup
	pruneCtx   context.Context    // the retention goroutines' context: the attempt's, cut short at its end
	stopPrune  context.CancelFunc // cancels pruneCtx
	prunes     sync.WaitGroup     // retention goroutines
	pruneID    atomic.Uint64      // the checkpoint whose retention runs now, 0 if none: one runs at a time
	pebble     *pebbleAttempt     // the attempt's Pebble databases, with the Pebble state backend
	unstarted  atomic.Int64       // subtasks that have not restored their state and started yet
	allStarted chan struct{}      // closed once every subtask has started
}

// newRunID returns a token that names one attempt's state parts, log
// writers and objects apart from every other attempt's.
func newRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
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
	// The attempt runs from here: restoring, until every subtask runs.
	e.metrics.started.Store(0)
	e.metrics.attempt.Add(1)
	e.metrics.running.Store(true)
	defer e.metrics.running.Store(false)
	pruneCtx, stopPrune := context.WithCancel(ctx)
	defer stopPrune()
	j := &Job{runID: newRunID(), lease: lease, pruneCtx: pruneCtx, stopPrune: stopPrune, env: e, storage: storage, blobs: blobs, nextID: 1, inboxes: map[*Stage][]*inbox.Inbox[shuffle.Msg]{},
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
		// Checkpoints a stopped writer had in flight are made void before
		// the sinks abort their pending output: a manifest write of one
		// may still land.
		var restoredID uint64
		if m != nil {
			restoredID = m.ID
		}
		void, err := storage.VoidInFlight(ctx, restoredID)
		if err != nil {
			return errs.Kind(errs.Storage, fmt.Errorf("eddy: %w", err), false)
		}
		if len(void) > 0 {
			e.cfg.Logger.Info("checkpoints in flight when their writer stopped are void", "checkpoints", idRuns(void))
		}
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
	if e.pebble != nil {
		j.pebble = &pebbleAttempt{run: e.pebble, dir: filepath.Join(e.pebble.dir, j.runID)}
		// Deferred: runs once the subtasks and uploads are done.
		defer j.pebble.end(e.metrics)
	}
	if cfg := e.cfg.Changelog; cfg != nil && j.blobs != nil {
		var err error
		if j.dlog, j.partHedger, err = changelog.OpenLog(j.blobs, cfg, j.building.Load, j.runID); err != nil {
			return err
		}
	}
	if j.dlog != nil {
		e.metrics.attachLog(j.dlog)
		defer e.metrics.detachLog(j.dlog) // after Close: its last uploads count
		defer j.dlog.Close()
	}
	e.stats.recovery.Store(0)
	e.stats.restoredLocal.Store(0)
	e.stats.restoredDownloaded.Store(0)
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
		inputs := st.layoutInputs()
		if inputs == 0 {
			continue
		}
		ibs := make([]*inbox.Inbox[shuffle.Msg], st.parallelism)
		for b := range ibs {
			ibs[b] = inbox.New[shuffle.Msg](inputs, j.env.cfg.ChannelBatches)
		}
		j.inboxes[st] = ibs
	}
	j.triggers = make([][]chan source.Trigger, len(e.sources))
	j.wmSlots = make([][]atomic.Int64, len(e.sources))
	for i, s := range e.sources {
		j.wmSlots[i] = source.NewSlots(s.st.parallelism)
		j.triggers[i] = make([]chan source.Trigger, s.st.parallelism)
		for k := range j.triggers[i] {
			j.triggers[i][k] = make(chan source.Trigger, 1)
		}
	}
	var tasks sync.WaitGroup
	total := 0
	for _, st := range e.stages {
		total += st.parallelism
	}
	j.allStarted = make(chan struct{})
	j.unstarted.Store(int64(total))
	for _, st := range e.stages {
		for i := 0; i < st.parallelism; i++ {
			sc := &Subtask{ctx: ctx, job: j, st: st, subtask: i, par: st.parallelism, acker: snapshot.NewAcker(j.sendAck, &j.wg)}
			tasks.Add(1)
			go func() {
				defer tasks.Done()
				if err := runSubtask(sc); err != nil {
					cancel(err) // the first cancel's cause is the attempt's error
				}
			}()
		}
	}
	totalSources := 0
	for _, s := range e.sources {
		totalSources += s.st.parallelism
	}
	ccfg := coord.Config{FirstID: j.nextID, Timeout: e.cfg.Timeout, Tolerable: e.cfg.TolerableFailures,
		Acks: total, Sources: totalSources, Logger: e.cfg.Logger, OnFailed: e.metrics.checkpointFailed, Savepoints: e.cfg.Savepoints}
	if e.cfg.Interval > 0 {
		ccfg.Tick = j.ticks(ctx, e.cfg.Interval)
	}
	if j.storage != nil && j.storage.LateWrites() {
		// On an object store every id is reserved before its checkpoint
		// starts, so that a restore makes void whatever this run had in
		// flight when it stopped, even with nothing of it listed yet.
		var reserved uint64
		ccfg.Reserve = func(ctx context.Context, id uint64) error {
			if id <= reserved {
				return nil
			}
			last, err := j.storage.Reserve(ctx, id)
			if err != nil {
				return errs.Kind(errs.Storage, err, false)
			}
			reserved = last
			return nil
		}
	}
	done := make(chan error, 1)
	go func() { done <- coord.New(j, ccfg).Run(ctx, j.acks, j.finished) }()
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
	sc.startClock()
	if sc.st.source != nil {
		return sc.st.source.run(sc)
	}
	// One handler per input edge; inputs is, per inbox input, its edge's.
	var handlers []func(batch any, mark func(wm int64) error) error
	var inputs []int
	for i, e := range sc.st.inputs {
		h, err := e.receive(sc)
		if err != nil {
			return err
		}
		handlers = append(handlers, h)
		for range e.from.parallelism {
			inputs = append(inputs, i)
		}
	}
	sc.running() // its keyed state is restored
	return sc.runReceiver(func(from int, batch any, mark func(wm int64) error) error {
		return handlers[inputs[from]](batch, mark)
	})
}

// ticks returns the coordinator's ticks, every interval from the time
// every subtask has restored its state and started, until ctx ends. A
// checkpoint triggered earlier would only wait for the restore (minutes
// for a large state), and could time out and count as a failure. A tick
// the coordinator is too busy to take is dropped, as a time.Ticker's is.
func (j *Job) ticks(ctx context.Context, interval time.Duration) <-chan time.Time {
	out := make(chan time.Time)
	go func() {
		select {
		case <-j.allStarted:
		case <-ctx.Done():
			return
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				select {
				case out <- now:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// idRuns writes ascending ids as runs: "3, 5-9".
func idRuns(ids []uint64) string {
	var b strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		if j == i {
			fmt.Fprintf(&b, "%d", ids[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", ids[i], ids[j])
		}
		i = j + 1
	}
	return b.String()
}

// Trigger implements coord.Task: every source subtask injects the barrier
// of checkpoint id.
func (j *Job) Trigger(id uint64, final bool) {
	j.building.Store(id + 1)
	for _, ts := range j.triggers {
		for _, ch := range ts {
			// A trigger the source has not taken yet (its checkpoint
			// timed out or failed) is replaced: every source injects the
			// newest id, and receivers give up an alignment on a newer
			// barrier.
			select {
			case <-ch:
			default:
			}
			ch <- source.Trigger{ID: id, Final: final}
		}
	}
}

// Complete implements coord.Task: it assembles the checkpoint's manifest,
// writes it (unless the storage lock was lost), starts the retention of
// older checkpoints, commits the sinks and reports the checkpoint.
func (j *Job) Complete(ctx context.Context, c *coord.Checkpoint) (map[string][]manifest.Txn, error) {
	e := j.env
	a := c.Last
	last := AckTiming{Stage: a.Stage, Subtask: a.Subtask, Barrier: a.Barrier.Sub(c.Started),
		Sync: a.SyncDur, Async: time.Since(a.Barrier) - a.SyncDur}
	r := manifest.Assemble(c.ID, e.cfg.Job, time.Now().UnixNano(), e.cfg.MaxParallelism, c.Acks, c.Pending)
	m, commits := r.Manifest, r.Commits
	m.Fingerprint = e.cfg.Fingerprint
	bytes, entries, uploaded, full := r.Bytes, r.Entries, r.Uploaded, r.Full
	writeStart := time.Now()
	// Another process may have taken the storage over (its lock was
	// removed, or it claimed the store): stop without writing.
	if err := j.checkLease(c.ID, "before writing its manifest"); err != nil {
		return nil, err
	}
	if j.storage != nil {
		// A manifest write is retried a few times: a lost final checkpoint
		// cannot be taken again without a restart.
		var err error
		for try := 0; try < 4; try++ {
			if err = j.storage.Write(ctx, m); err == nil || ctx.Err() != nil || errors.Is(err, checkpoint.ErrTaken) {
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
			// Write does no pruning (that runs in the background), so an
			// error means no manifest, no checkpoint: its transactions
			// wait for the next one.
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, checkpoint.ErrTaken) {
				// Another writer has this id. If it took the storage over,
				// the lease says so; if it is a writer this process fenced
				// that has not stopped yet, this checkpoint fails and the
				// next id is tried. Without a lease there is no telling
				// which: two writers, stop loudly.
				if j.lease == nil {
					return nil, errs.Kind(errs.Fenced, fmt.Errorf("eddy: checkpoint %d: %w", c.ID, err), true)
				}
				if lerr := j.checkLease(c.ID, "after another writer created its manifest"); lerr != nil {
					return nil, lerr
				}
				// Still the holder: the manifest is a fenced writer's,
				// whose output was never committed and whose state is not
				// this run's lineage. A fallback must never restore it.
				if qerr := j.storage.Quarantine(ctx, c.ID, "its manifest was written by a writer this process fenced"); qerr != nil {
					e.cfg.Logger.Warn("could not quarantine a fenced writer's checkpoint", "checkpoint", c.ID, "err", qerr)
				}
			}
			if c.Final {
				return nil, errs.Kind(errs.Storage, fmt.Errorf("eddy: writing the manifest of the final checkpoint %d: %w", c.ID, err), false)
			}
			e.cfg.Logger.Warn("checkpoint failed: writing its manifest", "checkpoint", c.ID, "err", err)
			return nil, coord.Failed(fmt.Errorf("checkpoint %d: writing its manifest: %w", c.ID, err))
		}
	}
	if c.Savepoint {
		// The checkpoint exists either way; only the savepoint can fail.
		if j.storage == nil {
			c.SavepointErr = errors.New("the job keeps no checkpoints (eddy.Checkpoints)")
		} else if err := j.storage.Retain(ctx, m.ID); err != nil {
			c.SavepointErr = err
			e.cfg.Logger.Warn("checkpoint complete, but retaining it as a savepoint failed", "checkpoint", m.ID, "err", err)
		} else {
			e.cfg.Logger.Info("savepoint taken", "checkpoint", m.ID)
		}
	}
	manifestWrite := time.Since(writeStart)
	// A process that claimed the storage after the check above has read
	// it without this manifest, or with it: committing now could repeat
	// its output, so the lease is checked again between the manifest and
	// the commit. The manifest stays; whoever restores it commits it.
	// With nothing to commit there is nothing to repeat, and no check
	// (on an object store, a LIST).
	if cl, ok := j.lease.(blob.CommitLease); ok && j.storage != nil {
		// A lease that records each checkpoint does so here, with or
		// without output: the record is what lets this owner commit the
		// checkpoint's output (a restore still chooses among the
		// manifests; one whose record a newer claim took is committed by
		// whoever restores it, as above).
		if err := j.leaseErr(c.ID, "committing it", cl.CommitCheckpoint(ctx, c.ID)); err != nil {
			return nil, err
		}
	} else if j.storage != nil && anyTxns(commits) {
		if err := j.checkLease(c.ID, "before committing its output"); err != nil {
			return nil, err
		}
	}
	// The checkpoint exists; now its output becomes visible.
	for _, s := range e.sinks {
		if txns := commits[s.name]; len(txns) > 0 {
			began := time.Now()
			if err := s.commit(ctx, txns); err != nil {
				return nil, fmt.Errorf("eddy: sink %s commit of checkpoint %d: %w", s.name, c.ID, err)
			}
			e.metrics.sinkCommitted(s.name, time.Since(began))
		}
	}
	dur := time.Since(c.Started)
	e.stats.checkpoints.Add(1)
	if e.pebble != nil {
		e.pebble.dropLocal() // every restore that could use them is done
		j.pebble.completed(c.ID)
	}
	e.stats.lastDur.Store(int64(dur))
	e.stats.lastBytes.Store(bytes)
	e.stats.stateEntries.Store(entries)
	e.stats.lastUploaded.Store(bytes + uploaded)
	e.stats.lastFull.Store(full)
	cs := CheckpointStats{ID: c.ID, Completed: time.Now(), Duration: dur, SyncDuration: c.SyncDur, Bytes: bytes + uploaded, FullSize: full, StateEntries: entries, Final: c.Final,
		Last: last, ManifestWrite: manifestWrite, MaterializationStall: time.Duration(e.stats.stallSinceCheckpoint.Swap(0))}
	e.metrics.checkpointCompleted(cs)
	if e.cfg.OnCheckpoint != nil {
		e.cfg.OnCheckpoint(cs)
	}
	return r.Pending, nil
}

// anyTxns reports whether commits holds a transaction to commit.
func anyTxns(commits map[string][][]byte) bool {
	for _, txns := range commits {
		if len(txns) > 0 {
			return true
		}
	}
	return false
}

// checkLease checks the job's hold on its storage at a step of checkpoint
// id's completion. A lost hold is a permanent Fenced error: another
// process writes the storage now. A check that could not tell
// (blob.ErrLeaseUnknown) fails this checkpoint only.
func (j *Job) checkLease(id uint64, step string) error {
	if j.lease == nil {
		return nil
	}
	return j.leaseErr(id, step, j.lease.Check())
}

// leaseErr is what err, the answer of the job's lease at a step of
// checkpoint id's completion, means for the checkpoint (see checkLease).
func (j *Job) leaseErr(id uint64, step string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, blob.ErrLeaseUnknown):
		j.env.cfg.Logger.Warn("checkpoint failed: cannot check the hold on the storage", "checkpoint", id, "step", step, "err", err)
		return coord.Failed(fmt.Errorf("checkpoint %d: %s: %w", id, step, err))
	}
	return errs.Kind(errs.Fenced, fmt.Errorf("eddy: checkpoint %d, %s: %w", id, step, err), true)
}
