package runtime

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/state/pebble"
)

// Metrics are the live measurements of one Run of a job graph, kept across
// its attempts: per subtask counters that the subtasks flush their local
// counts into once per batch (never per record), the readiness of the
// current attempt, and the history of checkpoints. Exporters (Prometheus,
// the admin endpoint) read them from any goroutine.
type Metrics struct {
	stats    *Counters
	stages   []StageInfo
	subtasks [][]SubtaskMetrics // [stage][subtask]
	total    int                // subtasks of the graph

	attempt  atomic.Int64 // attempts started
	running  atomic.Bool  // an attempt is running
	started  atomic.Int64 // subtasks of the current attempt that restored and run
	failed   atomic.Int64 // checkpoints failed (timed out, an upload or the manifest failed)
	pebbleOn atomic.Bool  // a Pebble database was opened

	mu       sync.Mutex
	history  []CheckpointStats // the newest last, at most historyLen
	observer Observer
	// The changelog's log of the current attempt, and the sums of the
	// logs of attempts before it, so its counters never go back.
	dlog     *dstl.Log
	dlogBase dstl.Metrics
	dlogSeen bool

	blobs blob.Counter // requests made of the checkpoint store

	pebbleMu sync.Mutex // guards pebble; held while a DB's health is read, so it is not closed meanwhile
	pebble   []pebbleDB // the open databases of the Pebble state backend
}

// pebbleDB is an open database of the Pebble state backend and whose it is.
type pebbleDB struct {
	uid     string
	subtask int
	db      *pebble.DB
}

// PebbleHealth is the health of the Pebble database of one keyed operator
// subtask.
type PebbleHealth struct {
	Operator string
	Subtask  int
	pebble.Health
}

// Pebble returns the health of the open Pebble databases of the current
// attempt, by operator and subtask, and whether the job keeps its state in
// Pebble at all.
func (m *Metrics) Pebble() ([]PebbleHealth, bool) {
	m.pebbleMu.Lock()
	defer m.pebbleMu.Unlock()
	out := make([]PebbleHealth, 0, len(m.pebble))
	for _, d := range m.pebble {
		out = append(out, PebbleHealth{Operator: d.uid, Subtask: d.subtask, Health: d.db.Health()})
	}
	slices.SortFunc(out, func(a, b PebbleHealth) int {
		if c := strings.Compare(a.Operator, b.Operator); c != 0 {
			return c
		}
		return a.Subtask - b.Subtask
	})
	return out, m.pebbleOn.Load()
}

func (m *Metrics) addPebble(uid string, subtask int, db *pebble.DB) {
	m.pebbleOn.Store(true)
	m.pebbleMu.Lock()
	m.pebble = append(m.pebble, pebbleDB{uid: uid, subtask: subtask, db: db})
	m.pebbleMu.Unlock()
}

// dropPebble forgets db, which is about to be closed.
func (m *Metrics) dropPebble(db *pebble.DB) {
	m.pebbleMu.Lock()
	m.pebble = slices.DeleteFunc(m.pebble, func(d pebbleDB) bool { return d.db == db })
	m.pebbleMu.Unlock()
}

// BlobRequests returns the requests Run made of the checkpoint store, in
// all and those that failed (hedges and retries included: each is a
// request an object store bills).
func (m *Metrics) BlobRequests() (all, failed blob.Requests) {
	return m.blobs.Requests(), m.blobs.Failed()
}

// historyLen is how many completed checkpoints Metrics remembers.
const historyLen = 120

// Observer is told of what happens once per checkpoint, not per record.
// Its methods are called from the coordinator's goroutine and must not
// block.
type Observer interface {
	CheckpointCompleted(CheckpointStats)
	CheckpointFailed(id uint64)
	SinkCommitted(sink string, d time.Duration)
}

