package tasks_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	_ "github.com/eddyflow/eddy/blob/file" // blob.Open of a directory
	_ "github.com/eddyflow/eddy/blob/s3"   // blob.Open of s3://
	"github.com/eddyflow/eddy/blob/s3/s3test"
	"github.com/eddyflow/eddy/connector/kafka"
	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
	"github.com/eddyflow/eddy/tasks"
)

// Event is an input record.
type Event struct {
	Key string `proto:"1"`
	Seq int64  `proto:"2"`
}

// Count is an output record: the n-th event of its key.
type Count struct {
	Key string `proto:"1"`
	Seq int64  `proto:"2"`
	N   int64  `proto:"3"`
}

// countFn numbers each key's events in keyed state.
type countFn struct{ n *state.Value[int64] }

func (f *countFn) Open(ctx *eddy.OpenContext) error {
	var err error
	f.n, err = state.NewValue[int64](ctx.State, "n")
	return err
}

func (f *countFn) Process(ctx *eddy.Context[string, Count], e *Event) error {
	n, _ := f.n.Get()
	n++
	f.n.Update(n)
	ctx.Emit(Count{Key: e.Key, Seq: e.Seq, N: n})
	return nil
}

const (
	helperEnv  = "EDDY_TASKS_HELPER"
	job        = "counts"
	partitions = 12
	session    = 3 * time.Second
	// The group's other timings in these tests. A handover is a
	// checkpoint of every task moving away; on a loaded 2-core CI machine
	// (three processes, versitygw and kfake on it) one took over 3 s, so
	// the bound is 6 s, inside the rebalance timeout.
	heartbeat = 300 * time.Millisecond
	rebalance = 12 * time.Second
	handover  = 6 * time.Second
)

// helperConfig is what a helper process runs.
type helperConfig struct {
	Brokers []string
	Store   string
	Name    string
	// Rekeyed runs the job of rekeyedBuild (through_test.go) instead of
	// build's.
	Rekeyed bool
	// Exit leaves Config.Rejoin off: a fenced process exits. The other
	// tests keep their processes in the job, so that a survivor whose
	// session a loaded machine let expire does not end the test.
	Exit bool
}

// build is the job of one task: partition task of "in", counted per key,
// into "out" exactly once.
func build(brokers []string) tasks.Build {
	return func(env *eddy.Env, task tasks.Task) error {
		in := eddy.FromSource(env, kafka.Source[Event](kafka.Brokers(brokers...), kafka.Topics("in"), kafka.Partitions(task.ID)))
		keyed := eddy.KeyBy(in, func(e *Event) string { return e.Key })
		counts := eddy.Process[string, Event, Count](keyed, &countFn{}, eddy.Named("count"))
		eddy.ToSink(counts, kafka.Sink[Count]("out", kafka.Brokers(brokers...), kafka.SinkName(task.SinkName("out")),
			kafka.Key(func(c *Count) []byte { return []byte(c.Key) })))
		return nil
	}
}

func (hc helperConfig) build() tasks.Build {
	if hc.Rekeyed {
		return rekeyedBuild(hc.Brokers)
	}
	return build(hc.Brokers)
}

// TestHelperTaskProcess is a process of the job when started by
// startProcess; otherwise it does nothing.
func TestHelperTaskProcess(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		t.Skip("a helper process of the multi-process tests")
	}
	var hc helperConfig
	if err := json.Unmarshal([]byte(raw), &hc); err != nil {
		t.Fatal(err)
	}
	store, err := blob.Open(hc.Store) // a directory, or an s3:// URL
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err = tasks.Run(ctx, tasks.Config{Job: job, Brokers: hc.Brokers, Topic: "in", Store: store, Interval: 100 * time.Millisecond,
		SessionTimeout: session, HeartbeatInterval: heartbeat, RebalanceTimeout: rebalance, HandoverTimeout: handover,
		Options: []eddy.Option{eddy.LogOutput(os.Stderr), eddy.OnCheckpoint(slowCheckpoints(hc.Name))}, Log: prefixed{hc.Name}, Rejoin: !hc.Exit}, hc.build())
	if err != nil {
		fmt.Printf("%s: error %v\n", hc.Name, err)
		os.Exit(1)
	}
	fmt.Printf("%s: left the group\n", hc.Name)
	os.Exit(0)
}

