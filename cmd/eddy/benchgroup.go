package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/internal/demojob"
)

// benchGroupCmd runs `eddy bench group`: the Kafka demo job run as
// several processes of `eddy demo --kafka --group` (this program, run
// again) against a Kafka cluster in this process (kfake, on 127.0.0.1).
//
//  1. Throughput, with each of --processes: a new cluster is loaded with
//     --events GPS points, then that many processes start together with
//     --until-end (each task stops at its partition's end). The window
//     runs from the first task's start to the last task's end (its input
//     read, its output committed), the joins and the handovers of
//     processes starting together included; events/s is --events over
//     it. The committed totals must be the same for every count.
//  2. Handovers and kills, with the largest count: on a new cluster,
//     loaded, the processes run the job until its totals are committed;
//     then --rounds times one process is stopped (SIGTERM: its tasks'
//     "handed over at checkpoint C in D" lines give the handover times)
//     and started again (the others hand tasks over to it), and --rounds
//     times one is killed (SIGKILL): for each task it owned, the time
//     from the kill to the task's start on a survivor, and to its first
//     completed checkpoint there (its output committed), read from that
//     process's /metrics. The totals are checked again at the end.
func benchGroupCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench group", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b groupBench
	b.cfg = demojob.Config{Seed: 7, EmitEvery: 100, LateEvery: 500}
	fs.Int64Var(&b.cfg.Events, "events", 1_000_000, "GPS points loaded into the input topic (8 partitions: 8 tasks)")
	fs.IntVar(&b.cfg.Drivers, "drivers", 1000, "distinct drivers (keys)")
	fs.IntVar(&b.cfg.Parallelism, "parallelism", 1, "subtasks per operator of each task")
	fs.DurationVar(&b.cfg.CheckpointInterval, "checkpoint-interval", 200*time.Millisecond, "each task's checkpoint interval")
	fs.DurationVar(&b.session, "session-timeout", 3*time.Second, "the group's session timeout: how long a killed process keeps its tasks")
	procs := fs.String("processes", "1,2,3", "process counts of the throughput phase; the largest runs the handover and kill phase")
	fs.IntVar(&b.rounds, "rounds", 3, "stops (SIGTERM) and kills (SIGKILL) of one process in the handover and kill phase (0: skip it)")
	dir := fs.String("dir", "", "working directory (default: a temporary one, removed after)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var counts []int
	for _, s := range strings.Split(*procs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "eddy bench group: --processes %q: want counts of at least 1, such as 1,2,3\n", *procs)
			return 2
		}
		counts = append(counts, n)
	}
	if b.cfg.Events < 1 || b.cfg.Drivers < 1 || b.cfg.Parallelism < 1 || b.rounds < 0 {
		fmt.Fprintln(stderr, "eddy bench group: --events, --drivers and --parallelism must be at least 1, --rounds at least 0")
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "eddy bench group: %v\n", err)
		return 1
	}
	b.exe, b.dir, b.progress = exe, *dir, stderr
	if b.dir == "" {
		if b.dir, err = os.MkdirTemp("", "eddy-bench-group-"); err != nil {
			fmt.Fprintf(stderr, "eddy bench group: %v\n", err)
			return 1
		}
		defer os.RemoveAll(b.dir)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := b.run(ctx, counts, stdout); err != nil {
		fmt.Fprintf(stderr, "eddy bench group: %v\n", err)
		return 1
	}
	return 0
}

// groupBench is one run of `eddy bench group`.
type groupBench struct {
	exe      string // this program: run as `demo --kafka --group`
	dir      string
	cfg      demojob.Config
	session  time.Duration
	rounds   int
	progress io.Writer
}

// tputResult is the throughput phase's result for one process count.
type tputResult struct {
	processes int
	window    time.Duration
	handovers int
	totals    int64
	digest    string
}