// SubtaskMetrics are one subtask's counters, cumulative over the attempts
// of a Run. Times are in nanoseconds: busy (processing), back-pressured
// (waiting for a full downstream inbox) and idle (waiting for input).
type SubtaskMetrics struct {
	RecordsIn, RecordsOut        atomic.Int64
	LateRecords, DroppedRecords  atomic.Int64
	BusyNs, BackPressuredNs      atomic.Int64
	IdleNs                       atomic.Int64
	Watermark                    atomic.Int64 // event time in ns; math.MinInt64 before the first
	StateEntries, StateSizeBytes atomic.Int64 // of the keyed operators, at the last checkpoint
	SourceLag                    atomic.Int64 // records its splits hold that it has not read; math.MinInt64: unknown
	_                            [64]byte     // keeps neighbouring subtasks off this cache line
}

// StageInfo describes a stage of the graph: a chain of operators run by
// Parallelism subtasks.
type StageInfo struct {
	ID          int      `json:"id"`
	Name        string   `json:"name"`      // the operator label of its metrics
	Operators   []string `json:"operators"` // the chain, in order
	Parallelism int      `json:"parallelism"`
	Inputs      []int    `json:"inputs"` // stages feeding it through a shuffle
	Source      bool     `json:"source"`
}

// NewMetrics returns the metrics of a Run of g, whose job-level counters
// are stats. Build g completely first.
func NewMetrics(g *Graph, stats *Counters) *Metrics {
	m := &Metrics{stats: stats, subtasks: make([][]SubtaskMetrics, len(g.stages)), history: make([]CheckpointStats, 0, historyLen)}
	for i, st := range g.stages {
		m.subtasks[i] = make([]SubtaskMetrics, st.parallelism)
		for k := range m.subtasks[i] {
			m.subtasks[i][k].Watermark.Store(math.MinInt64)
			m.subtasks[i][k].SourceLag.Store(math.MinInt64)
		}
		m.total += st.parallelism
		info := StageInfo{ID: st.id, Name: st.Name(), Operators: append([]string(nil), st.ops...), Parallelism: st.parallelism, Source: st.source != nil}
		for _, e := range st.inputs {
			if !slices.Contains(info.Inputs, e.from.id) {
				info.Inputs = append(info.Inputs, e.from.id)
			}
		}
		m.stages = append(m.stages, info)
	}
	return m
}

// SetObserver sets who is told of checkpoints and sink commits; call it
// before the Run.
func (m *Metrics) SetObserver(o Observer) { m.observer = o }

// Stages describes the stages of the graph, sources first.
func (m *Metrics) Stages() []StageInfo { return m.stages }

// Subtask returns the counters of subtask i of stage st.
func (m *Metrics) Subtask(st, i int) *SubtaskMetrics { return &m.subtasks[st][i] }

// Stats returns the job-level counters.
func (m *Metrics) Stats() Stats { return m.stats.Stats() }

// Readiness says how far the current attempt is: Running once it started,
// Started of Total subtasks have restored their state and run.
type Readiness struct {
	Attempt int64 `json:"attempt"`
	Running bool  `json:"running"`
	Started int   `json:"started"`
	Total   int   `json:"total"`
}

// Ready reports whether an attempt runs with every subtask restored.
func (r Readiness) Ready() bool { return r.Running && r.Started >= r.Total && r.Total > 0 }

// Readiness returns the current attempt's progress.
func (m *Metrics) Readiness() Readiness {
	return Readiness{Attempt: m.attempt.Load(), Running: m.running.Load(), Started: int(m.started.Load()), Total: m.total}
}

// Checkpoints returns how many checkpoints completed and failed.
func (m *Metrics) Checkpoints() (completed, failed int64) {
	return m.stats.checkpoints.Load(), m.failed.Load()
}

// History returns the last completed checkpoints, oldest first.
func (m *Metrics) History() []CheckpointStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]CheckpointStats(nil), m.history...)
}

func (m *Metrics) checkpointCompleted(s CheckpointStats) {
	m.mu.Lock()
	if len(m.history) == historyLen {
		copy(m.history, m.history[1:])
		m.history = m.history[:historyLen-1]
	}
	m.history = append(m.history, s)
	m.mu.Unlock()
	if m.observer != nil {
		m.observer.CheckpointCompleted(s)
	}
}

