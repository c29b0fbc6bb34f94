package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddyflow/eddy/connector/kafka"
)

// Config says which job a member joins and what it does when its tasks
// change.
type Config struct {
	Brokers []string // seed brokers, host:port
	Job     string   // the job's name: its group is GroupName(Job)
	Topic   string   // the input topic: task t is its partition t

	// Instance, when set, makes the member static (KIP-345): a process
	// restarted with the same Instance within SessionTimeout takes its
	// place in the group, and its tasks back, without the others
	// rebalancing. It must be unique among the job's live processes (a
	// second process with the same Instance fences the first out of the
	// group) and stable across restarts (a host name, a pod name).
	Instance string

	SessionTimeout    time.Duration // without a heartbeat for this long a member is out; default 45 s
	RebalanceTimeout  time.Duration // how long a rebalance waits for members; default 60 s
	HeartbeatInterval time.Duration // default SessionTimeout/10, at most 3 s
	// HandoverTimeout bounds each call of Revoked (its ctx ends then); it
	// must be below RebalanceTimeout - HeartbeatInterval so a handover
	// ends inside the rebalance that asked for it. Default
	// RebalanceTimeout/2.
	HandoverTimeout time.Duration
	ConnectTimeout  time.Duration // how long Join waits for brokers to answer; default 10 s

	// Assigned is called with the tasks the member has gained (sorted),
	// after their previous owner's Revoked returned (or after it was lost).
	// It runs inside the rebalance, like Revoked and Lost and never at
	// the same time as them: start the tasks and return.
	Assigned func(tasks []int32)
	// Revoked is the handover: it is called with tasks (sorted) the member
	// gives up, before the group may assign them to another member, and
	// must stop them, after a final checkpoint and commit of each so
	// that the next owner has nothing to replay. ctx ends HandoverTimeout
	// after the call; Revoked must return by then. An error, or a return
	// after ctx ended, is a failed handover: it is logged with the tasks
	// and the member leaves the group (Err says why). The tasks are given
	// up all the same: Revoked must have stopped them when it returns,
	// whatever it returns, and their next owners restore their last
	// commits and replay from there, as after a crash.
	Revoked func(ctx context.Context, tasks []int32) error
	// Lost is called with tasks (sorted) that the group took away without
	// a handover: the member was out of the group (its session expired,
	// as after a long pause), and other members may own them already.
	// The caller must stop them without committing anything more: a
	// commit either lands before the next owner's claim (which then
	// restores it) or fails with taskchain.ErrFenced. The member then
	// rejoins by itself, and may be Assigned tasks again.
	Lost func(tasks []int32)
	// Rebalanced, when set, is called after each rebalance the member
	// took part in, once its Assigned returned (or would have, given no
	// new tasks), with how long the rebalance took the member: from its
	// first JoinGroup request of the rebalance (retries and the handover
	// of its tasks that moved away included) until then. A cooperative
	// rebalance that moves tasks is two rebalances for the members
	// involved: one to revoke them, one to assign them.
	Rebalanced func(d time.Duration)
	// Logf, when set, receives the member's log lines: the group's errors,
	// failed handovers and the franz-go client's warnings.
	Logf func(format string, args ...any)
	// ClientOpts are more options of the franz-go client (TLS, SASL),
	// applied after the member's own.
	ClientOpts []kgo.Opt
}

// GroupName returns the name of job's consumer group: "eddy.job." and the
// job's name. It cannot clash with the groups the Kafka sink keeps its
// markers in, which start with "eddy-".
func GroupName(job string) string { return "eddy.job." + job }

// MaxJob is the longest job name, in bytes.
const MaxJob = 200

// ValidateJob reports whether job may name a job: 1 to MaxJob bytes of
// ASCII letters, digits, '-', '_' and '.'.
func ValidateJob(job string) error {
	if job == "" || len(job) > MaxJob {
		return fmt.Errorf("group: invalid job name %.40q: empty or longer than %d bytes", job, MaxJob)
	}
	for i, c := range []byte(job) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("group: invalid job name %q: byte %d is %q; use letters, digits, '-', '_' and '.'", job, i, c)
		}
	}
	return nil
}