func (b *groupBench) run(ctx context.Context, counts []int, stdout io.Writer) error {
	fmt.Fprintf(stdout, "eddy bench group: %d GPS points, %d drivers, 8 tasks (input partitions), parallelism %d per task, checkpoints every %v, session timeout %v; Kafka: kfake in this process on 127.0.0.1; %d CPUs, processes not pinned\n",
		b.cfg.Events, b.cfg.Drivers, b.cfg.Parallelism, b.cfg.CheckpointInterval, b.session, runtime.NumCPU())
	var results []tputResult
	for _, n := range counts {
		r, err := b.throughput(ctx, n)
		if err != nil {
			return fmt.Errorf("%d processes: %w", n, err)
		}
		results = append(results, r)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nthroughput: first task start to last task end (input read, output committed), joins and handovers of processes starting together included")
	fmt.Fprintln(tw, "processes\twindow\tevents/s\tvs first\ttasks handed over\ttotals committed\tdigest\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%v\t%.0f\t%.2fx\t%d\t%d\t%s\t\n", r.processes, r.window.Round(time.Millisecond),
			float64(b.cfg.Events)/r.window.Seconds(), results[0].window.Seconds()/r.window.Seconds(), r.handovers, r.totals, r.digest)
	}
	tw.Flush()
	for _, r := range results[1:] {
		if r.totals != results[0].totals || r.digest != results[0].digest {
			return fmt.Errorf("%d processes committed %d totals (digest %s), %d processes %d (%s)",
				r.processes, r.totals, r.digest, results[0].processes, results[0].totals, results[0].digest)
		}
	}
	if b.rounds == 0 {
		return nil
	}
	return b.moves(ctx, slices.Max(counts), results[0].totals, results[0].digest, stdout)
}

// throughput runs the job to its input's end with n processes.
func (b *groupBench) throughput(ctx context.Context, n int) (tputResult, error) {
	cl, data, err := b.cluster(ctx, fmt.Sprintf("tput-%d", n))
	if err != nil {
		return tputResult{}, err
	}
	defer cl.Close()
	brokers := strings.Join(cl.ListenAddrs(), ",")
	var g procGroup
	defer g.stopAll()
	fmt.Fprintf(b.progress, "throughput, %d processes: running\n", n)
	for i := range n {
		if err := g.start(ctx, b, fmt.Sprintf("p%d", i), brokers, data, "--until-end"); err != nil {
			return tputResult{}, err
		}
	}
	// 8 distinct tasks ended: each read its partition and committed.
	err = g.waitFor(ctx, "every task to end", 10*time.Minute, func() bool { return len(g.ended()) == 8 })
	if err != nil {
		return tputResult{}, err
	}
	first, last := g.window()
	r := tputResult{processes: n, window: last.Sub(first), handovers: g.count("handed over")}
	if err := g.stopAll(); err != nil {
		return r, err
	}
	r.totals, r.digest, err = kafkaDemoDigest(ctx, cl.ListenAddrs())
	return r, err
}

