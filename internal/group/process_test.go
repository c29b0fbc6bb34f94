package group

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/internal/taskchain"
)

// helperEnv holds the JSON helperConfig of a member process started by
// startMember; TestHelperMember does nothing without it.
const helperEnv = "GROUP_HELPER_MEMBER"

// helperConfig is what a member process joins and where its tasks' chains
// are.
type helperConfig struct {
	Name     string
	Brokers  []string
	Topic    string
	Instance string
	Store    string        // a file store's directory
	Session  time.Duration // 0: testSession
}

// TestHelperMember is a member process of the process tests, not a test.
// It joins the group of job "j" and runs a task loop over the tasks'
// commit chains (internal/taskchain on a file store): Assigned claims
// each task's chain, Revoked commits each task once more (the final
// checkpoint of a handover), Lost keeps the chains aside without
// committing. It reports each call on stdout as
// "@ <assigned|revoked|lost> <unix ns> <tasks, comma-separated>", the
// time taken when Assigned starts and just before Revoked and Lost
// return, and on each line of stdin does the command: "commit" commits
// every owned task, "commit-lost" commits on the chains of the lost tasks
// (a zombie's attempt), each answered "@ commit <task> ok <seq>" or
// "@ commit <task> fenced <newer epoch>" or "@ commit <task> error <msg>"
// and then "@ done"; "close" Closes the member and exits.
func TestHelperMember(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		t.Skip("a helper process of the process tests")
	}
	var hc helperConfig
	if err := json.Unmarshal([]byte(raw), &hc); err != nil {
		panic(err)
	}
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Printf("@ "+format+"\n", args...)
	}
	fail := func(err error) {
		say("error %s", strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
	store, err := file.New(hc.Store)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	owner := taskchain.ProcessOwner(hc.Name)
	var mu sync.Mutex
	chains := map[int32]*taskchain.Chain{}
	lost := map[int32]*taskchain.Chain{}
	csv := func(tasks []int32) string {
		s := make([]string, len(tasks))
		for i, t := range tasks {
			s[i] = fmt.Sprint(t)
		}
		return strings.Join(s, ",")
	}
	cfg := Config{
		Brokers: hc.Brokers, Job: "j", Topic: hc.Topic, Instance: hc.Instance,
		SessionTimeout: testSession, HeartbeatInterval: testHeartbeat, RebalanceTimeout: testRebalance, HandoverTimeout: testHandover,
		Assigned: func(tasks []int32) {
			at := time.Now()
			mu.Lock()
			defer mu.Unlock()
			for _, task := range tasks {
				c, err := taskchain.Open(ctx, store, fmt.Sprintf("t%d", task))
				if err == nil {
					_, err = c.Claim(ctx, owner)
				}
				if err != nil {
					fail(err)
				}
				chains[task] = c
			}
			say("assigned %d %s", at.UnixNano(), csv(tasks))
		},
		Revoked: func(ctx context.Context, tasks []int32) error {
			mu.Lock()
			defer mu.Unlock()
			var errs []error
			for _, task := range tasks {
				if _, err := chains[task].Commit(ctx, []byte("handover")); err != nil {
					errs = append(errs, err)
				}
				delete(chains, task)
			}
			say("revoked %d %s", time.Now().UnixNano(), csv(tasks))
			return errors.Join(errs...)
		},
		Lost: func(tasks []int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, task := range tasks {
				lost[task] = chains[task]
				delete(chains, task)
			}
			say("lost %d %s", time.Now().UnixNano(), csv(tasks))
		},
		Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, hc.Name+": "+format+"\n", args...) },
	}
	if hc.Session > 0 {
		cfg.SessionTimeout = hc.Session
	}
	jctx, cancel := context.WithTimeout(ctx, time.Minute)
	m, err := Join(jctx, cfg)
	cancel()
	if err != nil {
		fail(err)
	}
	commit := func(cs map[int32]*taskchain.Chain) {
		mu.Lock()
		defer mu.Unlock()
		for _, task := range slices.Sorted(func(yield func(int32) bool) {
			for t := range cs {
				if !yield(t) {
					return
				}
			}
		}) {
			r, err := cs[task].Commit(ctx, []byte("checkpoint"))
			var fe *taskchain.FencedError
			switch {
			case errors.As(err, &fe):
				say("commit %d fenced %d", task, fe.Newer)
			case err != nil:
				say("commit %d error %s", task, strings.ReplaceAll(err.Error(), "\n", " "))
			default:
				say("commit %d ok %d", task, r.Seq)
			}
		}
		say("done")
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "commit":
			commit(chains)
		case "commit-lost":
			commit(lost)
		case "close":
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			err := m.Close(cctx)
			cancel()
			if err != nil {
				fail(err)
			}
			os.Exit(0)
		}
	}
	os.Exit(0)
}

