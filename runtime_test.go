package eddy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/state"
)

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func readLines(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	var out []string
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			out = append(out, sc.Text())
		}
		fh.Close()
	}
	sort.Strings(out)
	return out
}

type sumOut struct {
	Driver string `json:"driver" proto:"1"`
	Sum    int64  `json:"sum" proto:"2"`
}

func TestMapFilterFlatMapReduce(t *testing.T) {
	dir := t.TempDir()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}))
	pts := eddy.FromSource(env, datagen.GPS(datagen.Seed(1), datagen.Events(3000), datagen.Drivers(10)))
	// Keep even-numbered drivers, emit each point twice, key, sum.
	even := eddy.Filter(pts, func(p *datagen.GPSPoint) bool { return (p.DriverID[len(p.DriverID)-1]-'0')%2 == 0 })
	twice := eddy.FlatMap(even, func(p *datagen.GPSPoint, emit func(sumOut)) error {
		emit(sumOut{Driver: p.DriverID, Sum: 1})
		emit(sumOut{Driver: p.DriverID, Sum: 1})
		return nil
	})
	keyed := eddy.KeyBy(twice, func(s *sumOut) string { return s.Driver })
	sums := eddy.Reduce(keyed, func(a, b sumOut) sumOut { return sumOut{Driver: a.Driver, Sum: a.Sum + b.Sum} })
	last := eddy.Filter(sums, func(s *sumOut) bool { return s.Sum == 600 })
	eddy.ToSink(last, file.JSONLines[sumOut](dir))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, dir)
	// 10 drivers, 300 points each, 5 even drivers, each point twice: one
	// line per even driver when its sum reaches 600.
	if len(got) != 5 {
		t.Fatalf("got %d lines: %v", len(got), got)
	}
	for _, l := range got {
		var s sumOut
		if err := json.Unmarshal([]byte(l), &s); err != nil || s.Sum != 600 {
			t.Fatalf("line %q", l)
		}
	}
}

type countV1 struct {
	N int64 `proto:"1"`
}

type countAdded struct {
	N    int64  `proto:"1"`
	Note string `proto:"2"`
}

type countBroken struct {
	N string `proto:"1"`
}

// counter counts points per driver in a state of type V.
type counter[V any] struct {
	st  *state.Value[V]
	inc func(*V)
}

func (c *counter[V]) Open(ctx *eddy.OpenContext) error {
	var err error
	c.st, err = state.NewValue[V](ctx.State, "count")
	return err
}

func (c *counter[V]) Process(ctx *eddy.Context[string, sumOut], p *datagen.GPSPoint) error {
	v, _ := c.st.Get()
	c.inc(&v)
	c.st.Update(v)
	return nil
}

// cancelAfterCheckpoint returns a context that a job's run is cancelled through once
// its checkpoint id completes (never for 0), and the option that does it.
func cancelAfterCheckpoint(id uint64) (context.Context, context.CancelFunc, eddy.Option) {
	ctx, cancel := context.WithCancel(context.Background())
	return ctx, cancel, eddy.OnCheckpoint(func(s eddy.CheckpointStats) {
		if id > 0 && s.ID >= id {
			cancel()
		}
	})
}

func runCounter[V any](t *testing.T, data, out string, inc func(*V), cancelAfter int64, logs *logBuf) error {
	ctx, cancel, cancelOpt := cancelAfterCheckpoint(uint64(cancelAfter))
	defer cancel()
	env := eddy.New(eddy.Parallelism(2), eddy.Checkpoints(data, 10*time.Millisecond), eddy.LogOutput(logs), eddy.Restarts(0, 0), cancelOpt)
	pts := eddy.FromSource(env, datagen.GPS(datagen.Seed(2), datagen.Events(200_000), datagen.Drivers(50), datagen.Rate(100_000)))
	keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
	counts := eddy.Process[string, datagen.GPSPoint, sumOut](keyed, &counter[V]{inc: inc}, eddy.Named("counter"))
	eddy.ToSink(counts, file.JSONLines[sumOut](out))
	return env.Run(ctx)
}

func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if d.Name() == ".lock" {
			return nil // the storage lock names its holder and since when: not checkpoint data
		}
		if rel, _ := filepath.Rel(dir, path); strings.HasPrefix(rel, "void"+string(filepath.Separator)) {
			// Every attempt makes the ids just past the newest void
			// (checkpoint.VoidAhead): markers of ids no checkpoint has,
			// not checkpoint data.
			return nil
		}
		b, err := os.ReadFile(path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(h.Sum(nil))
}

