package eddy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/internal/admin"
	"github.com/eddyflow/eddy/internal/metrics"
	"github.com/eddyflow/eddy/internal/runtime"
)

// Metrics registers the job's Prometheus metrics in reg too, for the
// duration of Run (they are always in the job's own registry, which the
// admin endpoint serves). Jobs sharing one registerer need distinct
// JobNames: every metric is labelled job_name. See the README's
// Operations section for the metrics.
func Metrics(reg prometheus.Registerer) Option { return func(c *config) { c.registerer = reg } }

// ClaimStore makes each run of the job take its checkpoint store over
// with claim instead of a lock (a directory) or blob.Claim (an object
// store): claim is given the store and an owner string naming this
// process, and returns the run's lease, which fences the run when another
// owner takes over (Check, or CommitCheckpoint if it is a
// blob.CommitLease). Package tasks uses it for the commit chain of each
// task; a job has no need of it otherwise.
func ClaimStore(claim func(ctx context.Context, store blob.Store, owner string) (blob.Lease, error)) Option {
	return func(c *config) { c.Claim = claim }
}

// Admin serves the job's admin endpoint on addr while Run runs: /metrics,
// /healthz, /readyz, the JSON API (/api/job, /api/checkpoints), a web page
// at / and /debug/pprof/. addr must be a loopback address
// ("127.0.0.1:8081", "localhost:0") unless AdminAllowRemote is passed;
// port 0 picks a free port (see Env.AdminAddr). Run fails if addr cannot
// be bound.
func Admin(addr string, opts ...AdminOption) Option {
	return func(c *config) {
		c.admin = &adminConfig{addr: addr}
		for _, o := range opts {
			o(c.admin)
		}
	}
}

// AdminOption configures Admin.
type AdminOption func(*adminConfig)

// AdminAllowRemote lets Admin bind an address that is not a loopback one
// ("0.0.0.0:8081", ":8081"). The endpoint has no authentication: put it
// behind something that has.
func AdminAllowRemote() AdminOption { return func(a *adminConfig) { a.allowRemote = true } }

type adminConfig struct {
	addr        string
	allowRemote bool
}

// opsState is the Env's operational state while it runs: its metrics and admin
// endpoint.
type opsState struct {
	mu        sync.Mutex
	adminAddr string
	listening chan struct{}           // closed once the admin endpoint is bound
	stopRun   context.CancelCauseFunc // ends the running Run, nil outside it
	metrics   *runtime.Metrics        // the current or last Run's, for RestoreProgress
}

// errStoppedWithSavepoint is the cause Run's context is cancelled with by
// StopWithSavepoint; Run then returns nil.
var errStoppedWithSavepoint = errors.New("eddy: stopped with a savepoint")

// StopWithSavepoint takes a savepoint of the running job (as Savepoint)
// and then stops it: Run returns nil without committing anything after
// the newest checkpoint, which is the savepoint or, if one completed in
// between, a later checkpoint; a later Run resumes from it with exactly
// once output. It returns the savepoint's id. If the savepoint fails, the
// job keeps running.
func (e *Env) StopWithSavepoint(ctx context.Context) (uint64, error) {
	return e.stopAfter(ctx, false)
}

// StopWithCheckpoint takes a checkpoint of the running job now and then
// stops it, as StopWithSavepoint does, but the checkpoint is not kept as
// a savepoint: retention treats it as any other. A process handing its
// work over to another (a task moving between the processes of a job)
// stops so, and the next owner resumes from it without replaying
// anything. It returns the checkpoint's id. If the checkpoint fails, the
// job keeps running.
func (e *Env) StopWithCheckpoint(ctx context.Context) (uint64, error) {
	return e.stopAfter(ctx, true)
}

func (e *Env) stopAfter(ctx context.Context, plain bool) (uint64, error) {
	id, err := e.checkpointNow(ctx, plain)
	if err != nil {
		return 0, err
	}
	e.svc.mu.Lock()
	stop := e.svc.stopRun
	e.svc.mu.Unlock()
	if stop == nil {
		return id, errors.New("eddy: stop: the job is not running")
	}
	stop(errStoppedWithSavepoint)
	return id, nil
}

// Savepoint takes a savepoint of the running job: a checkpoint triggered
// now (or once the one in flight is done) that retention then keeps, with
// every file it uses, whatever RetainCheckpoints says, until its marker
// (savepoints/<id> in the checkpoint store) is deleted. It returns the
// checkpoint's id once the checkpoint is complete; before Run runs, it
// waits (for ctx). A job restores the newest checkpoint, so a savepoint is
// restored when it is the newest; restoring an older one on purpose is not
// supported yet.
func (e *Env) Savepoint(ctx context.Context) (uint64, error) {
	return e.checkpointNow(ctx, false)
}