// moves runs the handover and kill phase with n processes.
func (b *groupBench) moves(ctx context.Context, n int, wantTotals int64, wantDigest string, stdout io.Writer) error {
	cl, data, err := b.cluster(ctx, "moves")
	if err != nil {
		return err
	}
	defer cl.Close()
	brokers := strings.Join(cl.ListenAddrs(), ",")
	var g procGroup
	defer g.stopAll()
	live := make([]string, n)
	for i := range live {
		live[i] = fmt.Sprintf("p%d", i)
		if err := g.start(ctx, b, live[i], brokers, data, "--admin", "127.0.0.1:0"); err != nil {
			return err
		}
	}
	committed := func() bool {
		got, _, err := kafkaDemoDigest(ctx, cl.ListenAddrs())
		return err == nil && got >= wantTotals
	}
	fmt.Fprintf(b.progress, "handovers and kills, %d processes: running to the input's end\n", n)
	if err := g.waitFor(ctx, "the totals", 10*time.Minute, committed); err != nil {
		return err
	}
	stable := func() error {
		return g.waitFor(ctx, "every process to run tasks", 5*time.Minute, func() bool { return g.stable(live) })
	}
	if err := stable(); err != nil {
		return err
	}
	var onStop, onJoin []time.Duration
	for r := range b.rounds {
		i := r % n
		fmt.Fprintf(b.progress, "handovers: round %d of %d: SIGTERM %s\n", r+1, b.rounds, live[i])
		stopping := time.Now()
		if err := g.stop(live[i]); err != nil {
			return err
		}
		onStop = append(onStop, g.handovers(live[i], stopping)...)
		others := slices.Delete(slices.Clone(live), i, i+1)
		err := g.waitFor(ctx, "the others to run every task", 5*time.Minute, func() bool { return g.stable(others) })
		if err != nil {
			return err
		}
		restarted := time.Now()
		live[i] = fmt.Sprintf("p%d.%d", i, r+1)
		if err := g.start(ctx, b, live[i], brokers, data, "--admin", "127.0.0.1:0"); err != nil {
			return err
		}
		if err := stable(); err != nil {
			return err
		}
		for _, name := range live {
			if name != live[i] {
				onJoin = append(onJoin, g.handovers(name, restarted)...)
			}
		}
	}
	var toStart, toCommit []time.Duration
	for r := range b.rounds {
		i := (r + 1) % n
		victim := live[i]
		moved := g.owned(victim)
		fmt.Fprintf(b.progress, "kills: round %d of %d: SIGKILL %s (tasks %v)\n", r+1, b.rounds, victim, moved)
		killed := time.Now()
		if err := g.kill(victim); err != nil {
			return err
		}
		for _, task := range moved {
			var owner string
			var at time.Time
			err := g.waitFor(ctx, fmt.Sprintf("task %d to start on a survivor", task), 5*time.Minute, func() bool {
				owner, at = g.startedAfter(task, killed)
				return owner != ""
			})
			if err != nil {
				return err
			}
			toStart = append(toStart, at.Sub(killed))
			url := g.metricsURL(owner)
			var done time.Time
			err = g.waitFor(ctx, fmt.Sprintf("task %d's first checkpoint on %s", task, owner), 5*time.Minute, func() bool {
				n, err := scrapeCheckpoints(ctx, url, fmt.Sprintf("%s.t%d", kafkaDemoJob, task))
				done = time.Now()
				return err == nil && n > 0
			})
			if err != nil {
				return err
			}
			toCommit = append(toCommit, done.Sub(killed))
		}
		live[i] = fmt.Sprintf("p%d.k%d", i, r+1)
		if err := g.start(ctx, b, live[i], brokers, data, "--admin", "127.0.0.1:0"); err != nil {
			return err
		}
		if err := stable(); err != nil {
			return err
		}
	}
	if err := g.stopAll(); err != nil {
		return err
	}
	totals, digest, err := kafkaDemoDigest(ctx, cl.ListenAddrs())
	if err != nil {
		return err
	}
	if totals != wantTotals || digest != wantDigest {
		return fmt.Errorf("after the stops and kills: %d totals committed (digest %s), want %d (%s)", totals, digest, wantTotals, wantDigest)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nmoves with %d processes, %d rounds each; totals after them: %d (digest %s, as above)\n", n, b.rounds, totals, digest)
	fmt.Fprintln(tw, "what\tsamples\tp50\tp99\tmax\t")
	row := func(what string, ds []time.Duration) {
		slices.Sort(ds)
		q := func(q float64) time.Duration { return durQuantile(ds, q).Round(time.Millisecond) }
		fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t%v\t\n", what, len(ds), q(0.5), q(0.99), q(1))
	}
	row("handover on revoke: SIGTERM of a process (StopWithCheckpoint per task, or a cancel while it restores)", onStop)
	row("handover on revoke: the others' to a process joining", onJoin)
	row("SIGKILL -> the moved task started on a survivor", toStart)
	row("SIGKILL -> its first checkpoint there (output committed)", toCommit)
	tw.Flush()
	return nil
}

// cluster starts a Kafka cluster in this process and loads the input;
// it returns the cluster and the job's --data directory.
func (b *groupBench) cluster(ctx context.Context, name string) (*kfake.Cluster, string, error) {
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		return nil, "", err
	}
	data := filepath.Join(b.dir, name)
	c := b.cfg
	c.Data = data
	start := time.Now()
	if err := kafkaDemoLoad(ctx, c, cl.ListenAddrs(), io.Discard, false, eddy.LogOutput(io.Discard), eddy.Parallelism(1)); err != nil {
		cl.Close()
		return nil, "", err
	}
	fmt.Fprintf(b.progress, "%s: loaded %d GPS points in %v\n", name, c.Events, time.Since(start).Round(time.Millisecond))
	return cl, data, nil
}