// slowCheckpoints prints where the time of a checkpoint slower than a
// second went, for the test's log when it fails (a slow handover is a
// slow checkpoint).
func slowCheckpoints(name string) func(eddy.CheckpointStats) {
	return func(s eddy.CheckpointStats) {
		if s.Duration < time.Second {
			return
		}
		fmt.Printf("%s: %s slow checkpoint %d: %v; last ack stage %d subtask %d (barrier %v, sync %v, async %v), manifest %v\n",
			name, time.Now().Format("15:04:05.000"), s.ID, s.Duration.Round(time.Millisecond), s.Last.Stage, s.Last.Subtask,
			s.Last.Barrier.Round(time.Millisecond), s.Last.Sync.Round(time.Millisecond), s.Last.Async.Round(time.Millisecond),
			s.ManifestWrite.Round(time.Millisecond))
	}
}

type prefixed struct{ name string }

func (p prefixed) Write(b []byte) (int, error) {
	fmt.Printf("%s: %s", p.name, b)
	return len(b), nil
}

// proc is a running helper process.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan error
}

func startProcess(t *testing.T, hc helperConfig, out *syncLog) *proc {
	t.Helper()
	raw, err := json.Marshal(hc)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperTaskProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(raw))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = out.writer(hc.Name + " stderr")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: hc.Name, cmd: cmd, done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.add(sc.Text())
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return p
}

// syncLog collects the processes' output for the test's log.
type syncLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *syncLog) add(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
}

func (l *syncLog) writer(prefix string) *logWriter { return &logWriter{l: l, prefix: prefix} }

type logWriter struct {
	l      *syncLog
	prefix string
}

func (w *logWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
			w.l.add(w.prefix + ": " + line)
		}
	}
	return len(b), nil
}

func (l *syncLog) dump(t *testing.T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		t.Log(s)
	}
}

// count returns how many lines hold every one of subs.
func (l *syncLog) count(subs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		all := true
		for _, sub := range subs {
			all = all && strings.Contains(s, sub)
		}
		if all {
			n++
		}
	}
	return n
}

// newCluster starts a kfake cluster with the input and output topics of
// partitions partitions, closed when the test ends, and returns its
// brokers.
func newCluster(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "in", "out"),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// pollUntil checks cond every 50 ms (polling logs, registries or the
// output topic) and fails the test if it does not hold within a minute.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out", what)
		}
		time.Sleep(50 * time.Millisecond) // polling, not a synchronization
	}
}

// waitStopped waits up to a minute for p, signalled to stop, to exit, and
// returns its exit error.
func waitStopped(t *testing.T, p *proc) error {
	t.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop within a minute of SIGTERM", p.name)
		return nil
	}
}

// stopEach stops the processes one after another with SIGTERM (a planned
// stop: each hands its tasks over to the others and leaves), and fails
// the test for each that does not exit cleanly.
func stopEach(t *testing.T, procs []*proc) {
	t.Helper()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if err := waitStopped(t, p); err != nil {
			t.Errorf("%s after SIGTERM: %v", p.name, err)
		}
	}
}