func TestIncompatibleStateSchemaFailsRestore(t *testing.T) {
	dir := t.TempDir()
	data, out := filepath.Join(dir, "data"), filepath.Join(dir, "out")
	logs := &logBuf{}
	err := runCounter(t, data, out, func(v *countV1) { v.N++ }, 3, logs)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}
	before := treeHash(t, data)

	// int64 -> string for field 1: the restore must fail before touching
	// state, name the operator, the state, the field and the rule, and
	// leave the checkpoint as it was.
	err = runCounter(t, data, out, func(v *countBroken) { v.N += "x" }, 0, logs)
	if err == nil {
		t.Fatal("restore with an incompatible state type succeeded")
	}
	for _, want := range []string{"counter", `state "count"`, "(1)", "int64", "string"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if treeHash(t, data) != before {
		t.Fatal("the failed restore changed the checkpoint directory")
	}

	// Adding a field is compatible: the job resumes and finishes.
	if err := runCounter(t, data, out, func(v *countAdded) { v.N++ }, 0, logs); err != nil {
		t.Fatalf("compatible evolution: %v\nlogs:\n%s", err, logs)
	}
	if !strings.Contains(logs.String(), "restoring from checkpoint") {
		t.Fatalf("the evolved job did not restore:\n%s", logs)
	}
}

// ticker registers a processing-time timer per point and emits on firing.
type ticker struct {
	seen *state.Value[int64]
}

func (k *ticker) Open(ctx *eddy.OpenContext) error {
	var err error
	k.seen, err = state.NewValue[int64](ctx.State, "seen")
	return err
}

func (k *ticker) Process(ctx *eddy.Context[string, sumOut], p *datagen.GPSPoint) error {
	n, _ := k.seen.Get()
	k.seen.Update(n + 1)
	if n == 0 {
		ctx.RegisterProcessingTimer(time.Now().Add(5 * time.Millisecond))
		ctx.RegisterProcessingTimer(time.Now().Add(5 * time.Millisecond).Truncate(time.Millisecond))
	}
	return nil
}

func (k *ticker) OnTimer(ctx *eddy.Context[string, sumOut], at time.Time) error {
	n, _ := k.seen.Get()
	ctx.Emit(sumOut{Driver: ctx.Key, Sum: n})
	return nil
}

func TestProcessingTimersFire(t *testing.T) {
	out := t.TempDir()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}))
	// 20 drivers over ~400 ms, so timers registered early fire while the
	// job still runs.
	pts := eddy.FromSource(env, datagen.GPS(datagen.Seed(3), datagen.Events(4000), datagen.Drivers(20), datagen.Rate(10_000)))
	keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
	fired := eddy.Process[string, datagen.GPSPoint, sumOut](keyed, &ticker{})
	eddy.ToSink(fired, file.JSONLines[sumOut](out))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, out)
	drivers := map[string]int{}
	for _, l := range lines {
		var s sumOut
		_ = json.Unmarshal([]byte(l), &s)
		drivers[s.Driver]++
		if s.Sum < 1 {
			t.Fatalf("timer fired before its point was counted: %s", l)
		}
	}
	// Each driver registered timers for two distinct times at most; both
	// may fire, and no driver fires more often than it registered.
	if len(drivers) != 20 {
		t.Fatalf("timers fired for %d of 20 drivers: %v", len(drivers), drivers)
	}
	for d, n := range drivers {
		if n > 2 {
			t.Fatalf("driver %s fired %d times", d, n)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	env := eddy.New()
	if err := env.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no source") {
		t.Fatalf("empty job: %v", err)
	}
	env = eddy.New(eddy.LogOutput(&logBuf{}))
	pts := eddy.FromSource(env, datagen.GPS(datagen.Events(10)))
	_ = eddy.Map(pts, func(p *datagen.GPSPoint) int { return 1 })
	if err := env.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "not consumed") {
		t.Fatalf("dangling stream: %v", err)
	}
	env = eddy.New(eddy.Checkpoints(t.TempDir(), time.Millisecond), eddy.LogOutput(&logBuf{}))
	pts = eddy.FromSource(env, datagen.GPS(datagen.Events(10)))
	eddy.ToSink(pts, file.JSONLines[datagen.GPSPoint](t.TempDir()))
	if err := env.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "10ms") {
		t.Fatalf("1ms interval: %v", err)
	}
}