// procGroup is the processes of one phase and their output lines.
type procGroup struct {
	mu    sync.Mutex
	procs map[string]*benchProc
	lines []procLine // every process's, in the order read
}

type benchProc struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process exited and its output is read
	err     error
	errPath string // where its stderr goes
}

// stderrTail is the end of the process's stderr, where a failing process
// says why, for an error about its exit ("" if it wrote nothing).
func (p *benchProc) stderrTail() string {
	b, err := os.ReadFile(p.errPath)
	if err != nil {
		return " (its stderr: " + err.Error() + ")"
	}
	const tail = 2000
	if len(b) > tail {
		b = b[len(b)-tail:]
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return "; its stderr (" + p.errPath + ") ends:\n" + s
	}
	return ""
}

// procLine is a line a process printed and when it was read.
type procLine struct {
	proc string
	at   time.Time
	text string
}

// start runs `demo --kafka brokers --group` as the process name.
func (g *procGroup) start(ctx context.Context, b *groupBench, name, brokers, data string, extra ...string) error {
	c := b.cfg
	args := append([]string{"demo", "--kafka", brokers, "--group", "--data", data, "--quiet",
		"--events", fmt.Sprint(c.Events), "--drivers", fmt.Sprint(c.Drivers), "--seed", fmt.Sprint(c.Seed),
		"--emit-every", fmt.Sprint(c.EmitEvery), "--late-every", fmt.Sprint(c.LateEvery), "--parallelism", fmt.Sprint(c.Parallelism),
		"--checkpoint-interval", c.CheckpointInterval.String(), "--session-timeout", b.session.String()}, extra...)
	cmd := exec.Command(b.exe, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	errPath := filepath.Join(b.dir, name+".stderr")
	errf, err := os.Create(errPath)
	if err != nil {
		return err
	}
	cmd.Stderr = errf
	if err := cmd.Start(); err != nil {
		errf.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &benchProc{cmd: cmd, done: make(chan struct{}), errPath: errPath}
	g.mu.Lock()
	if g.procs == nil {
		g.procs = map[string]*benchProc{}
	}
	g.procs[name] = p
	g.mu.Unlock()
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			g.mu.Lock()
			g.lines = append(g.lines, procLine{proc: name, at: time.Now(), text: sc.Text()})
			g.mu.Unlock()
		}
		p.err = cmd.Wait()
		errf.Close()
	}()
	return nil
}

// stop sends the process SIGTERM and waits for it to hand its tasks over
// and exit.
func (g *procGroup) stop(name string) error {
	return g.end(name, syscall.SIGTERM)
}

// kill sends the process SIGKILL and waits for it to be gone.
func (g *procGroup) kill(name string) error {
	return g.end(name, syscall.SIGKILL)
}

func (g *procGroup) end(name string, sig syscall.Signal) error {
	g.mu.Lock()
	p := g.procs[name]
	delete(g.procs, name)
	g.mu.Unlock()
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within 2 minutes of %v", name, sig)
	}
	if sig == syscall.SIGTERM && p.err != nil {
		return fmt.Errorf("%s after SIGTERM: %w%s", name, p.err, p.stderrTail())
	}
	return nil
}

// stopAll stops every process still running.
func (g *procGroup) stopAll() error {
	g.mu.Lock()
	var names []string
	for name := range g.procs {
		names = append(names, name)
	}
	g.mu.Unlock()
	var errs []error
	for _, name := range names {
		errs = append(errs, g.stop(name))
	}
	return errors.Join(errs...)
}

// waitFor polls cond until it holds, or fails after timeout or when a
// process exited by itself.
func (g *procGroup) waitFor(ctx context.Context, what string, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		g.mu.Lock()
		for name, p := range g.procs {
			select {
			case <-p.done:
				g.mu.Unlock()
				return fmt.Errorf("waiting for %s: process %s exited: %w%s", what, name, p.err, p.stderrTail())
			default:
			}
		}
		g.mu.Unlock()
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: timed out after %v", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond): // polling the processes' output
		}
	}
	return nil
}

