package eddy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	blobfile "github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/discard"
	"github.com/eddyflow/eddy/internal/demojob"
)

// opsJob starts the demo job, rate limited so that it runs until the test
// ends, with the admin endpoint on a free loopback port. It returns the
// endpoint's base URL; the job stops (and Run's error is checked) at the
// end of the test.
func opsJob(t *testing.T, opts ...eddy.Option) (*eddy.Env, string) {
	t.Helper()
	env, base, _ := opsJobIn(t, opsConfig(t), opts...)
	return env, base
}

// opsConfig is the demo job, rate limited to 20k points/s (it would run
// for 40 minutes), checkpointing every 30 ms.
func opsConfig(t *testing.T) demojob.Config {
	return demojob.Config{Seed: 7, Events: 50_000_000, Drivers: 200, Data: t.TempDir(), Out: t.TempDir(),
		CheckpointInterval: 30 * time.Millisecond, Parallelism: 2, Rate: 20_000, EmitEvery: 100, LateEvery: 50}
}

// opsJobIn is opsJob of job c; stop cancels the job and waits for Run (it
// also runs at the end of the test).
func opsJobIn(t *testing.T, c demojob.Config, opts ...eddy.Option) (env *eddy.Env, base string, stop func()) {
	t.Helper()
	opts = append([]eddy.Option{eddy.Admin("127.0.0.1:0"), eddy.LogOutput(io.Discard)}, opts...)
	env = demojob.Env(c, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-env.AdminListening():
	case err := <-done:
		t.Fatalf("Run returned before the admin endpoint was bound: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the admin endpoint was not bound within 10 s")
	}
	return env, "http://" + env.AdminAddr(), stop
}

// eventually polls cond every 20 ms until it holds, failing the test with
// cond's last description after deadline.
func eventually(t *testing.T, deadline time.Duration, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(deadline)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s", deadline, why)
		}
		<-tick.C
	}
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, b
}

// scrape reads /metrics with the Prometheus text parser.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	fams := map[string]*dto.MetricFamily{}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err == io.EOF {
			return fams
		} else if err != nil {
			t.Fatalf("parsing /metrics: %v", err)
		}
		fams[mf.GetName()] = &mf
	}
}

// sum adds the values of family name's series whose labels include want.
func sum(fams map[string]*dto.MetricFamily, name string, want ...string) (float64, int) {
	mf, ok := fams[name]
	if !ok {
		return 0, 0
	}
	total, n := 0.0, 0
next:
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				continue next
			}
		}
		n++
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total, n
}

