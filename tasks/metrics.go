package tasks

import (
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a task is lost, the values of eddy_tasks_lost_total's label
// reason.
const (
	LostSession = "session" // the group moved it while this process was out of the group
	LostFenced  = "fenced"  // a newer owner claimed it before the group told this process
)

// durationBuckets span 1 ms to about 2 min.
var durationBuckets = prometheus.ExponentialBuckets(0.001, 2, 18)

// metrics are the Prometheus metrics of a process's tasks (Config.Metrics),
// one collector: what happens once per rebalance or task is observed as
// it happens, what the running tasks are now is read at scrape time.
type metrics struct {
	r          *runner
	owned, lag *prometheus.Desc
	rebalances prometheus.Counter
	rebalance  prometheus.Histogram
	handover   prometheus.Histogram
	failed     prometheus.Counter
	lost       *prometheus.CounterVec
}

func newMetrics(r *runner) *metrics {
	jl := prometheus.Labels{"job_name": r.cfg.Job}
	m := &metrics{r: r,
		owned: prometheus.NewDesc("eddy_tasks_owned", "Tasks the group gives this process now (those that ended or failed included, until the group moves them).", nil, jl),
		lag: prometheus.NewDesc("eddy_tasks_lag_records",
			"Records of a task's input partition it has not read yet: the partition's high watermark at the task's last fetch minus its next offset (the committed position trails it by up to a checkpoint interval). Only for tasks this process runs.",
			[]string{"task"}, jl),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{Name: "eddy_tasks_rebalances_total",
			Help: "Rebalances of the job's group this process took part in (a cooperative move of tasks is two: revoke, then assign).", ConstLabels: jl}),
		rebalance: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "eddy_tasks_rebalance_duration_seconds",
			Help:        "How long a rebalance took this process: its first JoinGroup request until its new tasks started, its handovers included.",
			ConstLabels: jl, Buckets: durationBuckets}),
		handover: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "eddy_tasks_handover_duration_seconds",
			Help:        "How long a task took to hand over when the group moved it away: its final checkpoint, committed, and its stop.",
			ConstLabels: jl, Buckets: durationBuckets}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "eddy_tasks_handover_failures_total",
			Help: "Handovers that failed (no checkpoint by the handover timeout): the task stopped without one and its next owner replays from its last checkpoint.", ConstLabels: jl}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eddy_tasks_lost_total",
			Help: "Tasks stopped without a handover, by reason: session (the group moved them while this process was out of it) or fenced (a newer owner claimed one first).", ConstLabels: jl},
			[]string{"reason"}),
	}
	for _, why := range []string{LostSession, LostFenced} {
		m.lost.WithLabelValues(why) // every reason shows from the start
	}
	return m
}

// rebalanced observes a rebalance the process took part in
// (group.Config.Rebalanced).
func (m *metrics) rebalanced(d time.Duration) {
	m.rebalances.Inc()
	m.rebalance.Observe(d.Seconds())
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.owned
	ch <- m.lag
	m.rebalances.Describe(ch)
	m.rebalance.Describe(ch)
	m.handover.Describe(ch)
	m.failed.Describe(ch)
	m.lost.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.r.mu.Lock()
	running := make([]*task, 0, len(m.r.running))
	for _, t := range m.r.running {
		running = append(running, t)
	}
	m.r.mu.Unlock()
	sort.Slice(running, func(i, j int) bool { return running[i].id < running[j].id })
	ch <- prometheus.MustNewConstMetric(m.owned, prometheus.GaugeValue, float64(len(running)))
	for _, t := range running {
		t.envMu.Lock()
		env := t.env // a reclaim swaps it
		t.envMu.Unlock()
		if lag, ok := env.SourceLag(); ok {
			ch <- prometheus.MustNewConstMetric(m.lag, prometheus.GaugeValue, float64(lag), strconv.Itoa(int(t.id)))
		}
	}
	m.rebalances.Collect(ch)
	m.rebalance.Collect(ch)
	m.handover.Collect(ch)
	m.failed.Collect(ch)
	m.lost.Collect(ch)
}
