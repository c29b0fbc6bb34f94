package tasks_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/kafka"
	"github.com/eddyflow/eddy/tasks"
)

// groups is the number of keys of the rekeyed job: event i has key
// groupOf(i), which is not the key "in" is partitioned by, so every
// group's events are spread over every partition.
const groups = 7

func groupOf(seq int64) string { return fmt.Sprintf("g%d", seq%groups) }

// rekeyedBuild is a job whose keys are not the input's: events are
// counted per group, which needs every task's events of a group in one
// task.
func rekeyedBuild(brokers []string) tasks.Build {
	return func(env *eddy.Env, task tasks.Task) error {
		in := eddy.FromSource(env, kafka.Source[Event](kafka.Brokers(brokers...), kafka.Topics("in"), kafka.Partitions(task.ID)))
		byGroup, err := tasks.KeyBy(in, task, "by-group", func(e *Event) string { return groupOf(e.Seq) })
		if err != nil {
			return err
		}
		counts := eddy.Process[string, Event, Count](byGroup, &groupCountFn{}, eddy.Named("count"))
		eddy.ToSink(counts, kafka.Sink[Count]("out", kafka.Brokers(brokers...), kafka.SinkName(task.SinkName("out")),
			kafka.Key(func(c *Count) []byte { return []byte(c.Key) })))
		return nil
	}
}

// groupCountFn numbers each group's events.
type groupCountFn struct{ countFn }

func (f *groupCountFn) Process(ctx *eddy.Context[string, Count], e *Event) error {
	n, _ := f.n.Get()
	n++
	f.n.Update(n)
	ctx.Emit(Count{Key: groupOf(e.Seq), Seq: e.Seq, N: n})
	return nil
}

// checkRekeyed checks that out holds each of events 0..n-1 exactly once,
// under its group, and that each group's numbers are 1..its count, each
// once: the order in which a group's events from several partitions meet
// is not fixed, but a count that lost state, or counted an event twice,
// shows as a number twice or a number missing.
func checkRekeyed(t *testing.T, out []Count, n int) {
	t.Helper()
	seqs := map[int64]int{}
	numbers := map[string]map[int64]int{}
	bad := 0
	for _, c := range out {
		seqs[c.Seq]++
		if c.Seq < 0 || c.Seq >= int64(n) || c.Key != groupOf(c.Seq) {
			if bad < 10 {
				t.Errorf("record %+v: not an event of the input under its group", c)
			}
			bad++
		}
		if numbers[c.Key] == nil {
			numbers[c.Key] = map[int64]int{}
		}
		numbers[c.Key][c.N]++
	}
	for seq, k := range seqs {
		if k != 1 {
			if bad < 10 {
				t.Errorf("event %d written %d times", seq, k)
			}
			bad++
		}
	}
	for g, ns := range numbers {
		want := 0
		for i := range n {
			if groupOf(int64(i)) == g {
				want++
			}
		}
		for i := 1; i <= want; i++ {
			if ns[int64(i)] != 1 {
				if bad < 10 {
					t.Errorf("group %s: number %d written %d times, want once", g, i, ns[int64(i)])
				}
				bad++
			}
		}
		if len(ns) != want {
			t.Errorf("group %s: %d distinct numbers, want %d", g, len(ns), want)
			bad++
		}
	}
	if len(seqs) != n || bad > 0 {
		t.Fatalf("%d records committed (%d distinct events, %d problems), want each of %d events once", len(out), len(seqs), bad, n)
	}
}

// TestKeyByAcrossTasks: a job keyed by another field than its input runs
// on three processes over a 12-partition input, its records moving
// between tasks (and processes) through the internal topic; processes
// are killed with SIGKILL and started again while the input arrives. The
// committed output is that of an uninterrupted run: every event once,
// and every group's count without a gap or a repeat.
func TestKeyByAcrossTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and kills them")
	}
	testKillNine(t, killRun{store: filepath.Join(t.TempDir(), "store"), kills: 3, events: 30_000, batches: 20, rekeyed: true})
}

// TestKeyByRefusesBadEdges: an edge name that cannot name a topic, and an
// internal topic that exists with another partition count than the
// input, are refused before the job runs, naming the problem.
func TestKeyByRefusesBadEdges(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "in"), kfake.SeedTopics(3, tasks.RepartitionTopic(job, "narrow")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	task := tasks.Task{ID: 0, Job: job, Brokers: brokers, Partitions: partitions}
	in := eddy.FromSource(eddy.New(), kafka.Source[Event](kafka.Brokers(brokers...), kafka.Topics("in"), kafka.Partitions(0)))
	key := func(e *Event) string { return groupOf(e.Seq) }
	for _, name := range []string{"", "by group", "by/group"} {
		if _, err := tasks.KeyBy(in, task, name, key); err == nil || !strings.Contains(err.Error(), "name") {
			t.Errorf("edge name %q: %v, want an error about the name", name, err)
		}
	}
	_, err = tasks.KeyBy(in, task, "narrow", key)
	if err == nil || !strings.Contains(err.Error(), "has 3 partitions, the input topic 12") {
		t.Fatalf("an internal topic of 3 partitions for a 12-partition input: %v, want refused naming both counts", err)
	}
	if _, err := tasks.KeyBy(in, task, "by-group", key); err != nil {
		t.Fatalf("a new edge: %v", err)
	}
	// The topic was created with the input's partition count.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, tasks.RepartitionTopic(job, "by-group"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(topics[tasks.RepartitionTopic(job, "by-group")].Partitions); n != partitions {
		t.Fatalf("the internal topic has %d partitions, want the input's %d", n, partitions)
	}
}