// TestMetricsFollowJob: /metrics, parsed with expfmt, follows a running
// job: records in grow per operator and subtask, checkpoints complete and
// are timed by phase, the job is ready; the user's registerer sees the same
// metrics.
func TestMetricsFollowJob(t *testing.T) {
	reg := prometheus.NewRegistry()
	began := time.Now()
	_, base := opsJob(t, eddy.Metrics(reg))
	var in0, ck0 float64
	eventually(t, 10*time.Second, func() (bool, string) {
		f := scrape(t, base)
		in0, _ = sum(f, "eddy_records_in_total", "job_name", "eddy-demo", "operator", "gps")
		ck0, _ = sum(f, "eddy_checkpoints_completed_total")
		ready, _ := sum(f, "eddy_job_ready")
		return in0 > 0 && ck0 >= 1 && ready == 1, fmt.Sprintf("records in %v, checkpoints %v, ready %v", in0, ck0, ready)
	})
	eventually(t, 10*time.Second, func() (bool, string) {
		f := scrape(t, base)
		in, _ := sum(f, "eddy_records_in_total", "operator", "gps")
		ck, _ := sum(f, "eddy_checkpoints_completed_total")
		dist, n := sum(f, "eddy_records_in_total", "operator", "distance")
		commits, _ := sum(f, "eddy_sink_commit_duration_seconds")
		return in > in0 && ck > ck0 && dist > 0 && n == 2 && commits > 0,
			fmt.Sprintf("records in %v (was %v), checkpoints %v (was %v), distance's in %v over %d subtasks, %v sink commits", in, in0, ck, ck0, dist, n, commits)
	})
	f := scrape(t, base)
	wall := time.Since(began).Seconds()
	ck, _ := sum(f, "eddy_checkpoints_completed_total")
	// Each subtask's busy, back-pressured and idle time add up to at most
	// the time it ran, and the source is mostly waiting at 20k points/s.
	for _, op := range []string{"gps", "distance"} {
		for _, sub := range []string{"0", "1"} {
			busy, _ := sum(f, "eddy_subtask_busy_seconds_total", "operator", op, "subtask", sub)
			pressed, _ := sum(f, "eddy_subtask_backpressured_seconds_total", "operator", op, "subtask", sub)
			idle, _ := sum(f, "eddy_subtask_idle_seconds_total", "operator", op, "subtask", sub)
			if total := busy + pressed + idle; total <= 0 || total > wall {
				t.Errorf("%s subtask %s: busy %.3fs + back-pressured %.3fs + idle %.3fs, ran at most %.3fs", op, sub, busy, pressed, idle, wall)
			}
			if op == "gps" && busy > wall/2 {
				t.Errorf("the rate-limited source's subtask %s was busy %.3fs of %.3fs", sub, busy, wall)
			}
		}
	}
	for _, phase := range []string{"barrier", "sync", "async", "manifest"} {
		if n, _ := sum(f, "eddy_checkpoint_phase_duration_seconds", "phase", phase); n < 1 {
			t.Errorf("phase %s: %v observations", phase, n)
		}
	}
	if n, _ := sum(f, "eddy_checkpoint_duration_seconds"); n < ck-1 {
		t.Errorf("eddy_checkpoint_duration_seconds has %v observations, %v checkpoints completed", n, ck)
	}
	// Every checkpoint writes at least its manifest (and lists the store).
	if puts, _ := sum(f, "eddy_blob_requests_total", "op", "put", "outcome", "ok"); puts < ck {
		t.Errorf("%v successful PUTs for %v checkpoints", puts, ck)
	}
	if lists, _ := sum(f, "eddy_blob_requests_total", "op", "list"); lists < ck {
		t.Errorf("%v LISTs for %v checkpoints", lists, ck)
	}
	if _, n := sum(f, "eddy_blob_requests_total"); n != 8 {
		t.Errorf("eddy_blob_requests_total has %d series, want 4 operations x 2 outcomes", n)
	}
	if v, _ := sum(f, "eddy_checkpoint_size_bytes", "kind", "full"); v <= 0 {
		t.Errorf("full checkpoint size %v", v)
	}
	if _, n := sum(f, "eddy_dstl_uploads_total"); n != 0 {
		t.Errorf("a job without the changelog has %d eddy_dstl_uploads_total series", n)
	}
	if _, n := sum(f, "eddy_build_info", "job_name", "eddy-demo"); n != 1 {
		t.Errorf("eddy_build_info: %d series", n)
	}
	for _, name := range []string{"eddy_subtask_busy_seconds_total", "eddy_subtask_idle_seconds_total",
		"eddy_subtask_backpressured_seconds_total", "eddy_records_out_total", "eddy_watermark_seconds", "eddy_watermark_lag_seconds",
		"eddy_state_entries", "eddy_late_records_total", "eddy_restarts_total", "eddy_checkpoints_failed_total",
		"go_goroutines"} {
		if _, n := sum(f, name); n == 0 {
			t.Errorf("%s missing from /metrics", name)
		}
	}
	for name, mf := range f {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "key" || l.GetName() == "driver" {
					t.Errorf("%s is labelled by %s", name, l.GetName())
				}
			}
		}
	}
	// The registerer passed with eddy.Metrics has the job's metrics (and
	// not the process's, which it may have of its own).
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range fams {
		got[mf.GetName()] = true
	}
	if !got["eddy_records_in_total"] || !got["eddy_checkpoint_duration_seconds"] || got["go_goroutines"] {
		t.Errorf("the user's registry holds %v", got)
	}
}