// withDefaults fills in c's zero durations and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if len(c.Brokers) == 0 {
		return c, errors.New("group: no brokers configured")
	}
	if err := ValidateJob(c.Job); err != nil {
		return c, err
	}
	if c.Topic == "" {
		return c, fmt.Errorf("group: job %q: no input topic", c.Job)
	}
	if c.Assigned == nil || c.Revoked == nil || c.Lost == nil {
		return c, fmt.Errorf("group: job %q: Assigned, Revoked and Lost are all required", c.Job)
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 45 * time.Second
	}
	if c.RebalanceTimeout <= 0 {
		c.RebalanceTimeout = 60 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = min(c.SessionTimeout/10, 3*time.Second)
	}
	if c.HandoverTimeout <= 0 {
		c.HandoverTimeout = c.RebalanceTimeout / 2
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		return c, fmt.Errorf("group: job %q: heartbeat interval %v is not below the session timeout %v", c.Job, c.HeartbeatInterval, c.SessionTimeout)
	}
	if c.HandoverTimeout >= c.RebalanceTimeout-c.HeartbeatInterval {
		return c, fmt.Errorf("group: job %q: handover timeout %v does not end inside the rebalance timeout %v less a heartbeat interval %v",
			c.Job, c.HandoverTimeout, c.RebalanceTimeout, c.HeartbeatInterval)
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c, nil
}

// Member is one process's membership in its job's group. Its methods are
// safe for concurrent use.
type Member struct {
	cfg   Config
	group string
	tasks int32
	cl    *kgo.Client

	mu      sync.Mutex
	owned   map[int32]bool
	err     error // why the member left by itself
	joinErr error // the group's first error before the member joined
	joined  chan struct{}
	joinSig sync.Once
	// rebalancing is when the rebalance under way started for this
	// member (its first JoinGroup request); zero between rebalances.
	rebalancing time.Time

	stopOnce sync.Once
	stopErr  error
	done     chan struct{}
}

