package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Short timeouts, so that a session expires in a test's time. Members in
// one test process share two cores with the cluster: the session is kept
// several heartbeats long so that a busy moment does not expire it.
const (
	testSession   = 3 * time.Second
	testHeartbeat = 300 * time.Millisecond
	testRebalance = 8 * time.Second
	testHandover  = 3 * time.Second
)

func newCluster(t testing.TB, partitions int32, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// ledger records which member owns each task, from the members'
// callbacks, and every call that would make two members own one task at
// once: an Assigned of a task that another member has not given up
// (Revoked returned, or Lost), or a Revoked or Lost of a task the member
// does not own.
type ledger struct {
	mu         sync.Mutex
	owner      map[int32]string
	violations []string
	released   map[int32]time.Time // when the task's last handover returned
	handovers  []time.Duration     // Revoked returned -> Assigned to the next owner
	revokes    map[string]int      // Revoked calls per member
	assigns    map[string]int      // Assigned calls per member
}

func newLedger() *ledger {
	return &ledger{owner: map[int32]string{}, released: map[int32]time.Time{}, revokes: map[string]int{}, assigns: map[string]int{}}
}

func (l *ledger) assign(name string, tasks []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.assigns[name]++
	for _, t := range tasks {
		if o, ok := l.owner[t]; ok {
			l.violations = append(l.violations, fmt.Sprintf("task %d assigned to %s while %s owns it", t, name, o))
		}
		l.owner[t] = name
		if r, ok := l.released[t]; ok {
			l.handovers = append(l.handovers, now.Sub(r))
			delete(l.released, t)
		}
	}
}

func (l *ledger) release(name string, tasks []int32, handover bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if handover {
		l.revokes[name]++
	}
	for _, t := range tasks {
		if o := l.owner[t]; o != name {
			l.violations = append(l.violations, fmt.Sprintf("task %d given up by %s, owned by %q", t, name, o))
		}
		delete(l.owner, t)
		if handover {
			l.released[t] = time.Now()
		}
	}
}

// check fails t with every violation so far.
func (l *ledger) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.violations {
		t.Error(v)
	}
}

// byOwner returns the ledger's tasks of each owner.
func (l *ledger) byOwner() map[string][]int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]int32{}
	for t, o := range l.owner {
		out[o] = append(out[o], t)
	}
	for _, ts := range out {
		slices.Sort(ts)
	}
	return out
}

// testConfig is a member named name of job "j" over topic "in" that
// reports to l.
func testConfig(t *testing.T, c *kfake.Cluster, l *ledger, name string) Config {
	return Config{
		Brokers: c.ListenAddrs(), Job: "j", Topic: "in",
		SessionTimeout: testSession, HeartbeatInterval: testHeartbeat, RebalanceTimeout: testRebalance, HandoverTimeout: testHandover,
		Assigned: func(tasks []int32) { l.assign(name, tasks) },
		Revoked: func(ctx context.Context, tasks []int32) error {
			l.release(name, tasks, true)
			return nil
		},
		Lost: func(tasks []int32) { l.release(name, tasks, false) },
		Logf: func(format string, args ...any) { t.Logf(name+": "+format, args...) },
	}
}

func join(t *testing.T, cfg Config) *Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Join(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	return m
}

// waitStable waits until the members named in ms own every one of tasks
// tasks exactly once between them, as evenly as possible, and the ledger
// agrees with each member's Owned, and returns who owns what.
func waitStable(t *testing.T, l *ledger, tasks int, ms map[string]*Member) map[string][]int32 {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		got := l.byOwner()
		ok := true
		n, lo, hi := 0, tasks, 0
		for name, m := range ms {
			owned := m.Owned()
			if !slices.Equal(owned, got[name]) {
				ok = false
			}
			n += len(owned)
			lo, hi = min(lo, len(owned)), max(hi, len(owned))
		}
		if ok && n == tasks && len(got) == len(ms) && hi-lo <= 1 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stable assignment of %d tasks over %d members in 45 s: the ledger says %v", tasks, len(ms), got)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not waiting for an event
	}
}