// TestTwoJobsOneProcess: two jobs run side by side, each with its own
// registry and endpoint, and share one registerer under distinct names; a
// second job of the same name in one registerer is refused.
func TestTwoJobsOneProcess(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, a := opsJob(t, eddy.Metrics(reg), eddy.JobName("a"))
	_, b := opsJob(t, eddy.Metrics(reg), eddy.JobName("b"))
	for _, base := range []string{a, b} {
		eventually(t, 10*time.Second, func() (bool, string) {
			v, _ := sum(scrape(t, base), "eddy_records_in_total")
			return v > 0, fmt.Sprintf("%s: records in %v", base, v)
		})
	}
	// Each endpoint serves only its own job.
	if _, n := sum(scrape(t, a), "eddy_records_in_total", "job_name", "b"); n != 0 {
		t.Errorf("job a's endpoint serves %d series of job b", n)
	}
	env := demojob.Env(demojob.Config{Seed: 1, Events: 10, Drivers: 1, Data: t.TempDir(), Out: t.TempDir(), CheckpointInterval: time.Second, Parallelism: 1},
		eddy.Metrics(reg), eddy.JobName("a"), eddy.LogOutput(io.Discard))
	if err := env.Run(context.Background()); err == nil || !strings.Contains(err.Error(), `job "a"`) {
		t.Fatalf("a second job named a in one registerer: Run returned %v", err)
	}
}

// TestAdminEndpoint: health, readiness, the JSON API's shape while the job
// runs, pprof.
func TestAdminEndpoint(t *testing.T) {
	env, base := opsJob(t)
	if code, body := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		code, body := get(t, base+"/readyz")
		return code == http.StatusOK, fmt.Sprintf("/readyz: %d %s", code, body)
	})
	var job struct {
		Job     string `json:"job"`
		Ready   bool   `json:"ready"`
		Restore struct {
			Started int `json:"subtasksRunning"`
			Total   int `json:"subtasks"`
		} `json:"restore"`
		Stages []struct {
			ID          int      `json:"id"`
			Name        string   `json:"name"`
			Operators   []string `json:"operators"`
			Parallelism int      `json:"parallelism"`
			InPerSec    float64  `json:"inPerSec"`
			Busy        float64  `json:"busy"`
			Idle        float64  `json:"idle"`
			Watermark   *int64   `json:"watermarkMs"`
			Subtasks    []struct {
				RecordsIn int64 `json:"recordsIn"`
			} `json:"subtasks"`
		} `json:"stages"`
		Edges []struct{ From, To int } `json:"edges"`
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		code, body := get(t, base+"/api/job")
		if code != http.StatusOK {
			return false, fmt.Sprintf("/api/job: %d %s", code, body)
		}
		if err := json.Unmarshal(body, &job); err != nil {
			t.Fatalf("/api/job: %v\n%s", err, body)
		}
		ok := len(job.Stages) == 2 && job.Stages[0].InPerSec > 0 && job.Stages[1].InPerSec > 0 && job.Stages[1].Watermark != nil
		return ok, "/api/job: " + string(body)
	})
	if job.Job != "eddy-demo" || !job.Ready || job.Restore.Started != 4 || job.Restore.Total != 4 {
		t.Errorf("/api/job: job %q ready %v restore %+v", job.Job, job.Ready, job.Restore)
	}
	src, keyed := job.Stages[0], job.Stages[1]
	if src.Name != "gps" || keyed.Name != "distance" || src.Parallelism != 2 || len(keyed.Subtasks) != 2 {
		t.Errorf("/api/job stages: %+v", job.Stages)
	}
	if want := []string{"source gps", "keyBy"}; strings.Join(src.Operators, ",") != strings.Join(want, ",") {
		t.Errorf("source chain %q, want %q", src.Operators, want)
	}
	if len(job.Edges) != 1 || job.Edges[0].From != 0 || job.Edges[0].To != 1 {
		t.Errorf("/api/job edges %+v", job.Edges)
	}
	for _, st := range job.Stages {
		if st.Busy < 0 || st.Busy > 1 || st.Idle < 0 || st.Idle > 1 {
			t.Errorf("stage %s: busy %v idle %v, want fractions", st.Name, st.Busy, st.Idle)
		}
	}
	var cps struct {
		Completed int64 `json:"completed"`
		History   []struct {
			ID         uint64  `json:"id"`
			DurationMs float64 `json:"durationMs"`
			FullSize   int64   `json:"fullSize"`
		} `json:"history"`
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		_, body := get(t, base+"/api/checkpoints?limit=3")
		if err := json.Unmarshal(body, &cps); err != nil {
			t.Fatalf("/api/checkpoints: %v\n%s", err, body)
		}
		return len(cps.History) == 3, "/api/checkpoints?limit=3: " + string(body)
	})
	for i, c := range cps.History {
		if c.DurationMs <= 0 || c.FullSize <= 0 || (i > 0 && c.ID <= cps.History[i-1].ID) {
			t.Errorf("/api/checkpoints: %+v", cps.History)
		}
	}
	if code, _ := get(t, base+"/api/checkpoints?limit=x"); code != http.StatusBadRequest {
		t.Errorf("/api/checkpoints?limit=x: %d", code)
	}
	if code, body := get(t, base+"/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Errorf("/debug/pprof/goroutine: %d", code)
	}
	if code, body := get(t, base+"/"); code != http.StatusOK || !strings.Contains(string(body), "<html") {
		t.Errorf("/: %d %.100s", code, body)
	}
	if env.AdminAddr() == "" || !strings.HasPrefix(env.AdminAddr(), "127.0.0.1:") {
		t.Errorf("AdminAddr %q", env.AdminAddr())
	}
}

