package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eddyflow/eddy/internal/runtime"
)

// testMetrics is the metrics of a graph of a source "src" (2 subtasks)
// feeding a keyed stage whose first keyed operator is "count" (3).
func testMetrics() *runtime.Metrics {
	g := &runtime.Graph{}
	src, _ := g.AddSource(2, "src", 4)
	src.AddOperator("keyBy", false)
	keyed, _ := runtime.KeyedStage[string, int](g, []*runtime.Stage{src}, 3, 16, 4)
	keyed.AddOperator("process count", true)
	keyed.AddOperator("sink out", false)
	return runtime.NewMetrics(g, &runtime.Counters{})
}

// TestNamingConventions: client_golang's linter finds nothing to fault in
// the collector's metrics (counters end in _total, units are base units).
func TestNamingConventions(t *testing.T) {
	c := New("j", testMetrics())
	c.CheckpointCompleted(runtime.CheckpointStats{ID: 1, Completed: time.Now(), Duration: time.Second})
	c.SinkCommitted("out", time.Millisecond)
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// TestValues: the collector reports the subtasks' counters under their
// stage's name and the checkpoint phases observed.
func TestValues(t *testing.T) {
	m := testMetrics()
	c := New("j", m)
	s := m.Subtask(1, 2)
	s.RecordsIn.Add(42)
	s.BusyNs.Add(int64(1500 * time.Millisecond))
	s.Watermark.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	c.CheckpointCompleted(runtime.CheckpointStats{ID: 7, Completed: time.Now(), Duration: 300 * time.Millisecond,
		Last: runtime.AckTiming{Barrier: 10 * time.Millisecond, Sync: 20 * time.Millisecond, Async: 30 * time.Millisecond}, ManifestWrite: 40 * time.Millisecond})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	want := `
# HELP eddy_records_in_total Records a subtask took in: read from its source, or received from a shuffle.
# TYPE eddy_records_in_total counter
eddy_records_in_total{job_name="j",operator="count",subtask="0"} 0
eddy_records_in_total{job_name="j",operator="count",subtask="1"} 0
eddy_records_in_total{job_name="j",operator="count",subtask="2"} 42
eddy_records_in_total{job_name="j",operator="src",subtask="0"} 0
eddy_records_in_total{job_name="j",operator="src",subtask="1"} 0
# HELP eddy_subtask_busy_seconds_total Time a subtask spent processing records.
# TYPE eddy_subtask_busy_seconds_total counter
eddy_subtask_busy_seconds_total{job_name="j",operator="count",subtask="0"} 0
eddy_subtask_busy_seconds_total{job_name="j",operator="count",subtask="1"} 0
eddy_subtask_busy_seconds_total{job_name="j",operator="count",subtask="2"} 1.5
eddy_subtask_busy_seconds_total{job_name="j",operator="src",subtask="0"} 0
eddy_subtask_busy_seconds_total{job_name="j",operator="src",subtask="1"} 0
# HELP eddy_watermark_seconds A subtask's event-time watermark, as Unix time.
# TYPE eddy_watermark_seconds gauge
eddy_watermark_seconds{job_name="j",operator="count",subtask="2"} 1.7672256e+09
# HELP eddy_checkpoints_completed_total Checkpoints completed (manifest written, sinks committed).
# TYPE eddy_checkpoints_completed_total counter
eddy_checkpoints_completed_total{job_name="j"} 0
`
	// The runtime counts completions and keeps their history itself; the
	// collector, told of one directly, only observes it.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "eddy_records_in_total", "eddy_subtask_busy_seconds_total",
		"eddy_watermark_seconds", "eddy_checkpoint_last_id", "eddy_checkpoints_completed_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "eddy_checkpoint_phase_duration_seconds"); n != 4 {
		t.Errorf("%d phases", n)
	}
}
