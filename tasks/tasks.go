package tasks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/internal/group"
)

// Config is what the processes of one job share, and this process's own
// settings.
type Config struct {
	Job     string   // the job's name, the same in every process: names its group
	Brokers []string // Kafka seed brokers
	Topic   string   // the input topic: task t reads its partition t
	// Store is the job's checkpoint store, shared by its processes: task
	// t checkpoints into its sub-store "tasks/<t>/". It must create
	// objects conditionally (blob.Creator: the file store and S3 do).
	Store    blob.Store
	Interval time.Duration // each task's checkpoint interval
	// Instance makes this process a static member of the group (see
	// group.Config.Instance): restarted with the same Instance within the
	// session timeout, it gets its tasks back. Optional.
	Instance string
	// SessionTimeout, HeartbeatInterval, RebalanceTimeout and
	// HandoverTimeout are those of group.Config (defaults 45 s, a tenth of
	// the session timeout up to 3 s, 60 s and half the rebalance timeout);
	// a handover is a checkpoint of each task moving away.
	SessionTimeout, HeartbeatInterval, RebalanceTimeout, HandoverTimeout time.Duration
	// Options are more options of every task's Env (parallelism, state
	// backend, logging); Run puts each task's JobName, CheckpointStore and
	// claim after them. Options that belong to one process, not to each
	// task (eddy.Admin, eddy.Metrics, eddy.RestoreCheckpoint), do not
	// belong here. The tasks share what the options hold: a writer given
	// to eddy.LogOutput is written by every task at once, so it must be
	// safe for concurrent use (os.Stderr is).
	Options []eddy.Option
	// Log receives a line each time a task starts, is handed over, is
	// lost, ends or fails, and the group's own log lines. Nil: discarded.
	Log io.Writer
	// Rejoin keeps the process in the job after it was fenced: a task of
	// it fenced by a newer owner, or tasks lost because the group took
	// them while the process was out of it (a pause past the session
	// timeout, a partition from the brokers). Without Rejoin (the
	// default), Run then hands the process's other tasks over and returns
	// the fencing error, which matches eddy.ErrFenced: the process was a
	// zombie, and its supervisor decides whether to start it again. With
	// Rejoin, those tasks stop and the process stays a member, taking
	// whatever tasks the group gives it next.
	Rejoin bool
	// Metrics, when set, receives the process's metrics of its tasks
	// while Run runs (eddy_tasks_*: tasks owned, their lag, rebalances,
	// handovers, tasks lost; see metrics.go), and each task's Env's own
	// metrics (eddy.Metrics), labelled job_name "<Job>.t<task>".
	// Optional.
	Metrics prometheus.Registerer
}

// Build adds task t's graph to env: a source of partition t.ID of the
// input topic (kafka.Partitions(t.ID)) and the task's operators and sinks.
// Kafka sinks must be named apart per task (kafka.SinkName(t.SinkName(
// topic))): their transactional ids come from the name. Keys partitioned
// otherwise than the input move between tasks through KeyBy of this
// package.
type Build func(env *eddy.Env, t Task) error

// Task is what Build needs to know of the task it builds.
type Task struct {
	ID         int32    // the task: partition ID of the input topic
	Job        string   // the job's name (Config.Job)
	Brokers    []string // Kafka seed brokers (Config.Brokers)
	Partitions int32    // of the input topic: the number of tasks
}

// SinkName is the name of the task's sink writing topic (see the
// package-level SinkName).
func (t Task) SinkName(topic string) string { return SinkName(t.Job, t.ID, topic) }

// SinkName is the name of a task's sink writing topic: unique to the job,
// the task and the topic, so each task has Kafka transactional ids of its
// own.
func SinkName(job string, task int32, topic string) string {
	return fmt.Sprintf("%s.t%d.%s", job, task, topic)
}

func (cfg Config) task(id, partitions int32) Task {
	return Task{ID: id, Job: cfg.Job, Brokers: cfg.Brokers, Partitions: partitions}
}