// TestAdminRefusesRemoteAddress: a non-loopback address fails Run before the
// job starts, unless AdminAllowRemote says so.
func TestAdminRefusesRemoteAddress(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8081"} {
		env := demojob.Env(demojob.Config{Seed: 1, Events: 10, Drivers: 1, Data: t.TempDir(), Out: t.TempDir(), CheckpointInterval: time.Second, Parallelism: 1},
			eddy.Admin(addr), eddy.LogOutput(io.Discard))
		if err := env.Run(context.Background()); !errors.Is(err, eddy.ErrAdminNotLoopback) {
			t.Errorf("Admin(%q): Run returned %v, want ErrAdminNotLoopback", addr, err)
		}
		if env.Stats().RecordsIn != 0 {
			t.Errorf("Admin(%q): the job ran", addr)
		}
	}
	env, base := opsJob(t, eddy.Admin("0.0.0.0:0", eddy.AdminAllowRemote()))
	if !strings.HasPrefix(env.AdminAddr(), "[::]:") && !strings.HasPrefix(env.AdminAddr(), "0.0.0.0:") {
		t.Errorf("AdminAddr %q", env.AdminAddr())
	}
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz on %s: %d", base, code)
	}
}

// TestMetricsAfterRestore: a job resumed from a checkpoint reports it, with
// its restore time, on /metrics and in /api/job's restore progress.
func TestMetricsAfterRestore(t *testing.T) {
	c := opsConfig(t)
	_, base, stop := opsJobIn(t, c)
	eventually(t, 10*time.Second, func() (bool, string) {
		ck, _ := sum(scrape(t, base), "eddy_checkpoints_completed_total")
		return ck >= 2, fmt.Sprintf("%v checkpoints", ck)
	})
	stop()
	_, base, _ = opsJobIn(t, c)
	eventually(t, 10*time.Second, func() (bool, string) {
		f := scrape(t, base)
		from, _ := sum(f, "eddy_restored_checkpoint_id")
		ready, _ := sum(f, "eddy_job_ready")
		running, _ := sum(f, "eddy_subtasks_running")
		return from >= 2 && ready == 1 && running == 4, fmt.Sprintf("restored from %v, ready %v, %v subtasks running", from, ready, running)
	})
	var job struct {
		Restore struct {
			From    uint64 `json:"fromCheckpoint"`
			Started int    `json:"subtasksRunning"`
			Total   int    `json:"subtasks"`
		} `json:"restore"`
	}
	_, body := get(t, base+"/api/job")
	if err := json.Unmarshal(body, &job); err != nil || job.Restore.From < 2 || job.Restore.Started != job.Restore.Total {
		t.Errorf("/api/job restore: %+v (%v)", job.Restore, err)
	}
}