// event is one line of a member process, or the test's note that it was
// killed.
type event struct {
	at    time.Time
	proc  string
	kind  string // assigned, revoked, lost, killed
	tasks []int32
}

// procs runs member processes and keeps what they report.
type procs struct {
	t     *testing.T
	hc    helperConfig // Brokers, Topic, Store
	mu    sync.Mutex
	log   []event
	all   map[string]*proc
	start time.Time
}

type proc struct {
	name    string
	cmd     *exec.Cmd
	in      io.WriteCloser
	answers chan string // lines that are not events
	exited  chan error
}

func newProcs(t *testing.T, brokers []string, topic string) *procs {
	return &procs{t: t, hc: helperConfig{Brokers: brokers, Topic: topic, Store: t.TempDir()}, all: map[string]*proc{}, start: time.Now()}
}

// startMember starts member process name (static with instance, if set).
func (ps *procs) startMember(name, instance string) *proc {
	return ps.startMemberSession(name, instance, 0)
}

// startMemberSession starts member process name with session timeout
// session (0: testSession).
func (ps *procs) startMemberSession(name, instance string, session time.Duration) *proc {
	t := ps.t
	t.Helper()
	hc := ps.hc
	hc.Name, hc.Instance, hc.Session = name, instance, session
	raw, err := json.Marshal(hc)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMember$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, in: in, answers: make(chan string, 1024), exited: make(chan error, 1)}
	ps.mu.Lock()
	ps.all[name] = p
	ps.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "@ ")
			if !ok {
				continue
			}
			f := strings.Fields(line)
			switch f[0] {
			case "assigned", "revoked", "lost":
				ns, _ := strconv.ParseInt(f[1], 10, 64)
				e := event{at: time.Unix(0, ns), proc: name, kind: f[0]}
				if len(f) > 2 {
					for _, s := range strings.Split(f[2], ",") {
						n, _ := strconv.Atoi(s)
						e.tasks = append(e.tasks, int32(n))
					}
				}
				ps.mu.Lock()
				ps.log = append(ps.log, e)
				ps.mu.Unlock()
			default:
				p.answers <- line
			}
		}
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
	})
	return p
}

// owned returns the tasks each process owns by its own reports (a killed
// one owns nothing).
func (ps *procs) owned() map[string][]int32 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	sets := map[string]map[int32]bool{}
	for _, e := range ps.log {
		s := sets[e.proc]
		if s == nil {
			s = map[int32]bool{}
			sets[e.proc] = s
		}
		for _, task := range e.tasks {
			s[task] = e.kind == "assigned"
		}
		if e.kind == "killed" {
			clear(s)
		}
	}
	out := map[string][]int32{}
	for name, s := range sets {
		for task, own := range s {
			if own {
				out[name] = append(out[name], task)
			}
		}
		slices.Sort(out[name])
	}
	return out
}