// StorePrefix is the prefix of task's sub-store in the job's store.
func StorePrefix(task int32) string { return fmt.Sprintf("tasks/%d/", task) }

// ErrTaskFailed is matched by Run's error when a task of this process
// failed for good (its Env's restarts were used up): Run stops, handing
// the other tasks over, and the process should exit with the error; the
// group then gives the task to another process, where it fails the same
// way if the cause is in the task, not in this process.
var ErrTaskFailed = errors.New("a task failed")

// Run joins the job's group and runs the tasks the group assigns to this
// process until ctx ends, then hands every task over and leaves the group
// (a planned stop: the next owners replay nothing). It returns nil after
// ctx ended, or the first error: the group's (the brokers, the topic), a
// task's that failed for good (ErrTaskFailed), or, unless cfg.Rejoin, the
// fencing of this process (eddy.ErrFenced: see Config.Rejoin).
func Run(ctx context.Context, cfg Config, build Build) error {
	if cfg.Store == nil {
		return errors.New("tasks: no checkpoint store")
	}
	if _, ok := cfg.Store.(blob.Creator); !ok {
		return fmt.Errorf("tasks: the checkpoint store %v cannot create objects conditionally; the owners of a task could not fence each other", cfg.Store)
	}
	if cfg.Interval <= 0 {
		return errors.New("tasks: no checkpoint interval")
	}
	n, err := partitionCount(ctx, cfg)
	if err == nil {
		err = checkTopology(ctx, cfg, n, build)
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, group.ErrTopologyMismatch) {
			return nil // stopped before it joined
		}
		return err
	}
	r := &runner{cfg: cfg, build: build, partitions: n, log: cfg.Log, running: map[int32]*task{}, failed: make(chan error, 1)}
	if r.log == nil {
		r.log = io.Discard
	}
	r.m = newMetrics(r)
	if reg := cfg.Metrics; reg != nil {
		if err := reg.Register(r.m); err != nil {
			return fmt.Errorf("tasks: registering the metrics of job %q: %w", cfg.Job, err)
		}
		defer reg.Unregister(r.m)
	}
	m, err := group.Join(ctx, group.Config{
		Brokers: cfg.Brokers, Job: cfg.Job, Topic: cfg.Topic, Instance: cfg.Instance,
		SessionTimeout: cfg.SessionTimeout, HeartbeatInterval: cfg.HeartbeatInterval,
		RebalanceTimeout: cfg.RebalanceTimeout, HandoverTimeout: cfg.HandoverTimeout,
		Assigned: r.assigned, Revoked: r.revoked, Lost: r.lost, Rebalanced: r.m.rebalanced,
		Logf: func(format string, args ...any) { r.logf("group: "+format, args...) },
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it joined: it owns nothing
		}
		return err
	}
	r.member.Store(m)
	var runErr error
	if m.Tasks() != n {
		// Partitions added between the topology check and the join: the
		// recorded topology no longer holds.
		runErr = fmt.Errorf("tasks: input topic %q has %d partitions at the join, %d when this process checked the job's topology; a job's input must keep its partition count", cfg.Topic, m.Tasks(), n)
	} else {
		select {
		case <-ctx.Done():
		case <-m.Done():
			runErr = m.Err()
		case runErr = <-r.failed:
		}
	}
	// Hand every task over and leave; bounded by the handover timeout of
	// each revocation, and the group's own.
	closeCtx, cancel := context.WithTimeout(context.Background(), 2*max(cfg.RebalanceTimeout, 60*time.Second))
	defer cancel()
	r.handoverFailed.Store(false) // what counts is the handovers of this stop
	if err := m.Close(closeCtx); err != nil && runErr == nil {
		if errors.Is(err, group.ErrLeave) && !r.handoverFailed.Load() {
			// Every task was handed over or had stopped: only the
			// goodbye to the group was lost, which its session timeout
			// makes up for.
			r.logf("leaving the group: %v (the group drops this process when its session times out)", err)
		} else {
			runErr = err
		}
	}
	r.stopAll() // what a failed handover left running
	return runErr
}