// countingSource wraps the GPS source and counts the records it hands out.
type countingSource struct {
	eddy.Source[datagen.GPSPoint]
	n *atomic.Int64
}

func (c countingSource) OpenSplit(ctx context.Context, split int, pos []byte) (eddy.SplitReader[datagen.GPSPoint], error) {
	r, err := c.Source.OpenSplit(ctx, split, pos)
	return countingReader{r, c.n}, err
}

type countingReader struct {
	eddy.SplitReader[datagen.GPSPoint]
	n *atomic.Int64
}

func (c countingReader) Next(rec *datagen.GPSPoint) (eddy.ReadStatus, error) {
	st, err := c.SplitReader.Next(rec)
	if st == eddy.Record {
		c.n.Add(1)
	}
	return st, err
}

// slowSink writes one record per 100µs.
type slowSink struct{ n *atomic.Int64 }

func (s slowSink) Name() string                            { return "slow" }
func (s slowSink) Recover(context.Context, [][]byte) error { return nil }
func (s slowSink) Commit(context.Context, [][]byte) error  { return nil }
func (s slowSink) OpenWriter(context.Context, int, int) (eddy.SinkWriter[datagen.GPSPoint], error) {
	return s, nil
}
func (s slowSink) Write(*datagen.GPSPoint) error {
	time.Sleep(100 * time.Microsecond)
	s.n.Add(1)
	return nil
}
func (s slowSink) PreCommit(uint64) ([]byte, error) { return nil, nil }
func (s slowSink) Close() error                     { return nil }

func TestSlowSinkBackpressuresTheSource(t *testing.T) {
	var read, written atomic.Int64
	env := eddy.New(eddy.Parallelism(2), eddy.BatchSize(64), eddy.LogOutput(&logBuf{}))
	src := countingSource{datagen.GPS(datagen.Events(1_000_000), datagen.Drivers(100)), &read}
	pts := eddy.FromSource[datagen.GPSPoint](env, src)
	keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
	same := eddy.Reduce(keyed, func(a, b datagen.GPSPoint) datagen.GPSPoint { return b })
	eddy.ToSink[datagen.GPSPoint](same, slowSink{&written})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.Run(ctx) }()
	time.Sleep(400 * time.Millisecond)
	r, w := read.Load(), written.Load()
	cancel()
	<-done
	// In flight at most: per source subtask 256 records being read, per
	// channel 4 batches of 64 plus one being filled, per keyed subtask one
	// batch being processed: a few thousand records, far below what an
	// unthrottled source reads in 400 ms (millions).
	const bound = 2*256 + 2*2*(4+1)*64 + 2*64 + 1024
	if r-w > bound {
		t.Fatalf("source read %d records while the sink wrote %d: %d in flight, bound %d", r, w, r-w, bound)
	}
	if w == 0 {
		t.Fatal("nothing was written")
	}
}

func TestFanOut(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}))
	pts := eddy.FromSource(env, datagen.GPS(datagen.Events(1000), datagen.Drivers(10)))
	eddy.ToSink(pts, file.JSONLines[datagen.GPSPoint](a))
	keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
	ones := eddy.Map(pts, func(p *datagen.GPSPoint) sumOut { return sumOut{Driver: p.DriverID, Sum: 1} })
	byDriver := eddy.KeyBy(ones, func(s *sumOut) string { return s.Driver })
	sums := eddy.Reduce(byDriver, func(x, y sumOut) sumOut { return sumOut{Driver: x.Driver, Sum: x.Sum + y.Sum} })
	eddy.ToSink(eddy.Filter(sums, func(s *sumOut) bool { return s.Sum == 100 }), file.JSONLines[sumOut](b))
	counts := eddy.Reduce(eddy.KeyBy(eddy.Map(pts, func(p *datagen.GPSPoint) sumOut { return sumOut{Driver: "all", Sum: 1} }),
		func(s *sumOut) string { return s.Driver }), func(x, y sumOut) sumOut { return sumOut{Driver: "all", Sum: x.Sum + y.Sum} })
	eddy.ToSink(eddy.Filter(counts, func(s *sumOut) bool { return s.Sum == 1000 }), file.JSONLines[sumOut](filepath.Join(b, "all")))
	_ = keyed // a keyed stream nobody reads is an error
	if err := env.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "not consumed") {
		t.Fatalf("unconsumed keyed stream: %v", err)
	}
}