// waitOwned waits until cond holds of owned().
func (ps *procs) waitOwned(what string, cond func(map[string][]int32) bool) map[string][]int32 {
	ps.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		o := ps.owned()
		if cond(o) {
			return o
		}
		if time.Now().After(deadline) {
			ps.t.Fatalf("%s: not in 45 s; the processes own %v", what, o)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

// stableOver is a condition: the named processes own every one of n tasks
// exactly once between them, as evenly as possible, and no other process
// owns any.
func stableOver(n int, names ...string) func(map[string][]int32) bool {
	return func(o map[string][]int32) bool {
		seen := map[int32]bool{}
		lo, hi := n, 0
		for name, ts := range o {
			if !slices.Contains(names, name) && len(ts) > 0 {
				return false
			}
			for _, t := range ts {
				if seen[t] {
					return false
				}
				seen[t] = true
			}
		}
		for _, name := range names {
			lo, hi = min(lo, len(o[name])), max(hi, len(o[name]))
		}
		return len(seen) == n && hi-lo <= 1
	}
}

// kill kills p with SIGKILL, waits for it, and notes that it owns
// nothing from then on.
func (ps *procs) kill(p *proc) time.Time {
	ps.t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		ps.t.Fatal(err)
	}
	<-p.exited
	at := time.Now()
	ps.mu.Lock()
	ps.log = append(ps.log, event{at: at, proc: p.name, kind: "killed"})
	ps.mu.Unlock()
	return at
}

// command sends cmd to p and returns its answers up to "done".
func (ps *procs) command(p *proc, cmd string) []string {
	ps.t.Helper()
	if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
		ps.t.Fatal(err)
	}
	var out []string
	for {
		select {
		case a := <-p.answers:
			if a == "done" {
				return out
			}
			if strings.HasPrefix(a, "error ") {
				ps.t.Fatalf("%s: %s", p.name, a)
			}
			out = append(out, a)
		case err := <-p.exited:
			ps.t.Fatalf("%s exited (%v) during %s", p.name, err, cmd)
		case <-time.After(time.Minute):
			ps.t.Fatalf("%s did not answer %s", p.name, cmd)
		}
	}
}

// close asks p to Close and waits for it to exit 0.
func (ps *procs) close(p *proc) {
	ps.t.Helper()
	if _, err := io.WriteString(p.in, "close\n"); err != nil {
		ps.t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			ps.t.Fatalf("%s: %v", p.name, err)
		}
	case <-time.After(time.Minute):
		ps.t.Fatalf("%s did not close", p.name)
	}
}

// checkExclusive replays every report in time order and fails the test
// for each Assigned of a task that another process still owned (had not
// Revoked, lost or been killed), except where that process is in
// excused (a zombie, whose tasks move without its knowledge: the chain
// fences it instead). It returns how many excused overlaps it saw.
func (ps *procs) checkExclusive(excused ...string) int {
	ps.t.Helper()
	ps.mu.Lock()
	log := slices.Clone(ps.log)
	ps.mu.Unlock()
	slices.SortStableFunc(log, func(a, b event) int { return a.at.Compare(b.at) })
	owners := map[int32]map[string]bool{}
	excusedN := 0
	revokedAt := map[int32]time.Time{}
	var handovers []time.Duration
	defer func() {
		if len(handovers) > 0 {
			ps.t.Logf("handover across processes (Revoked returned -> next owner's Assigned) over %d moved tasks: p50 %v, p99 %v",
				len(handovers), quantile(handovers, 0.5), quantile(handovers, 0.99))
		}
	}()
	for _, e := range log {
		if e.kind == "killed" {
			for _, os := range owners {
				delete(os, e.proc)
			}
			continue
		}
		for _, task := range e.tasks {
			os := owners[task]
			if os == nil {
				os = map[string]bool{}
				owners[task] = os
			}
			if e.kind != "assigned" {
				delete(os, e.proc)
				if e.kind == "revoked" {
					revokedAt[task] = e.at
				}
				continue
			}
			if r, ok := revokedAt[task]; ok {
				handovers = append(handovers, e.at.Sub(r))
				delete(revokedAt, task)
			}
			for o := range os {
				if slices.Contains(excused, o) {
					excusedN++
				} else {
					ps.t.Errorf("task %d assigned to %s at %v while %s owned it", task, e.proc, e.at.Sub(ps.start), o)
				}
			}
			os[e.proc] = true
		}
	}
	return excusedN
}

// TestProcessCrash: three member processes share twelve tasks; one is
// killed with SIGKILL, and once its session expires the other two own
// every task, no task ever having had two live owners.
func TestProcessCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts member processes and waits for a session to expire")
	}
	c := newCluster(t, 12, "in")
	ps := newProcs(t, c.ListenAddrs(), "in")
	a, b, cc := ps.startMember("a", ""), ps.startMember("b", ""), ps.startMember("c", "")
	ps.waitOwned("three processes share the tasks", stableOver(12, "a", "b", "c"))
	killedAt := ps.kill(cc)
	ps.waitOwned("the tasks of the killed process move", stableOver(12, "a", "b"))
	t.Logf("kill -> every task owned again: %v (session timeout %v)", time.Since(killedAt).Round(time.Millisecond), testSession)
	for _, p := range []*proc{a, b} {
		for _, ans := range ps.command(p, "commit") {
			if !strings.Contains(ans, " ok ") {
				t.Errorf("%s: %s", p.name, ans)
			}
		}
	}
	ps.close(a)
	ps.waitOwned("b owns everything", stableOver(12, "b"))
	ps.close(b)
	ps.checkExclusive()
}