// runner runs this process's tasks.
type runner struct {
	cfg        Config
	build      Build
	partitions int32 // of the input topic
	member     atomic.Pointer[group.Member]
	// handoverFailed is set once a handover failed (Revoked's error).
	handoverFailed atomic.Bool
	log            io.Writer
	logMu          sync.Mutex
	mu             sync.Mutex
	running        map[int32]*task
	failed         chan error // the first task that failed for good
	m              *metrics
}

// task is one running task.
type task struct {
	id     int32
	envMu  sync.Mutex
	env    *eddy.Env // the current run's (see reclaim)
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // Run's, once done
	// stopping is set before the task is stopped on purpose (a handover):
	// its Run returning then is not the end of its input.
	stopping atomic.Bool
}

// Reclaims: a task fenced while the group still gives it to this process
// was claimed by a process that is out of the group and does not know it
// yet (a zombie whose claim was in flight when it paused): the group
// revokes a task from its owner before it gives it to another member. So
// a fenced task asks the group's coordinator (group.Member.Holds) whether
// the task is this member's, every reclaimDelay, a few times: if it is,
// it claims its chain again; if not, this process is the one out of date
// (its session expired, or the task is moving), and the task stops. At
// most maxReclaims claims in a row (a run that completes a checkpoint ends
// the row); a task fenced more often makes Run fail, whatever
// Config.Rejoin says: leaving the group is what gives the task to another
// process.
const (
	maxReclaims = 5
	holdPolls   = 10
)

// reclaimDelay is the wait before a fenced task claims again.
func (cfg Config) reclaimDelay() time.Duration {
	hb := cfg.HeartbeatInterval
	if hb <= 0 {
		session := cfg.SessionTimeout
		if session <= 0 {
			session = 45 * time.Second
		}
		hb = min(session/10, 3*time.Second)
	}
	return 2 * hb
}

func (r *runner) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintf(r.log, time.Now().Format("15:04:05.000")+" "+format+"\n", args...)
}

// assigned starts the tasks the group gave this process.
func (r *runner) assigned(ids []int32) {
	for _, id := range ids {
		if id >= r.partitions {
			r.fail(fmt.Errorf("tasks: the group assigned task %d, but input topic %q had %d partitions when this process checked the job's topology; a job's input must keep its partition count", id, r.cfg.Topic, r.partitions))
			continue
		}
		if err := r.start(id); err != nil {
			r.fail(fmt.Errorf("tasks: task %d: %w: %w", id, ErrTaskFailed, err))
		}
	}
}

// newEnv builds a run of task id.
func (r *runner) newEnv(id int32) (*eddy.Env, error) {
	store, err := blob.Sub(r.cfg.Store, StorePrefix(id))
	if err != nil {
		return nil, err
	}
	// The task's own options last, so that none of cfg.Options can give
	// the tasks one name or one checkpoint lineage.
	opts := append(slices.Clone(r.cfg.Options), eddy.JobName(fmt.Sprintf("%s.t%d", r.cfg.Job, id)),
		eddy.CheckpointStore(store, r.cfg.Interval), claimTask(r.cfg.Store, id))
	if r.cfg.Metrics != nil {
		opts = append(opts, eddy.Metrics(r.cfg.Metrics))
	}
	env := eddy.New(opts...)
	if err := r.build(env, r.cfg.task(id, r.partitions)); err != nil {
		return nil, fmt.Errorf("building the job: %w", err)
	}
	return env, nil
}