// passFn emits what it gets.
type passFn struct{}

func (passFn) Open(*eddy.OpenContext) error { return nil }

func (passFn) Process(ctx *eddy.Context[string, datagen.GPSPoint], p *datagen.GPSPoint) error {
	ctx.Emit(*p)
	return nil
}

// pacedSink discards records, sleeping a millisecond every 50 of them.
type pacedSink[T any] struct{ *discard.Counter[T] }

func (s pacedSink[T]) Name() string { return "paced" }

func (s pacedSink[T]) OpenWriter(ctx context.Context, subtask, par int) (connector.SinkWriter[T], error) {
	w, err := s.Counter.OpenWriter(ctx, subtask, par)
	return &pacedWriter[T]{SinkWriter: w}, err
}

type pacedWriter[T any] struct {
	connector.SinkWriter[T]
	n int
}

func (w *pacedWriter[T]) Write(t *T) error {
	if w.n++; w.n%50 == 0 {
		time.Sleep(time.Millisecond)
	}
	return w.SinkWriter.Write(t)
}

// gathered reads reg as the scrape would.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range fams {
		out[mf.GetName()] = mf
	}
	return out
}

// TestBackPressureMetrics: behind a slow sink, the unthrottled source
// spends its time back-pressured and the sink's subtask is busy.
func TestBackPressureMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	env := eddy.New(eddy.Parallelism(1), eddy.Metrics(reg), eddy.LogOutput(io.Discard))
	points := eddy.FromSource(env, datagen.GPS(datagen.Seed(1), datagen.Events(100_000_000), datagen.Drivers(100)), eddy.Named("fast"))
	byDriver := eddy.KeyBy(points, func(p *datagen.GPSPoint) string { return p.DriverID })
	passed := eddy.Process[string, datagen.GPSPoint, datagen.GPSPoint](byDriver, passFn{}, eddy.Named("slow"))
	eddy.ToSink(passed, pacedSink[datagen.GPSPoint]{discard.New[datagen.GPSPoint]()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	eventually(t, 15*time.Second, func() (bool, string) {
		f := gathered(t, reg)
		srcPressed, _ := sum(f, "eddy_subtask_backpressured_seconds_total", "operator", "fast")
		srcBusy, _ := sum(f, "eddy_subtask_busy_seconds_total", "operator", "fast")
		sinkBusy, _ := sum(f, "eddy_subtask_busy_seconds_total", "operator", "slow")
		sinkIdle, _ := sum(f, "eddy_subtask_idle_seconds_total", "operator", "slow")
		select {
		case err := <-done:
			done <- err // for the deferred receive
			t.Fatalf("Run: %v", err)
		default:
		}
		return srcPressed > 0.3 && srcPressed > 2*srcBusy && sinkBusy > 2*sinkIdle,
			fmt.Sprintf("source back-pressured %.3fs, busy %.3fs; sink busy %.3fs, idle %.3fs", srcPressed, srcBusy, sinkBusy, sinkIdle)
	})
}

// TestSavepoint: POST /api/savepoint takes a checkpoint that retention keeps
// while later checkpoints replace the others; Env.Savepoint of a job without
// checkpoints says so.
func TestSavepoint(t *testing.T) {
	c := opsConfig(t)
	_, base, _ := opsJobIn(t, c)
	eventually(t, 10*time.Second, func() (bool, string) {
		code, body := get(t, base+"/readyz")
		return code == http.StatusOK, fmt.Sprintf("/readyz: %d %s", code, body)
	})
	resp, err := http.Post(base+"/api/savepoint?timeout=10s", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var sp struct {
		ID    uint64 `json:"id"`
		Error string `json:"error"`
	}
	err = json.NewDecoder(resp.Body).Decode(&sp)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || sp.ID == 0 {
		t.Fatalf("POST /api/savepoint: %s %+v (%v)", resp.Status, sp, err)
	}
	// Retention keeps 3: wait for 5 checkpoints past the savepoint.
	eventually(t, 10*time.Second, func() (bool, string) {
		last, _ := sum(scrape(t, base), "eddy_checkpoint_last_id")
		return last >= float64(sp.ID+5), fmt.Sprintf("last checkpoint %v, savepoint %d", last, sp.ID)
	})
	bs, err := blob.Open(c.Data)
	if err != nil {
		t.Fatal(err)
	}
	st := checkpoint.NewStorage(bs, 3)
	// Retention runs in the background after a checkpoint completes.
	eventually(t, 10*time.Second, func() (bool, string) {
		ids, err := st.List(context.Background())
		return err == nil && slices.Contains(ids, sp.ID) && !slices.Contains(ids, sp.ID+1),
			fmt.Sprintf("checkpoints %v (%v): want the savepoint %d kept and %d pruned", ids, err, sp.ID, sp.ID+1)
	})
	if _, err := st.Load(context.Background(), sp.ID); err != nil {
		t.Fatalf("loading the savepoint: %v", err)
	}

	env := eddy.New(eddy.LogOutput(io.Discard))
	if _, err := env.Savepoint(context.Background()); err == nil || !strings.Contains(err.Error(), "no checkpoints") {
		t.Errorf("Savepoint without checkpoints: %v", err)
	}
}

// TestChangelogMetrics: with the changelog state backend, the durable
// short-term log's uploads show on /metrics.
func TestChangelogMetrics(t *testing.T) {
	c := opsConfig(t)
	c.Changelog = true
	_, base, _ := opsJobIn(t, c)
	eventually(t, 10*time.Second, func() (bool, string) {
		f := scrape(t, base)
		ok, _ := sum(f, "eddy_dstl_uploads_total", "outcome", "ok")
		first, _ := sum(f, "eddy_dstl_upload_attempts_total", "reason", "first")
		bytes, _ := sum(f, "eddy_dstl_uploaded_bytes_total")
		_, inFlight := sum(f, "eddy_dstl_in_flight_bytes")
		timed, _ := sum(f, "eddy_dstl_upload_duration_seconds")
		// On a local store every batch is an object of its own.
		objects, _ := sum(f, "eddy_dstl_objects_total")
		return ok > 0 && first >= ok && bytes > 0 && inFlight == 1 && timed == ok && objects == ok,
			fmt.Sprintf("uploads %v, first attempts %v, bytes %v, in-flight gauge %d, timed uploads %v, objects %v", ok, first, bytes, inFlight, timed, objects)
	})
	// The latency histogram's buckets are cumulative and end at its count.
	f := scrape(t, base)
	h := f["eddy_dstl_upload_duration_seconds"].GetMetric()[0].GetHistogram()
	prev := uint64(0)
	for _, b := range h.GetBucket() {
		if b.GetCumulativeCount() < prev || b.GetCumulativeCount() > h.GetSampleCount() {
			t.Fatalf("upload latency buckets not cumulative within the count %d: %v", h.GetSampleCount(), h.GetBucket())
		}
		prev = b.GetCumulativeCount()
	}
	if h.GetSampleSum() <= 0 {
		t.Fatalf("upload latency sum %v", h.GetSampleSum())
	}
}

// lagSource is one split that returns emit records, then waits (Idle)
// until its context ends, reporting total-emit records of lag
// (connector.Lagger).
type lagSource struct{ emit, total int }

func (s lagSource) Name() string { return "lagged" }
func (s lagSource) Splits() int  { return 1 }
func (s lagSource) OpenSplit(context.Context, int, []byte) (eddy.SplitReader[datagen.GPSPoint], error) {
	return &lagReader{s: s}, nil
}

type lagReader struct {
	s    lagSource
	read int
}

func (r *lagReader) Next(p *datagen.GPSPoint) (eddy.ReadStatus, error) {
	if r.read == r.s.emit {
		return eddy.Idle, nil
	}
	r.read++
	p.DriverID = fmt.Sprint(r.read)
	return eddy.Record, nil
}
func (r *lagReader) Position() []byte   { return []byte(fmt.Sprint(r.read)) }
func (r *lagReader) Close() error       { return nil }
func (r *lagReader) Lag() (int64, bool) { return int64(r.s.total - r.read), true }

// TestSourceLagMetric: a source whose split readers know their lag shows
// it as eddy_source_lag_records of its subtask.
func TestSourceLagMetric(t *testing.T) {
	env := eddy.New(eddy.Parallelism(1), eddy.Admin("127.0.0.1:0"), eddy.LogOutput(io.Discard))
	var src eddy.Source[datagen.GPSPoint] = lagSource{emit: 40, total: 100}
	eddy.ToSink(eddy.FromSource(env, src), discard.Sink[datagen.GPSPoint]())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-env.AdminListening():
	case err := <-done:
		t.Fatalf("Run ended: %v", err)
	}
	base := "http://" + env.AdminAddr()
	eventually(t, 10*time.Second, func() (bool, string) {
		lag, n := sum(scrape(t, base), "eddy_source_lag_records", "subtask", "0")
		return n == 1 && lag == 60, fmt.Sprintf("eddy_source_lag_records: %v over %d series, want 60", lag, n)
	})
}

// heldReads holds every Get of a state part until release is closed.
type heldReads struct {
	blob.Store
	release chan struct{}
}

func (s *heldReads) Get(ctx context.Context, name string) ([]byte, error) {
	if strings.HasSuffix(name, ".state") {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.Get(ctx, name)
}

// TestRestoreProgress: while a restore waits for its state, the Env says
// which checkpoint it restores and how many subtasks are done; once they
// are, the progress is done.
func TestRestoreProgress(t *testing.T) {
	dir := t.TempDir()
	fs, err := blobfile.New(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	c := demojob.Config{Seed: 2, Events: 20_000, Drivers: 50, Parallelism: 2, CheckpointInterval: 20 * time.Millisecond, Out: filepath.Join(dir, "out")}
	if err := demojob.Env(c, eddy.CheckpointStore(fs, c.CheckpointInterval), eddy.LogOutput(io.Discard)).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	store := &heldReads{Store: fs, release: make(chan struct{})}
	env := demojob.Env(c, eddy.CheckpointStore(store, c.CheckpointInterval), eddy.LogOutput(io.Discard))
	if p := env.RestoreProgress(); !p.Done {
		t.Fatalf("progress before Run: %+v, want done", p)
	}
	done := make(chan error, 1)
	go func() { done <- env.Run(context.Background()) }()
	eventually(t, 10*time.Second, func() (bool, string) {
		p := env.RestoreProgress()
		return p.Checkpoint != 0 && !p.Done && p.Restored < p.Subtasks && p.Subtasks > 0, fmt.Sprintf("progress %+v", p)
	})
	close(store.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p := env.RestoreProgress(); !p.Done {
		t.Fatalf("progress after Run: %+v, want done", p)
	}
}