// TestProcessZombie: a member process stopped (SIGSTOP) past its session
// timeout loses its tasks to the other; once continued it is told they
// are Lost, and a commit on any of their chains fails with
// taskchain.ErrFenced, so the zombie commits nothing. It then rejoins and
// the two share the tasks again, committing normally.
func TestProcessZombie(t *testing.T) {
	if testing.Short() {
		t.Skip("starts member processes and waits for a session to expire")
	}
	c := newCluster(t, 12, "in")
	ps := newProcs(t, c.ListenAddrs(), "in")
	a, b := ps.startMember("a", ""), ps.startMember("b", "")
	before := ps.waitOwned("two processes share the tasks", stableOver(12, "a", "b"))
	for _, p := range []*proc{a, b} {
		ps.command(p, "commit")
	}

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ps.waitOwned("the stopped process's tasks move", func(o map[string][]int32) bool {
		// b owns all; a still "owns" its tasks: it cannot know.
		return len(o["b"]) == 12
	})
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(45 * time.Second)
	for {
		ps.mu.Lock()
		var lost []int32
		for _, e := range ps.log {
			if e.proc == "a" && e.kind == "lost" {
				lost = append(lost, e.tasks...)
			}
		}
		ps.mu.Unlock()
		slices.Sort(lost)
		if slices.Equal(lost, before["a"]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the zombie reported lost %v, want %v", lost, before["a"])
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	answers := ps.command(a, "commit-lost")
	if len(answers) != len(before["a"]) {
		t.Fatalf("the zombie's commits on its lost tasks: %v", answers)
	}
	for _, ans := range answers {
		if !strings.Contains(ans, " fenced ") {
			t.Errorf("the zombie's commit on a moved task: %s, want fenced", ans)
		}
	}

	ps.waitOwned("the zombie rejoins", stableOver(12, "a", "b"))
	for _, p := range []*proc{a, b} {
		for _, ans := range ps.command(p, "commit") {
			if !strings.Contains(ans, " ok ") {
				t.Errorf("%s after the zombie rejoined: %s", p.name, ans)
			}
		}
	}
	ps.close(a)
	ps.close(b)
	if n := ps.checkExclusive("a"); n == 0 {
		t.Error("no task of the zombie was assigned while it was stopped")
	}
}

// TestProcessStaticRestart: a static member process killed with SIGKILL
// and started again with the same instance id within the session timeout
// gets its tasks back, and the other process keeps its own. The session
// timeout is a minute, longer than the test waits, so the tasks come back
// by the instance id, not because the killed member's session expired.
func TestProcessStaticRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts member processes")
	}
	c := newCluster(t, 12, "in")
	ps := newProcs(t, c.ListenAddrs(), "in")
	ps.startMemberSession("a", "host-a", time.Minute)
	b := ps.startMemberSession("b", "host-b", time.Minute)
	before := ps.waitOwned("two processes share the tasks", stableOver(12, "a", "b"))
	ps.mu.Lock()
	mark := len(ps.log)
	ps.mu.Unlock()
	ps.kill(ps.all["a"])
	a2 := ps.startMemberSession("a2", "host-a", time.Minute)
	after := ps.waitOwned("the restarted process has tasks", stableOver(12, "a2", "b"))
	if !slices.Equal(before["a"], after["a2"]) || !slices.Equal(before["b"], after["b"]) {
		t.Errorf("after a static restart: %v, want a's tasks %v back", after, before["a"])
	}
	ps.mu.Lock()
	for _, e := range ps.log[mark:] {
		if e.proc == "b" && e.kind == "revoked" {
			t.Errorf("b handed tasks %v over during a static restart", e.tasks)
		}
	}
	ps.mu.Unlock()
	ps.close(a2)
	ps.close(b)
	ps.checkExclusive()
}