// start builds and runs task id.
func (r *runner) start(id int32) error {
	env, err := r.newEnv(id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &task{id: id, env: env, cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	r.running[id] = t
	r.mu.Unlock()
	r.logf("task %d: started", id)
	go func() {
		defer close(t.done)
		defer cancel()
		t.err = env.Run(ctx)
		delay := r.cfg.reclaimDelay()
		held, known := true, true
		for n := 1; n <= maxReclaims && errors.Is(t.err, eddy.ErrFenced) && !t.stopping.Load() && ctx.Err() == nil; n++ {
			if held, known = r.holds(ctx, t, delay); !held {
				break
			}
			r.logf("task %d: fenced by a process out of the group, while the group gives the task to this one: claiming it again (%d of %d): %v",
				id, n, maxReclaims, t.err)
			next, err := r.newEnv(id)
			if err != nil {
				t.err = err
				break
			}
			// Swapped under envMu, which revoked holds to set stopping:
			// a handover either sees this run or stops it before it runs.
			t.envMu.Lock()
			if t.stopping.Load() || ctx.Err() != nil {
				t.envMu.Unlock()
				break
			}
			t.env = next
			t.envMu.Unlock()
			t.err = next.Run(ctx)
			if next.Stats().Checkpoints > 0 {
				n = 0 // it ran as the owner: the row of fencings is over
			}
		}
		switch {
		case t.stopping.Load():
		case t.err == nil:
			r.logf("task %d: ended: its input is consumed", id)
		case ctx.Err() != nil:
			// Stopped: lost, or handed over after a failed checkpoint.
		case errors.Is(t.err, eddy.ErrFenced) && !held && !known:
			// Nobody could say whose the task is: leaving the group is
			// what gives it to a process that can run it.
			r.take([]int32{id})
			r.logf("task %d: fenced, and the group's coordinator did not say whose the task is: %v", id, t.err)
			r.fail(fmt.Errorf("tasks: task %d: fenced, and the group's coordinator did not say whether the task is this process's: %w", id, t.err))
		case errors.Is(t.err, eddy.ErrFenced) && !held:
			// A newer owner has it, and the group does not give it to
			// this process: this process is the one out of date. It
			// committed nothing more, and stops.
			if len(r.take([]int32{id})) > 0 {
				r.m.lost.WithLabelValues(LostFenced).Inc()
			}
			r.logf("task %d: fenced by a newer owner, stopped: %v", id, t.err)
			if !r.cfg.Rejoin {
				r.fail(fmt.Errorf("tasks: task %d: %w", id, t.err))
			}
		case errors.Is(t.err, eddy.ErrFenced):
			// Fenced again and again while the group gives the task to
			// this process, which commits nothing more of it: leaving
			// the group gives it to another.
			r.take([]int32{id})
			r.logf("task %d: fenced %d times in a row, stopped: %v", id, maxReclaims+1, t.err)
			r.fail(fmt.Errorf("tasks: task %d: %w", id, t.err))
		default:
			r.logf("task %d: failed: %v", id, t.err)
			r.fail(fmt.Errorf("tasks: task %d: %w: %w", id, ErrTaskFailed, t.err))
		}
	}()
	return nil
}

// holds waits for the group's coordinator to say whether t is this
// member's: it asks every delay, holdPolls times at most, and stops
// asking when t is stopped (then known: it is moving away). known is
// false when no answer came: every question failed or found a rebalance.
func (r *runner) holds(ctx context.Context, t *task, delay time.Duration) (held, known bool) {
	for range holdPolls {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return false, true
		}
		if t.stopping.Load() {
			return false, true
		}
		m := r.member.Load()
		if m == nil {
			continue // still joining
		}
		qctx, cancel := context.WithTimeout(ctx, delay+5*time.Second)
		held, err := m.Holds(qctx, t.id)
		cancel()
		if err != nil {
			r.logf("task %d: asking the group whether it holds the task: %v", t.id, err)
			continue
		}
		return held, true
	}
	return false, false
}

func (r *runner) fail(err error) {
	select {
	case r.failed <- err:
	default:
	}
}

// take removes the tasks ids from the running ones and returns them.
func (r *runner) take(ids []int32) []*task {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*task
	for _, id := range ids {
		if t := r.running[id]; t != nil {
			out = append(out, t)
			delete(r.running, id)
		}
	}
	return out
}

// revoked hands the tasks over: a checkpoint of each, committed, then
// the task stops. A task that cannot take its checkpoint by ctx's end is
// cancelled (its next owner replays from its last checkpoint) and the
// handover fails.
func (r *runner) revoked(ctx context.Context, ids []int32) error {
	ts := r.take(ids)
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-t.done:
				r.logf("task %d: handed over (it had ended)", t.id)
				return
			default:
			}
			start := time.Now()
			t.envMu.Lock()
			t.stopping.Store(true)
			env := t.env
			t.envMu.Unlock()
			if p := env.RestoreProgress(); !p.Done {
				// Still restoring: it has nothing newer than the
				// checkpoint it restores, which the next owner restores
				// too, and a checkpoint would wait for the restore.
				t.cancel()
				<-t.done
				d := time.Since(start)
				r.m.handover.Observe(d.Seconds())
				r.logf("task %d: handed over during its restore in %v (%d of %d subtasks restored): nothing newer than checkpoint %d", t.id, d.Round(time.Millisecond), p.Restored, p.Subtasks, p.Checkpoint)
				return
			}
			// A run that ends without the checkpoint (it was fenced,
			// or between two runs) ends the wait for it.
			sctx, scancel := context.WithCancel(ctx)
			go func() {
				select {
				case <-t.done:
					scancel()
				case <-sctx.Done():
				}
			}()
			id, err := env.StopWithCheckpoint(sctx)
			scancel()
			select {
			case <-t.done:
				if err != nil && t.err == nil {
					// Its bounded input was read meanwhile.
					r.logf("task %d: handed over (it ended meanwhile)", t.id)
					return
				}
				if err != nil {
					// Its run had ended (fenced, or between two runs):
					// nothing newer than its last checkpoint to hand over.
					r.logf("task %d: handed over without a checkpoint: its run had ended: %v", t.id, t.err)
					return
				}
			default:
			}
			if err == nil {
				select {
				case <-t.done:
					d := time.Since(start)
					r.m.handover.Observe(d.Seconds())
					r.logf("task %d: handed over at checkpoint %d in %v", t.id, id, d.Round(time.Millisecond))
					return
				case <-ctx.Done():
					err = ctx.Err()
				}
			}
			t.cancel()
			<-t.done
			r.m.failed.Inc()
			errs[i] = fmt.Errorf("task %d: handover: %w", t.id, err)
			r.logf("task %d: handover failed, stopped without a checkpoint: %v", t.id, err)
		}()
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err != nil {
		r.handoverFailed.Store(true)
	}
	return err
}

// lost stops the tasks without a checkpoint: other processes may own them
// already, and this one must commit nothing more of them.
func (r *runner) lost(ids []int32) {
	n := r.stop(ids, "lost (the group moved it while this process was out of the group)")
	r.m.lost.WithLabelValues(LostSession).Add(float64(n))
	if !r.cfg.Rejoin {
		r.fail(fmt.Errorf("tasks: job %s: tasks %v were lost: this process was out of the job's group (its session expired) and the group gave them to other processes: %w", r.cfg.Job, ids, eddy.ErrFenced))
	}
}

// stop cancels the tasks ids without a checkpoint, waits for them and
// returns how many were running.
func (r *runner) stop(ids []int32, why string) int {
	ts := r.take(ids)
	for _, t := range ts {
		t.stopping.Store(true)
		t.cancel()
	}
	for _, t := range ts {
		<-t.done
		r.logf("task %d: %s: stopped without a checkpoint", t.id, why)
	}
	return len(ts)
}

// stopAll cancels the tasks still running, without a checkpoint.
func (r *runner) stopAll() {
	r.mu.Lock()
	ids := make([]int32, 0, len(r.running))
	for id := range r.running {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	r.stop(ids, "still running after the member left")
}