// produce writes events from..to-1 with keys k<i % keys>, keyed (so a
// key's events are in one partition, in order).
func produce(t *testing.T, brokers []string, from, to, keys int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("in"))
	if err != nil {
		return err
	}
	defer cl.Close()
	codec := serde.MustFor[Event]()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		e := Event{Key: fmt.Sprintf("k%d", i%keys), Seq: int64(i)}
		v, err := codec.Append(nil, &e)
		if err != nil {
			return err
		}
		recs = append(recs, &kgo.Record{Key: []byte(e.Key), Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// committedOutput reads every committed record of "out".
func committedOutput(t *testing.T, brokers []string) []Count {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListCommittedOffsets(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	codec := serde.MustFor[Count]()
	var out []Count
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading out: timed out with partitions %v unread", want)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				var c Count
				if err := codec.Decode(r.Value, &c); err != nil {
					t.Fatal(err)
				}
				out = append(out, c)
			}
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return out
}

// checkExactlyOnce checks that out holds, for each of events 0..n-1 with
// keys i % keys, exactly the record an uninterrupted run writes.
func checkExactlyOnce(t *testing.T, out []Count, n, keys int) {
	t.Helper()
	want := map[Count]bool{}
	perKey := map[string]int64{}
	for i := range n {
		k := fmt.Sprintf("k%d", i%keys)
		perKey[k]++
		want[Count{Key: k, Seq: int64(i), N: perKey[k]}] = true
	}
	seen := map[Count]bool{}
	bad := 0
	for _, c := range out {
		if !want[c] || seen[c] {
			if bad < 10 {
				t.Errorf("record %+v: unexpected or written twice", c)
			}
			bad++
		}
		seen[c] = true
	}
	if len(seen) != len(want) || bad > 0 {
		t.Fatalf("%d records committed (%d distinct, %d wrong), want each of %d once", len(out), len(seen), bad, n)
	}
}

// TestKillNineThreeProcesses: three processes share a job over a
// 12-partition input; processes are killed with SIGKILL at random times
// and started again; the committed output equals an uninterrupted run's
// (no record lost, none twice). A planned stop (SIGTERM) hands every task
// over.
func TestKillNineThreeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and kills them for half a minute")
	}
	t.Run("file", func(t *testing.T) {
		testKillNine(t, killRun{store: filepath.Join(t.TempDir(), "store"), kills: 4, events: 60_000, batches: 30})
	})
	// The same on an S3 bucket (versitygw): chains by If-None-Match.
	t.Run("s3", func(t *testing.T) {
		srv := s3test.Versitygw(t)
		srv.CreateBucket(t, "tasks")
		t.Setenv("AWS_ACCESS_KEY_ID", srv.Access)
		t.Setenv("AWS_SECRET_ACCESS_KEY", srv.Secret)
		t.Setenv("AWS_SESSION_TOKEN", "")
		t.Setenv("AWS_PROFILE", "")
		t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
		testKillNine(t, killRun{store: "s3://tasks/job?endpoint=" + srv.Endpoint + "&region=" + srv.Region, kills: 3, events: 60_000, batches: 30})
	})
}

// killRun is what a kill test varies.
type killRun struct {
	store           string // the job's store: a directory or an s3:// URL
	kills           int    // SIGKILLs, each followed by a restart
	events, batches int    // the input, produced in batches 250 ms apart
	rekeyed         bool   // the job of rekeyedBuild, checked by checkRekeyed
}