func TestFanOutDeliversToEveryConsumer(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}))
	pts := eddy.FromSource(env, datagen.GPS(datagen.Events(1000), datagen.Drivers(10)))
	eddy.ToSink(pts, file.JSONLines[datagen.GPSPoint](a))
	ones := eddy.Map(pts, func(p *datagen.GPSPoint) sumOut { return sumOut{Driver: p.DriverID, Sum: 1} })
	sums := eddy.Reduce(eddy.KeyBy(ones, func(s *sumOut) string { return s.Driver }),
		func(x, y sumOut) sumOut { return sumOut{Driver: x.Driver, Sum: x.Sum + y.Sum} })
	eddy.ToSink(eddy.Filter(sums, func(s *sumOut) bool { return s.Sum == 100 }), file.JSONLines[sumOut](b))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(readLines(t, a)); got != 1000 {
		t.Fatalf("first consumer got %d records", got)
	}
	if got := len(readLines(t, b)); got != 10 {
		t.Fatalf("second consumer got %d drivers at 100", got)
	}
}

// slowStart delays the first read of one split, as a source subtask that
// starts late would.
type slowStart struct{ eddy.Source[datagen.GPSPoint] }

func (s slowStart) OpenSplit(ctx context.Context, split int, pos []byte) (eddy.SplitReader[datagen.GPSPoint], error) {
	r, err := s.Source.OpenSplit(ctx, split, pos)
	if split == 1 {
		return &lateReader{SplitReader: r, until: time.Now().Add(150 * time.Millisecond)}, err
	}
	return r, err
}

type lateReader struct {
	eddy.SplitReader[datagen.GPSPoint]
	until time.Time
}

func (r *lateReader) Next(rec *datagen.GPSPoint) (eddy.ReadStatus, error) {
	if time.Now().Before(r.until) {
		return eddy.Idle, nil
	}
	return r.SplitReader.Next(rec)
}

// TestAlignedWatermarksHoldFastSubtasks starts one of two source subtasks
// late. With alignment the other waits, so points an hour late are late in
// every run; the window results and late points equal a second run without
// the delay.
func TestAlignedWatermarksHoldFastSubtasks(t *testing.T) {
	run := func(delay bool) ([]string, []string) {
		dir := t.TempDir()
		env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}))
		var src eddy.Source[datagen.GPSPoint] = datagen.GPS(datagen.Events(60_000), datagen.Drivers(100), datagen.Splits(2),
			datagen.Spacing(10*time.Millisecond), datagen.LateEvery(7, time.Hour))
		if delay {
			src = slowStart{src}
		}
		pts := eddy.FromSource(env, src, eddy.Watermarks(func(p *datagen.GPSPoint) time.Time { return p.Timestamp },
			100*time.Millisecond, eddy.AlignWatermarks(5*time.Second)))
		keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
		w := eddy.AggregateWindows(keyed, eddy.Tumbling(10*time.Second), eddy.Aggregator[string, datagen.GPSPoint, int64, sumOut]{
			Add:    func(n int64, _ *datagen.GPSPoint) int64 { return n + 1 },
			Result: func(k string, _ eddy.Window, n int64) sumOut { return sumOut{Driver: k, Sum: n} },
		})
		eddy.ToSink(w.Results, file.JSONLines[sumOut](filepath.Join(dir, "w")))
		eddy.ToSink(w.Late, file.JSONLines[datagen.GPSPoint](filepath.Join(dir, "late")))
		if err := env.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return readLines(t, filepath.Join(dir, "w")), readLines(t, filepath.Join(dir, "late"))
	}
	w1, l1 := run(false)
	w2, l2 := run(true)
	if len(l1) == 0 {
		t.Fatal("no late points: the test does not exercise lateness")
	}
	if strings.Join(w1, "\n") != strings.Join(w2, "\n") || strings.Join(l1, "\n") != strings.Join(l2, "\n") {
		t.Fatalf("a late-starting subtask changed the results: %d/%d windows, %d/%d late", len(w1), len(w2), len(l1), len(l2))
	}
}
