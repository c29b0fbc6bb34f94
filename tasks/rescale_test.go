package tasks_test

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// handedOver matches a task's handover line and captures how long the
// handover took.
var handedOver = regexp.MustCompile(`task \d+: handed over at checkpoint \d+ in (\S+)$`)

// handovers returns the handover times logged by the lines holding
// prefix (a process's name), in the order logged.
func (l *syncLog) handovers(t *testing.T, prefix string) []time.Duration {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, s := range l.lines {
		m := handedOver.FindStringSubmatch(s)
		if m == nil || !strings.Contains(s, prefix) {
			continue
		}
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatalf("line %q: %v", s, err)
		}
		out = append(out, d)
	}
	return out
}

// TestRescaleTwoThreeTwo: rescale 2 -> 3 -> 2 processes while the job
// runs and its input arrives: a third process joins and takes tasks (the
// others hand them over at checkpoints), then one of the first two stops
// (SIGTERM: it hands its tasks over and leaves). The committed output is
// exactly once, and the handover times are reported.
func TestRescaleTwoThreeTwo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes and rescales them")
	}
	brokers := newCluster(t)
	// The input arrives while the processes rescale: 24 batches a
	// quarter of a second apart.
	const events, keys, batches = 48_000, 300, 24
	produced := make(chan error, 1)
	go func() {
		for b := range batches {
			if err := produce(t, brokers, b*events/batches, (b+1)*events/batches, keys); err != nil {
				produced <- err
				return
			}
			time.Sleep(250 * time.Millisecond) // the input's pace, not a synchronization
		}
		produced <- nil
	}()
	producedAll := sync.OnceValue(func() error { return <-produced })
	defer producedAll()
	store := filepath.Join(t.TempDir(), "store")
	var out syncLog
	defer func() {
		if t.Failed() {
			out.dump(t)
		}
	}()
	waitFor := func(what string, cond func() bool) { t.Helper(); pollUntil(t, what, cond) }
	start := func(name string) *proc {
		return startProcess(t, helperConfig{Brokers: brokers, Store: store, Name: name}, &out)
	}
	stop := func(p *proc) {
		t.Helper()
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if err := waitStopped(t, p); err != nil {
			t.Fatalf("%s after SIGTERM: %v", p.name, err)
		}
	}
	// owned returns how many tasks a process runs, from its log.
	owned := func(name string) int {
		return out.count(name+": ", ": started") - out.count(name+": ", ": handed over") - out.count(name+": ", "stopped without a checkpoint")
	}

	p0, p1 := start("p0"), start("p1")
	waitFor("2 processes to share the tasks", func() bool {
		return owned("p0") > 0 && owned("p1") > 0 && owned("p0")+owned("p1") == partitions
	})
	before := len(out.handovers(t, ": ")) // p1's join took tasks from p0
	p2 := start("p2")
	waitFor("3 processes to share the tasks", func() bool {
		return owned("p2") > 0 && owned("p0")+owned("p1")+owned("p2") == partitions
	})
	scaledUp := len(out.handovers(t, ": ")) - before
	if scaledUp == 0 {
		t.Error("p2 joined: p0 and p1 handed no task over")
	}
	ran, prior := owned("p1"), len(out.handovers(t, "p1: "))
	restoringBefore := out.count("p1: ", "handed over during its restore")
	stop(p1)
	waitFor("2 processes to run every task", func() bool { return owned("p0")+owned("p2") == partitions })
	scaledDown := out.handovers(t, "p1: ")[prior:]
	// A task p1 took at p2's join may still have been restoring: it hands
	// over without a new checkpoint, nothing newer to give.
	if restoring := out.count("p1: ", "handed over during its restore") - restoringBefore; len(scaledDown)+restoring != ran {
		t.Errorf("p1 stopped: it handed %d tasks over at a checkpoint and %d during their restore, want the %d it ran", len(scaledDown), restoring, ran)
	}
	if err := producedAll(); err != nil {
		t.Fatal(err)
	}
	waitFor("every record committed", func() bool { return len(committedOutput(t, brokers)) >= events })
	stop(p0)
	stop(p2)
	checkExactlyOnce(t, committedOutput(t, brokers), events, keys)
	if n := out.count("stopped without a checkpoint"); n != 0 {
		t.Errorf("%d tasks stopped without a checkpoint in a rescale", n)
	}
	all := out.handovers(t, ": ")
	slices.Sort(all)
	slices.Sort(scaledDown)
	t.Logf("handovers: %d as p1 joined, %d in the rescale 2 -> 3, %d in 3 -> 2 (p1's on SIGTERM: p50 %v, max %v), %d as the last two stopped; all %d: p50 %v, max %v",
		before, scaledUp, len(scaledDown), handoverQuantile(scaledDown, 0.5), handoverQuantile(scaledDown, 1), len(all)-before-scaledUp-len(scaledDown), len(all), handoverQuantile(all, 0.5), handoverQuantile(all, 1))
}

// handoverQuantile returns the q-quantile of sorted ds, 0 for none.
func handoverQuantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}