// checkpointNow triggers a checkpoint now (or once the one in flight is
// done) and returns its id once it is complete; unless plain, retention
// keeps it as a savepoint.
func (e *Env) checkpointNow(ctx context.Context, plain bool) (uint64, error) {
	what := "savepoint"
	if plain {
		what = "checkpoint"
	}
	if e.cfg.StorageURL == "" && e.cfg.Store == nil {
		return 0, fmt.Errorf("eddy: %s: the job keeps no checkpoints (eddy.Checkpoints)", what)
	}
	done := make(chan runtime.SavepointResult, 1)
	select {
	case e.savepoints <- runtime.SavepointRequest{Done: done, Plain: plain}:
	case <-ctx.Done():
		return 0, fmt.Errorf("eddy: %s: the job did not take the request: %w", what, context.Cause(ctx))
	}
	select {
	case r := <-done:
		if r.Err != nil {
			return 0, fmt.Errorf("eddy: %s: %w", what, r.Err)
		}
		return r.ID, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("eddy: %s: not complete yet (it may still complete): %w", what, context.Cause(ctx))
	}
}

// AdminAddr returns the address the admin endpoint is bound to ("" until
// Run has bound it, and without Admin).
func (e *Env) AdminAddr() string {
	e.svc.mu.Lock()
	defer e.svc.mu.Unlock()
	return e.svc.adminAddr
}

// AdminListening returns a channel closed once Run has bound the admin
// endpoint; AdminAddr then returns its address. Without Admin, or when Run
// fails before binding it, the channel is never closed.
func (e *Env) AdminListening() <-chan struct{} {
	e.svc.mu.Lock()
	defer e.svc.mu.Unlock()
	if e.svc.listening == nil {
		e.svc.listening = make(chan struct{})
	}
	return e.svc.listening
}

// startOps builds the metrics of the Run about to start, registers them and
// starts the admin endpoint; stop undoes it.
func (e *Env) startOps() (stop func(), err error) {
	m := runtime.NewMetrics(&e.graph, &e.stats)
	e.cfg.Metrics = m
	e.svc.mu.Lock()
	e.svc.metrics = m
	e.svc.mu.Unlock()
	var undo []func()
	stop = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	if e.cfg.registerer == nil && e.cfg.admin == nil {
		return stop, nil // nobody to export to: the runtime's counters suffice
	}
	col := metrics.New(e.cfg.Job, m)
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	if r := e.cfg.registerer; r != nil {
		if err := r.Register(col); err != nil {
			return stop, fmt.Errorf("eddy: registering the metrics of job %q: %w (jobs sharing a registerer need distinct eddy.JobName)", e.cfg.Job, err)
		}
		undo = append(undo, func() { r.Unregister(col) })
	}
	if a := e.cfg.admin; a != nil {
		// The process's own metrics are served next to the job's, but
		// not put into the user's registerer, which may have them.
		proc := prometheus.NewRegistry()
		proc.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		srv, err := admin.Start(admin.Config{Addr: a.addr, AllowRemote: a.allowRemote, Job: e.cfg.Job, Metrics: m,
			Gatherer: prometheus.Gatherers{reg, proc}, Logger: e.cfg.Logger, Savepoint: e.Savepoint, StopWithSavepoint: e.StopWithSavepoint})
		if err != nil {
			return stop, err
		}
		undo = append(undo, func() { _ = srv.Close() })
		e.svc.mu.Lock()
		e.svc.adminAddr = srv.Addr()
		if e.svc.listening == nil {
			e.svc.listening = make(chan struct{})
		}
		select {
		case <-e.svc.listening: // an earlier Run's
		default:
			close(e.svc.listening)
		}
		e.svc.mu.Unlock()
	}
	return stop, nil
}

// ErrAdminNotLoopback is Run's error when Admin is given an address that
// is not a loopback one and AdminAllowRemote is not.
var ErrAdminNotLoopback = admin.ErrNotLoopback

// RestoreProgress is how far the running attempt is in restoring its
// checkpoint.
type RestoreProgress struct {
	Checkpoint uint64 // the checkpoint being restored; 0: none (a fresh start)
	Restored   int    // subtasks that restored their state and run
	Subtasks   int    // subtasks of the job
	Done       bool   // every subtask restored (or the job is not running)
}

// RestoreProgress returns how far the running attempt is in restoring its
// checkpoint, for a progress display; before and after Run, Done.
func (e *Env) RestoreProgress() RestoreProgress {
	e.svc.mu.Lock()
	m := e.svc.metrics
	e.svc.mu.Unlock()
	if m == nil {
		return RestoreProgress{Done: true}
	}
	r := m.Readiness()
	return RestoreProgress{Checkpoint: uint64(e.stats.Stats().RestoredFrom), Restored: r.Started, Subtasks: r.Total,
		Done: !r.Running || r.Ready()}
}

// SourceLag returns how many records the job's sources have yet to read,
// summed over their subtasks, as the sources know it: for the Kafka
// source, each partition's high watermark at its last fetch minus the
// next offset to read (not its committed position, which trails by up to
// a checkpoint interval). The sources publish it every few batches and
// when they wait for input. known is false before Run and when no source
// knows its lag; after Run, it is the last Run's.
func (e *Env) SourceLag() (records int64, known bool) {
	e.svc.mu.Lock()
	m := e.svc.metrics
	e.svc.mu.Unlock()
	if m == nil {
		return 0, false
	}
	for _, st := range m.Stages() {
		if !st.Source {
			continue
		}
		for i := range st.Parallelism {
			if lag := m.Subtask(st.ID, i).SourceLag.Load(); lag != math.MinInt64 {
				records, known = records+lag, true
			}
		}
	}
	return records, known
}