func (m *Metrics) checkpointFailed(id uint64) {
	m.failed.Add(1)
	if m.observer != nil {
		m.observer.CheckpointFailed(id)
	}
}

func (m *Metrics) sinkCommitted(sink string, d time.Duration) {
	if m.observer != nil {
		m.observer.SinkCommitted(sink, d)
	}
}

// Name is the stage's name: its source's id, else its first keyed
// operator's, else its first named part's, else stage-N.
func (st *Stage) Name() string {
	if st.name != "" {
		return st.name
	}
	for _, op := range st.ops {
		if _, id, ok := strings.Cut(op, " "); ok {
			return id
		}
	}
	return "stage-" + strconv.Itoa(st.id)
}

// AddOperator records an operator chained into the stage, as "kind id"
// (a part with an id) or "kind"; the first keyed operator names a keyed
// stage.
func (st *Stage) AddOperator(op string, keyed bool) {
	st.ops = append(st.ops, op)
	if keyed {
		st.keyedOps++
	}
	if keyed && st.name == "" {
		if _, id, ok := strings.Cut(op, " "); ok {
			st.name = id
		}
	}
}

// clock is a subtask's local account of where its time goes, flushed with
// its counters: busy is what remains of the wall time since the last flush
// after the waits.
type clock struct {
	last          time.Time // the last flush
	idle, pressed int64     // ns waited since the last flush: for input, for downstream credits
}

// running counts the subtask as restored and running in its attempt.
func (sc *Subtask) running() {
	sc.job.env.metrics.started.Add(1)
	if sc.job.unstarted.Add(-1) == 0 {
		close(sc.job.allStarted)
	}
}

func (m *Metrics) attachLog(l *dstl.Log) {
	m.mu.Lock()
	m.dlog, m.dlogSeen = l, true
	m.mu.Unlock()
}

func (m *Metrics) detachLog(l *dstl.Log) {
	last := l.Metrics()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dlog = nil
	addLogMetrics(&m.dlogBase, last)
}

// addLogMetrics adds the counters of src to dst (not the in-flight gauge).
func addLogMetrics(dst *dstl.Metrics, src dstl.Metrics) {
	dst.Changes += src.Changes
	dst.DroppedChanges += src.DroppedChanges
	dst.Batches += src.Batches
	dst.Uploads += src.Uploads
	dst.Objects += src.Objects
	dst.Parts += src.Parts
	dst.Completions += src.Completions
	dst.CompletionTime += src.CompletionTime
	dst.FailedCompletions += src.FailedCompletions
	dst.FailedBatches += src.FailedBatches
	dst.Attempts += src.Attempts
	dst.HedgedUploads += src.HedgedUploads
	dst.Retries += src.Retries
	dst.FailedAttempts += src.FailedAttempts
	dst.BytesRaw += src.BytesRaw
	dst.BytesUploaded += src.BytesUploaded
	dst.BlockedAppends += src.BlockedAppends
	dst.BlockedTime += src.BlockedTime
	dst.UploadLatency.Count += src.UploadLatency.Count
	dst.UploadLatency.Sum += src.UploadLatency.Sum
	for i := range dst.UploadLatency.Buckets {
		dst.UploadLatency.Buckets[i] += src.UploadLatency.Buckets[i]
	}
}

// DSTL returns the changelog's durable short-term log counters, summed over
// the Run's attempts (BytesInFlight: the current attempt's), and whether
// the job has a changelog.
func (m *Metrics) DSTL() (dstl.Metrics, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dlogSeen {
		return dstl.Metrics{}, false
	}
	r := m.dlogBase
	if m.dlog != nil {
		cur := m.dlog.Metrics()
		addLogMetrics(&r, cur)
		r.BytesInFlight = cur.BytesInFlight
	}
	return r, true
}
