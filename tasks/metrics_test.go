package tasks_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddyflow/eddy"
	blobfile "github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/tasks"
)

// metricValue returns the value of the series name{labels} in reg (a
// counter's or gauge's value, a histogram's count) and whether it exists.
func metricValue(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// lines adds every line written to it to a syncLog.
type lines struct {
	l      *syncLog
	prefix string
}

func (w lines) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		w.l.add(w.prefix + ": " + line)
	}
	return len(b), nil
}

// TestMetrics runs processes of a job in this process, each with its own
// registry: the tasks owned, rebalances, handovers, lost tasks and lags
// move as the group assigns, moves and takes away tasks.
func TestMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job's tasks through rebalances for seconds")
	}
	const parts, events, keys = 4, 4000, 40
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, "in", "out"),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	if err := produce(t, brokers, 0, events/2, keys); err != nil {
		t.Fatal(err)
	}
	store, err := blobfile.New(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	var out syncLog
	t.Cleanup(func() { // after the members' cleanups
		if t.Failed() {
			out.dump(t)
		}
	})
	type member struct {
		reg    registry
		cancel context.CancelFunc
		done   chan struct{}
		err    error // Run's, once done is closed
	}
	start := func(name string, reg registry) *member {
		m := &member{reg: reg, done: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		m.cancel = cancel
		cfg := tasks.Config{Job: job, Brokers: brokers, Topic: "in", Store: store, Interval: 100 * time.Millisecond,
			SessionTimeout: session, HeartbeatInterval: heartbeat, RebalanceTimeout: rebalance, HandoverTimeout: handover,
			Options: []eddy.Option{eddy.LogOutput(out.writer(name + " env"))}, Log: lines{&out, name}, Metrics: m.reg,
			Rejoin: true} // a, forgotten by the coordinator below, rejoins
		go func() {
			defer close(m.done)
			m.err = tasks.Run(ctx, cfg, build(brokers))
		}()
		t.Cleanup(func() {
			cancel()
			<-m.done
		})
		return m
	}
	stop := func(m *member, name string) {
		t.Helper()
		m.cancel()
		<-m.done
		if m.err != nil {
			t.Fatalf("%s: %v", name, m.err)
		}
	}
	value := func(m *member, name string, labels ...string) float64 {
		t.Helper()
		l := map[string]string{"job_name": job}
		for i := 0; i+1 < len(labels); i += 2 {
			l[labels[i]] = labels[i+1]
		}
		v, _ := metricValue(t, m.reg, name, l)
		return v
	}
	waitFor := func(what string, cond func() bool) { t.Helper(); pollUntil(t, what, cond) }
	lagsZero := func(m *member, ids ...int) bool {
		zero := true
		var lags []string
		for _, id := range ids {
			v, ok := metricValue(t, m.reg, "eddy_tasks_lag_records", map[string]string{"task": fmt.Sprint(id)})
			zero = zero && ok && v == 0
			lags = append(lags, fmt.Sprintf("task %d: %v (%v)", id, v, ok))
		}
		if !zero {
			out.add(fmt.Sprintf("test: lags %v", lags))
		}
		return zero
	}

	a := start("a", prometheus.NewRegistry())
	waitFor("a to own every task", func() bool { return value(a, "eddy_tasks_owned") == parts })
	if n := value(a, "eddy_tasks_rebalances_total"); n < 1 {
		t.Errorf("a joined: %v rebalances, want at least 1", n)
	}
	// Every task reads its partition to the end: its lag drops to 0.
	waitFor("every task's lag to drop to 0", func() bool { return lagsZero(a, 0, 1, 2, 3) })
	// Each task's own metrics are there too, under its own job name.
	if _, ok := metricValue(t, a.reg, "eddy_records_in_total", map[string]string{"job_name": job + ".t0"}); !ok {
		t.Errorf("no eddy_records_in_total of task 0 (job_name %s.t0) in the registry", job)
	}

	rebalancesBefore := value(a, "eddy_tasks_rebalances_total")
	// b's registry keeps its metrics after it stopped, to be read then.
	b := start("b", keptRegistry{prometheus.NewRegistry()})
	waitFor("a and b to own two tasks each", func() bool {
		return value(a, "eddy_tasks_owned") == parts/2 && value(b, "eddy_tasks_owned") == parts/2
	})
	if n := value(a, "eddy_tasks_handover_duration_seconds"); n != parts/2 {
		t.Errorf("b joined: a handed %v tasks over, want %d", n, parts/2)
	}
	if n := value(a, "eddy_tasks_rebalances_total"); n <= rebalancesBefore {
		t.Errorf("b joined: a's rebalances went from %v to %v", rebalancesBefore, n)
	}
	if n := value(b, "eddy_tasks_rebalances_total"); n < 1 {
		t.Errorf("b joined: b took part in %v rebalances", n)
	}
	if err := produce(t, brokers, events/2, events, keys); err != nil {
		t.Fatal(err)
	}

	// b stops: it hands its tasks back to a.
	stop(b, "b")
	if n := value(b, "eddy_tasks_handover_duration_seconds"); n != parts/2 {
		t.Errorf("b stopped: it handed %v tasks over, want %d", n, parts/2)
	}
	waitFor("a to own every task again", func() bool { return value(a, "eddy_tasks_owned") == parts })
	waitFor("every task's lag to drop to 0 again", func() bool { return lagsZero(a, 0, 1, 2, 3) })

	// The coordinator forgets a (as after an expired session): a loses
	// every task without a handover, rejoins and gets them back.
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		hb := req.(*kmsg.HeartbeatRequest)
		if hb.Group != "eddy.job."+job {
			return nil, nil, false
		}
		resp := hb.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})
	waitFor("a to lose its tasks", func() bool { return value(a, "eddy_tasks_lost_total", "reason", tasks.LostSession) == parts })
	waitFor("a to own every task once more", func() bool { return value(a, "eddy_tasks_owned") == parts })
	if n := value(a, "eddy_tasks_lost_total", "reason", tasks.LostFenced); n != 0 {
		t.Errorf("%v tasks fenced, want none", n)
	}
	if n := value(a, "eddy_tasks_handover_failures_total"); n != 0 {
		t.Errorf("%v failed handovers, want none", n)
	}
	waitFor("every record committed", func() bool { return len(committedOutput(t, brokers)) >= events })
	stop(a, "a")
	checkExactlyOnce(t, committedOutput(t, brokers), events, keys)
}

type registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// keptRegistry keeps what Run registered after Run returned (Unregister
// does nothing), for a test to read what a process did as it stopped.
type keptRegistry struct{ *prometheus.Registry }

func (keptRegistry) Unregister(prometheus.Collector) bool { return true }