// produce writes n records to topic, spread over its partitions.
func produce(t *testing.T, brokers []string, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Value: []byte(fmt.Sprint(i))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// quantile returns the q-quantile of ds (sorted in place).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// TestCooperativeRebalances: three members share twelve tasks; a fourth
// joins and a member closes; each time every task ends with exactly one
// owner, the tasks that move are handed over (Revoked returns) before
// their new owner's Assigned, and the members that keep tasks are not
// asked to give up the ones they keep. No member fetches a record, or
// commits an offset, though the topic has records.
func TestCooperativeRebalances(t *testing.T) {
	c := newCluster(t, 12, "in")
	var reads, commits atomic.Int64
	for key, n := range map[kmsg.Key]*atomic.Int64{kmsg.Fetch: &reads, kmsg.OffsetCommit: &commits} {
		c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
			n.Add(1)
			return nil, nil, false // counted, then handled as usual
		})
	}
	produce(t, c.ListenAddrs(), "in", 120)
	l := newLedger()
	ms := map[string]*Member{}
	for _, name := range []string{"a", "b", "c"} {
		ms[name] = join(t, testConfig(t, c, l, name))
	}
	before := waitStable(t, l, 12, ms)
	l.check(t)

	ms["d"] = join(t, testConfig(t, c, l, "d"))
	after := waitStable(t, l, 12, ms)
	l.check(t)
	for _, name := range []string{"a", "b", "c"} {
		// Sticky: a member keeps what it had, less what moved to d.
		for _, task := range after[name] {
			if !slices.Contains(before[name], task) {
				t.Errorf("member %s gained task %d when d joined: %v -> %v", name, task, before[name], after[name])
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ms["c"].Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ms["c"].Owned(); len(got) != 0 {
		t.Errorf("a closed member owns %v", got)
	}
	delete(ms, "c")
	waitStable(t, l, 12, ms)
	l.check(t)

	if n, m := reads.Load(), commits.Load(); n != 0 || m != 0 {
		t.Errorf("the members sent %d fetch and %d offset commit requests, want none", n, m)
	}
	l.mu.Lock()
	hs := slices.Clone(l.handovers)
	l.mu.Unlock()
	if len(hs) == 0 {
		t.Fatal("no task moved with a handover")
	}
	t.Logf("handover (Revoked returned -> next owner's Assigned) over %d moved tasks: p50 %v, p99 %v, max %v",
		len(hs), quantile(hs, 0.5), quantile(hs, 0.99), quantile(hs, 1))
}

// TestStaticRestart: a static member that detaches and comes back with
// the same instance id within the session timeout gets its tasks back,
// and the other member is neither given its tasks meanwhile nor asked to
// give any up.
func TestStaticRestart(t *testing.T) {
	c := newCluster(t, 12, "in")
	l := newLedger()
	cfgA, cfgB := testConfig(t, c, l, "a"), testConfig(t, c, l, "b")
	cfgA.Instance, cfgB.Instance = "host-a", "host-b"
	ms := map[string]*Member{"a": join(t, cfgA), "b": join(t, cfgB)}
	before := waitStable(t, l, 12, ms)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, genBefore := ms["b"].cl.GroupMetadata()
	if err := ms["a"].Detach(ctx); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	assignsB, revokesB := l.assigns["b"], l.revokes["b"]
	l.mu.Unlock()
	// The restart takes a while: several of b's heartbeats, in which a
	// dynamic member's leave would have given b every task, but well
	// inside the session timeout. (The scenario's downtime, not a wait
	// for something to happen.)
	time.Sleep(testSession / 3)
	ms["a"] = join(t, cfgA)
	after := waitStable(t, l, 12, ms)
	l.check(t)
	_, genAfter := ms["b"].cl.GroupMetadata()
	// Apache Kafka takes a static member back without a rebalance; kfake
	// rebalances, as it compares the join's metadata byte for byte, and
	// a restarted member does not name the partitions it owned yet. The
	// sticky balancer moves nothing either way.
	t.Logf("generation %d -> %d", genBefore, genAfter)
	if !slices.Equal(before["a"], after["a"]) || !slices.Equal(before["b"], after["b"]) {
		t.Errorf("after a static restart: %v, want %v", after, before)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.revokes["b"] - revokesB; n != 0 {
		t.Errorf("the other member handed tasks over %d times during a static restart", n)
	}
	if n := l.assigns["b"] - assignsB; n != 0 {
		t.Errorf("the other member was assigned tasks %d times during a static restart", n)
	}
}

// TestCloseStaticLeaves: Close of a static member leaves the group at
// once, so its tasks move without waiting for the session timeout.
func TestCloseStaticLeaves(t *testing.T) {
	c := newCluster(t, 6, "in")
	l := newLedger()
	cfgA, cfgB := testConfig(t, c, l, "a"), testConfig(t, c, l, "b")
	cfgA.Instance, cfgB.Instance = "host-a", "host-b"
	cfgA.SessionTimeout, cfgB.SessionTimeout = time.Minute, time.Minute // a move before this is the leave's
	cfgA.HeartbeatInterval, cfgB.HeartbeatInterval = testHeartbeat, testHeartbeat
	ms := map[string]*Member{"a": join(t, cfgA), "b": join(t, cfgB)}
	waitStable(t, l, 6, ms)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := ms["a"].Close(ctx); err != nil {
		t.Fatal(err)
	}
	delete(ms, "a")
	waitStable(t, l, 6, ms)
	l.check(t)
	if d := time.Since(start); d >= time.Minute {
		t.Errorf("the tasks moved after %v, not before the session timeout", d)
	}
}

// TestFailedHandover: a Revoked that fails, or that returns only after
// its ctx ended, is reported by Err, and the member leaves the group, so
// the other takes every task over.
func TestFailedHandover(t *testing.T) {
	boom := errors.New("store down")
	for _, c := range []struct {
		name    string
		revoked func(ctx context.Context) error
		want    string
	}{
		{"fails", func(context.Context) error { return boom }, "store down"},
		{"overruns", func(ctx context.Context) error { <-ctx.Done(); return nil }, "beyond the handover timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := newCluster(t, 6, "in")
			l := newLedger()
			cfgA := testConfig(t, cl, l, "a")
			cfgA.HandoverTimeout = 200 * time.Millisecond
			cfgA.Revoked = func(ctx context.Context, tasks []int32) error {
				l.release("a", tasks, true)
				return c.revoked(ctx)
			}
			a := join(t, cfgA)
			waitStable(t, l, 6, map[string]*Member{"a": a})
			b := join(t, testConfig(t, cl, l, "b"))
			waitStable(t, l, 6, map[string]*Member{"b": b})
			l.check(t)
			select {
			case <-a.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the member with a failed handover did not leave")
			}
			if err := a.Err(); err == nil || !strings.Contains(err.Error(), "handover of tasks") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Err() = %v, want the failed handover (%s)", err, c.want)
			}
		})
	}
}

// TestJoinErrors: brokers that do not answer, and a topic that does not
// exist, fail Join with errors naming them.
func TestJoinErrors(t *testing.T) {
	c := newCluster(t, 1, "in")
	noop := func([]int32) {}
	base := Config{Job: "j", Topic: "in", Assigned: noop, Lost: noop,
		Revoked: func(context.Context, []int32) error { return nil }, ConnectTimeout: time.Second}
	ctx := context.Background()

	cfg := base
	cfg.Brokers = []string{"127.0.0.1:1"}
	start := time.Now()
	_, err := Join(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "no answer") {
		t.Errorf("unreachable brokers: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("unreachable brokers: failed after %v", d)
	}

	cfg = base
	cfg.Brokers, cfg.Topic = c.ListenAddrs(), "nope"
	if _, err := Join(ctx, cfg); err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing topic: %v", err)
	}

	cfg = base
	cfg.Brokers, cfg.Job = c.ListenAddrs(), "a/b"
	if _, err := Join(ctx, cfg); err == nil || !strings.Contains(err.Error(), "invalid job name") {
		t.Errorf("bad job name: %v", err)
	}
}

// TestRebalancedReports: each rebalance a member takes part in is
// reported once it ends, and a rebalance that moves tasks away from a
// member lasts at least as long as that member's handover of them.
func TestRebalancedReports(t *testing.T) {
	c := newCluster(t, 4, "in")
	l := newLedger()
	var mu sync.Mutex
	rebalances := map[string][]time.Duration{}
	var handover time.Duration // a's longest Revoked
	cfg := func(name string) Config {
		cfg := testConfig(t, c, l, name)
		revoked := cfg.Revoked
		cfg.Revoked = func(ctx context.Context, tasks []int32) error {
			start := time.Now()
			// A handover that takes a while, as a checkpoint does.
			time.Sleep(100 * time.Millisecond)
			err := revoked(ctx, tasks)
			mu.Lock()
			handover = max(handover, time.Since(start))
			mu.Unlock()
			return err
		}
		cfg.Rebalanced = func(d time.Duration) {
			mu.Lock()
			rebalances[name] = append(rebalances[name], d)
			mu.Unlock()
		}
		return cfg
	}
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return len(rebalances[name])
	}
	ms := map[string]*Member{"a": join(t, cfg("a"))}
	waitStable(t, l, 4, ms)
	if n := count("a"); n < 1 {
		t.Fatalf("a joined: %d rebalances reported, want at least 1", n)
	}
	before := count("a")
	ms["b"] = join(t, cfg("b"))
	waitStable(t, l, 4, ms)
	// b's join is one rebalance for b at least; for a, the two of a
	// cooperative move (revoke, then assign).
	if n := count("b"); n < 1 {
		t.Errorf("b joined: %d rebalances reported for b, want at least 1", n)
	}
	mu.Lock()
	got := slices.Clone(rebalances["a"][before:])
	h := handover
	mu.Unlock()
	if len(got) < 1 {
		t.Fatalf("b joined: no rebalance reported for a")
	}
	if h == 0 {
		t.Fatal("b joined: a handed nothing over")
	}
	if slices.Max(got) < h {
		t.Errorf("a's rebalances %v: none lasted its handover of %v", got, h)
	}
	l.check(t)
}