// testKillNine runs three processes of the job while the input arrives,
// kills a random process at random times and starts it again, stops
// them one by one, and checks the committed output.
func testKillNine(t *testing.T, kr killRun) {
	brokers := newCluster(t)
	const keys = 300
	produced := make(chan error, 1)
	go func() {
		for b := range kr.batches {
			if err := produce(t, brokers, b*kr.events/kr.batches, (b+1)*kr.events/kr.batches, keys); err != nil {
				produced <- err
				return
			}
			time.Sleep(250 * time.Millisecond) // the input's pace, not a synchronization
		}
		produced <- nil
	}()
	defer func() { <-produced }()
	var out syncLog
	defer func() {
		if t.Failed() {
			out.dump(t)
		}
	}()
	hc := func(name string) helperConfig {
		return helperConfig{Brokers: brokers, Store: kr.store, Name: name, Rekeyed: kr.rekeyed}
	}
	procs := make([]*proc, 3)
	for i := range procs {
		procs[i] = startProcess(t, hc(fmt.Sprintf("p%d", i)), &out)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	deadline := time.Now().Add(3 * time.Minute)
	kills := 0
	for {
		got := committedOutput(t, brokers)
		if len(got) >= kr.events && kills >= kr.kills {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d kills, %d of %d records committed by the deadline", kills, len(got), kr.events)
		}
		if kills < kr.kills {
			// Kill a random process at a random time, start it again.
			time.Sleep(time.Duration(500+rng.IntN(2000)) * time.Millisecond) // when to kill: random, not a synchronization
			i := rng.IntN(len(procs))
			_ = procs[i].cmd.Process.Kill()
			<-procs[i].done
			kills++
			out.add(fmt.Sprintf("test: killed %s (kill %d)", procs[i].name, kills))
			procs[i] = startProcess(t, hc(fmt.Sprintf("p%d.%d", i, kills)), &out)
			continue
		}
		time.Sleep(200 * time.Millisecond) // polling the output topic
	}
	stopEach(t, procs)
	if kr.rekeyed {
		checkRekeyed(t, committedOutput(t, brokers), kr.events)
	} else {
		checkExactlyOnce(t, committedOutput(t, brokers), kr.events, keys)
	}
	if n := out.count("started"); n < partitions {
		t.Errorf("%d task starts logged, want at least %d", n, partitions)
	}
	t.Logf("%d kills; %d task starts, %d handovers", kills, out.count(": started"), out.count("handed over at"))
}

// TestZombieCommitsNothing: a process paused (SIGSTOP) past its session
// timeout loses its tasks to the others; resumed (SIGCONT), it commits
// nothing of them (its checkpoints are fenced, its tasks lost) and exits
// with the fencing error, and the committed output is still exactly once.
func TestZombieCommitsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and pauses one past its session timeout")
	}
	brokers := newCluster(t)
	const events, keys = 40_000, 300
	if err := produce(t, brokers, 0, events/2, keys); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "store")
	var out syncLog
	defer func() {
		if t.Failed() {
			out.dump(t)
		}
	}()
	zombie := startProcess(t, helperConfig{Brokers: brokers, Store: store, Name: "zombie", Exit: true}, &out)
	other := startProcess(t, helperConfig{Brokers: brokers, Store: store, Name: "other"}, &out)
	waitFor := func(what string, cond func() bool) { t.Helper(); pollUntil(t, what, cond) }
	waitFor("both processes to run tasks", func() bool {
		return out.count("zombie: ") > 0 && out.count("other: ") > 0 && out.count(": started") >= partitions
	})
	// The zombie owns what it started and did not hand over (the other
	// process may have started first, then handed half its tasks over).
	owned := out.count("zombie: ", ": started") - out.count("zombie: ", "handed over")
	before := out.count("other: ", ": started")
	if err := zombie.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The other process takes every task once the zombie's session ends.
	waitFor("the other process to take the zombie's tasks", func() bool {
		return out.count("other: ", ": started") >= before+owned
	})
	if err := produce(t, brokers, events/2, events, keys); err != nil {
		t.Fatal(err)
	}
	if err := zombie.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-zombie.done:
		if err == nil || out.count("zombie: error", "fenced") == 0 {
			t.Fatalf("the zombie exited with %v, want an exit status and the fencing error printed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the zombie did not exit within a minute of SIGCONT")
	}
	if out.count("zombie: ", "lost (the group moved it") == 0 && out.count("zombie: ", "fenced by a newer owner") == 0 {
		t.Fatal("the zombie exited without saying which tasks it lost")
	}
	waitFor("every record committed", func() bool { return len(committedOutput(t, brokers)) >= events })
	_ = other.cmd.Process.Signal(syscall.SIGTERM)
	_ = waitStopped(t, other)
	checkExactlyOnce(t, committedOutput(t, brokers), events, keys)
	t.Logf("the zombie: %d tasks lost, %d fenced", out.count("zombie: ", "lost (the group moved it"), out.count("zombie: ", "fenced by a newer owner"))
}