// The task lines of tasks.Run's log that the bench reads.
var (
	taskLine = regexp.MustCompile(`task (\d+): (started|ended|handed over|.*stopped without a checkpoint|fenced)`)
	// A task handed over at a checkpoint, or cancelled during its restore
	// (a process stopped right after it got the task: nothing newer than
	// the checkpoint it restores to hand over).
	handoverLine = regexp.MustCompile(`task \d+: handed over (?:at checkpoint \d+|during its restore) in (\S+)(?:$| \()`)
)

// taskOf returns the task and the event of a task line, or -1.
func taskOf(text string) (int, string) {
	m := taskLine.FindStringSubmatch(text)
	if m == nil {
		return -1, ""
	}
	t, _ := strconv.Atoi(m[1])
	ev := m[2]
	if strings.HasSuffix(ev, "stopped without a checkpoint") {
		ev = "stopped"
	}
	return t, ev
}

// ownedBy returns the tasks each process runs, from their lines.
func (g *procGroup) ownedBy() map[string]map[int]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]map[int]bool{}
	for _, l := range g.lines {
		t, ev := taskOf(l.text)
		if t < 0 || ev == "ended" {
			continue
		}
		if out[l.proc] == nil {
			out[l.proc] = map[int]bool{}
		}
		if ev == "started" {
			out[l.proc][t] = true
		} else {
			delete(out[l.proc], t)
		}
	}
	return out
}

// owned returns the tasks the process runs, sorted.
func (g *procGroup) owned(name string) []int {
	var out []int
	for t := range g.ownedBy()[name] {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// stable reports whether the processes live run the 8 tasks between them,
// each some and each task once.
func (g *procGroup) stable(live []string) bool {
	by := g.ownedBy()
	seen := map[int]bool{}
	for _, name := range live {
		if len(by[name]) == 0 {
			return false
		}
		for t := range by[name] {
			if seen[t] {
				return false
			}
			seen[t] = true
		}
	}
	return len(seen) == 8
}

// ended returns the tasks that ended (read their input to its end).
func (g *procGroup) ended() map[int]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[int]bool{}
	for _, l := range g.lines {
		if t, ev := taskOf(l.text); ev == "ended" {
			out[t] = true
		}
	}
	return out
}

// window returns when the first task started and the last task ended.
func (g *procGroup) window() (first, last time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ended := map[int]bool{}
	for _, l := range g.lines {
		t, ev := taskOf(l.text)
		switch {
		case ev == "started" && first.IsZero():
			first = l.at
		case ev == "ended" && !ended[t]:
			ended[t] = true
			last = l.at
		}
	}
	return first, last
}

// handovers returns the handover times the process name logged after
// since (every process's, for name "").
func (g *procGroup) handovers(name string, since time.Time) []time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []time.Duration
	for _, l := range g.lines {
		if (name != "" && l.proc != name) || l.at.Before(since) {
			continue
		}
		if m := handoverLine.FindStringSubmatch(l.text); m != nil {
			if d, err := time.ParseDuration(m[1]); err == nil {
				out = append(out, d)
			}
		}
	}
	return out
}

// count returns how many lines hold sub.
func (g *procGroup) count(sub string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, l := range g.lines {
		if strings.Contains(l.text, sub) {
			n++
		}
	}
	return n
}

// startedAfter returns the process that started task after since, and
// when, or "".
func (g *procGroup) startedAfter(task int, since time.Time) (string, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range g.lines {
		if t, ev := taskOf(l.text); t == task && ev == "started" && l.at.After(since) {
			return l.proc, l.at
		}
	}
	return "", time.Time{}
}

// metricsURL returns the /metrics URL the process printed, or "".
func (g *procGroup) metricsURL(name string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range g.lines {
		if _, url, ok := strings.Cut(l.text, "metrics at "); ok && l.proc == name {
			return url
		}
	}
	return ""
}

// scrapeCheckpoints returns eddy_checkpoints_completed_total of job at
// url (0 while the job does not run there).
func scrapeCheckpoints(ctx context.Context, url, job string) (float64, error) {
	if url == "" {
		return 0, errors.New("the process printed no metrics address")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	// The text format: one series a line, its value last.
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "eddy_checkpoints_completed_total{") && strings.Contains(line, `job_name="`+job+`"`) {
			return strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		}
	}
	return 0, sc.Err()
}

// durQuantile returns the q-quantile of sorted ds (the nearest rank), 0
// for none.
func durQuantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}