// Join makes this process a member of cfg.Job's group, subscribed to
// cfg.Topic, and returns once it is in the group (its first assignment,
// possibly empty, is done) or ctx ends. Brokers that do not answer within
// ConnectTimeout fail it naming their addresses, and a missing topic
// naming the topic. A join cut short by ctx after the group assigned
// tasks hands them back through Revoked before Join returns its error.
// The member reads no records and commits no offsets:
// it only takes part in the group's protocol, and the caller's tasks read
// their partitions themselves from their own checkpointed positions.
func Join(ctx context.Context, cfg Config) (*Member, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Member{cfg: cfg, group: GroupName(cfg.Job), owned: make(map[int32]bool),
		joined: make(chan struct{}), done: make(chan struct{})}
	h := &hooks{}

	// The partitions come first, so that a missing topic or absent
	// brokers fail here before the member joins anything.
	m.tasks, err = kafka.PartitionCount(ctx, cfg.Topic, kafka.Brokers(cfg.Brokers...),
		kafka.ConnectTimeout(cfg.ConnectTimeout), kafka.ClientOpts(cfg.ClientOpts...))
	if err != nil {
		return nil, fmt.Errorf("group: job %q: %w", cfg.Job, err)
	}

	h.manage = m.manageError
	h.joining = m.joining
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DialTimeout(min(cfg.ConnectTimeout, 10*time.Second)),
		kgo.WithHooks(h),
		kgo.WithLogger(logger{cfg.Logf}),
		kgo.ConsumerGroup(m.group),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		kgo.HeartbeatInterval(cfg.HeartbeatInterval),
		kgo.OnPartitionsAssigned(m.onAssigned),
		kgo.OnPartitionsRevoked(m.onRevoked),
		kgo.OnPartitionsLost(m.onLost),
	}
	if cfg.Instance != "" {
		opts = append(opts, kgo.InstanceID(cfg.Instance))
	}
	m.cl, err = kgo.NewClient(append(opts, cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("group: client for %s: %w", strings.Join(cfg.Brokers, ","), err)
	}
	// The member never polls: fetching stays paused, so the client reads
	// no records, while its group goroutine joins, heartbeats and calls
	// the callbacks on its own (nothing here uses BlockRebalanceOnPoll,
	// which would tie rebalances to polls). The topic is paused before it
	// is subscribed: subscribed at NewClient, it could be assigned and
	// fetched before the pause (seen once in a loaded test).
	m.cl.PauseFetchTopics(cfg.Topic)
	m.cl.AddConsumeTopics(cfg.Topic)

	select {
	case <-m.joined:
		m.mu.Lock()
		err = m.joinErr
		m.mu.Unlock()
		if err == nil {
			return m, nil
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	<-m.stop(false, true)
	return nil, fmt.Errorf("group: join group %q of job %q (brokers %s): %w", m.group, cfg.Job, strings.Join(cfg.Brokers, ","), err)
}

// Holds asks the group's coordinator whether task is assigned to this
// member now: the group is stable (no rebalance under way) and this
// member, as the coordinator knows it, has the task. A member the
// coordinator dropped (its session expired, whether it knows it yet or
// not) holds nothing. Use it to tell who fenced a task's claim: if this
// member holds the task, the other claimant was out of the group. While a
// rebalance is under way it fails with ErrUnsettled: ask again.
func (m *Member) Holds(ctx context.Context, task int32) (bool, error) {
	id, _ := m.cl.GroupMetadata()
	if id == "" {
		return false, nil
	}
	groups, err := kadm.NewClient(m.cl).DescribeGroups(ctx, m.group)
	if err != nil {
		return false, fmt.Errorf("group: describe group %q: %w", m.group, err)
	}
	g, ok := groups[m.group]
	switch {
	case !ok:
		return false, fmt.Errorf("group: describe group %q: not in the answer", m.group)
	case g.Err != nil:
		return false, fmt.Errorf("group: describe group %q: %w", m.group, g.Err)
	case g.State != "Stable":
		return false, fmt.Errorf("group: group %q is %s: %w", m.group, g.State, ErrUnsettled)
	}
	for _, mem := range g.Members {
		if mem.MemberID != id {
			continue
		}
		a, ok := mem.Assigned.AsConsumer()
		if !ok {
			return false, nil
		}
		for _, t := range a.Topics {
			if t.Topic == m.cfg.Topic && slices.Contains(t.Partitions, task) {
				return true, nil
			}
		}
	}
	return false, nil
}

// ErrLeave is matched by Close's error when the member's LeaveGroup
// request failed (the brokers did not answer in time): its tasks were
// revoked all the same, and the group drops the member when its session
// times out.
var ErrLeave = errors.New("the request to leave the group failed")

// ErrUnsettled is matched by Holds' error while the group rebalances.
var ErrUnsettled = errors.New("a rebalance is under way")

// Group returns the name of the member's consumer group.
func (m *Member) Group() string { return m.group }

// Tasks returns the number of the job's tasks: the input topic's
// partitions when the member joined.
func (m *Member) Tasks() int32 { return m.tasks }

// Owned returns the tasks the member owns, sorted: assigned, and neither
// revoked (Revoked returned) nor lost since.
func (m *Member) Owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int32, 0, len(m.owned))
	for t := range m.owned {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Done is closed once the member is out of the group for good: after
// Close or Detach, or when it left by itself after a failed handover.
func (m *Member) Done() <-chan struct{} { return m.done }

// Err returns why the member left the group by itself (a failed
// handover), or nil.
func (m *Member) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Close hands every task over (Revoked) and leaves the group, a static
// member too, so the group moves the tasks at once: a planned shutdown
// replays nothing. It returns once the member is out, or when ctx ends
// (the leave goes on in the background); its error is the first failed
// handover's or the leave's.
func (m *Member) Close(ctx context.Context) error {
	return m.wait(ctx, m.stop(true, false))
}

// Detach hands every task over (Revoked) and closes the member without
// leaving the group, when it is static: the group keeps its tasks for
// its Instance, idle, until a process with the same Instance joins (and
// gets them back without a rebalance) or SessionTimeout passes (and the
// others take them over). It suits a restart. A dynamic member leaves,
// as with Close.
func (m *Member) Detach(ctx context.Context) error {
	return m.wait(ctx, m.stop(false, false))
}

func (m *Member) wait(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("group: leave group %q: %w", m.group, ctx.Err())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return errors.Join(m.err, m.stopErr)
}

// stop takes the member out of the group, once: it ends the group
// session (the client calls Revoked for every task), leaves explicitly as
// a static member when leave is set, and closes the client. The first
// call decides; every call returns the channel closed when it is done.
func (m *Member) stop(leave, failedJoin bool) <-chan struct{} {
	m.stopOnce.Do(func() {
		go func() {
			defer close(m.done)
			memberID, _ := m.cl.GroupMetadata()
			ctx, cancel := context.WithTimeout(context.Background(), m.cfg.HandoverTimeout+m.cfg.ConnectTimeout)
			defer cancel()
			err := m.cl.LeaveGroupContext(ctx)
			if leave && m.cfg.Instance != "" && memberID != "" {
				err = errors.Join(err, m.leaveStatic(ctx, memberID))
			}
			m.cl.Close()
			if err != nil && !failedJoin {
				m.mu.Lock()
				m.stopErr = fmt.Errorf("group: leave group %q: %w: %w", m.group, ErrLeave, err)
				m.mu.Unlock()
			}
		}()
	})
	return m.done
}

// leaveStatic sends the LeaveGroup request the client does not send for a
// static member.
func (m *Member) leaveStatic(ctx context.Context, memberID string) error {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = m.group
	mem := kmsg.NewLeaveGroupRequestMember()
	mem.MemberID = memberID
	mem.InstanceID = kmsg.StringPtr(m.cfg.Instance)
	mem.Reason = kmsg.StringPtr("eddy: the process hands its tasks over and stops")
	req.Members = append(req.Members, mem)
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	for _, r := range resp.Members {
		// Unknown: the group removed it already (the client's own leave,
		// or an expired session); the member is out either way.
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil && !errors.Is(err, kerr.UnknownMemberID) {
			return err
		}
	}
	return nil
}

// manageError is the client's report of a failed group session, after
// which it tries again. Before the member joined, the first error that
// trying again cannot cure (a refused authorization, a session timeout
// outside the brokers' bounds, an instance id in use) fails Join.
func (m *Member) manageError(err error) {
	m.cfg.Logf("group %s: %v", m.group, err)
	var ke *kerr.Error
	m.mu.Lock()
	select {
	case <-m.joined:
	default:
		if m.joinErr == nil && errors.As(err, &ke) && !ke.Retriable {
			m.joinErr = err
			m.joinSig.Do(func() { close(m.joined) })
		}
	}
	m.mu.Unlock()
}

// tasksOf returns the partitions of the member's topic in ps, sorted.
func (m *Member) tasksOf(ps map[string][]int32) []int32 {
	ts := slices.Clone(ps[m.cfg.Topic])
	slices.Sort(ts)
	return ts
}

func (m *Member) onAssigned(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
	tasks := m.tasksOf(ps)
	m.mu.Lock()
	for _, t := range tasks {
		m.owned[t] = true
	}
	m.mu.Unlock()
	if len(tasks) > 0 {
		m.cfg.Assigned(tasks)
	}
	// The client calls this at the end of every join and sync, with or
	// without new tasks, and joins again only after it returned.
	m.mu.Lock()
	start := m.rebalancing
	m.rebalancing = time.Time{}
	m.mu.Unlock()
	if m.cfg.Rebalanced != nil && !start.IsZero() {
		m.cfg.Rebalanced(time.Since(start))
	}
	m.joinSig.Do(func() { close(m.joined) })
}

// joining notes the start of a rebalance: the member's first JoinGroup
// request since the last one ended.
func (m *Member) joining() {
	m.mu.Lock()
	if m.rebalancing.IsZero() {
		m.rebalancing = time.Now()
	}
	m.mu.Unlock()
}

// take removes the owned tasks among ts from the owned set and returns
// them.
func (m *Member) take(ts []int32) []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for _, t := range ts {
		if m.owned[t] {
			out = append(out, t)
			delete(m.owned, t)
		}
	}
	return out
}

func (m *Member) onRevoked(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
	m.mu.Lock()
	var tasks []int32
	for _, t := range m.tasksOf(ps) {
		if m.owned[t] {
			tasks = append(tasks, t)
		}
	}
	m.mu.Unlock()
	if len(tasks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.HandoverTimeout)
	start := time.Now()
	err := m.cfg.Revoked(ctx, tasks)
	late := ctx.Err() != nil
	cancel()
	m.take(tasks) // given up whatever Revoked said: see Config.Revoked
	switch {
	case err != nil:
		err = fmt.Errorf("group %s: handover of tasks %v failed after %v: %w", m.group, tasks, time.Since(start).Round(time.Millisecond), err)
	case late:
		err = fmt.Errorf("group %s: handover of tasks %v took %v, beyond the handover timeout %v", m.group, tasks, time.Since(start).Round(time.Millisecond), m.cfg.HandoverTimeout)
	default:
		return
	}
	m.cfg.Logf("%v; the member leaves the group, and the tasks' next owners restore their last commits", err)
	m.mu.Lock()
	if m.err == nil {
		m.err = err
	}
	m.mu.Unlock()
	// Leaving waits for this callback to return: from another goroutine.
	go m.stop(true, false)
}

func (m *Member) onLost(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
	tasks := m.take(m.tasksOf(ps))
	if len(tasks) == 0 {
		return
	}
	m.cfg.Logf("group %s: lost tasks %v: the member was out of the group (session expired?); they are stopped without a handover", m.group, tasks)
	m.cfg.Lost(tasks)
}

// logger hands the franz-go client's warnings and errors to Logf.
type logger struct{ logf func(string, ...any) }

func (l logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l logger) Log(level kgo.LogLevel, msg string, kv ...any) {
	var b strings.Builder
	b.WriteString("kafka ")
	b.WriteString(strings.ToLower(level.String()))
	b.WriteString(": ")
	b.WriteString(msg)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %v=%v", kv[i], kv[i+1])
	}
	l.logf("%s", b.String())
}
