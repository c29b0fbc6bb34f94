package tasks_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	blobfile "github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/internal/taskchain"
	"github.com/eddyflow/eddy/tasks"
)

// TestFencedByAnOutsiderReclaims: a claim of a task's chain by a process
// out of the group (here the test, standing in for a zombie whose claim
// was in flight when it paused) fences the task's owner, which still has
// the task in the group: it claims the task again and runs on, without
// leaving the job, and the output stays exactly once.
func TestFencedByAnOutsiderReclaims(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job's tasks for seconds")
	}
	brokers := newCluster(t)
	const events, keys = 20_000, 300
	if err := produce(t, brokers, 0, events/2, keys); err != nil {
		t.Fatal(err)
	}
	store, err := blobfile.New(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	var out syncLog
	defer func() {
		if t.Failed() {
			out.dump(t)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- tasks.Run(ctx, tasks.Config{Job: job, Brokers: brokers, Topic: "in", Store: store, Interval: 50 * time.Millisecond,
			SessionTimeout: session, HeartbeatInterval: 300 * time.Millisecond,
			Options: []eddy.Option{eddy.LogOutput(out.writer("job"))}, Log: prefixed2{&out}}, build(brokers))
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !cond() {
			select {
			case err := <-done:
				t.Fatalf("waiting for %s: Run returned %v", what, err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: timed out", what)
			}
			time.Sleep(20 * time.Millisecond) // polling the log
		}
	}
	waitFor("every task to start", func() bool { return out.count(": started") >= partitions })
	// The outsider's claim, once the task has claimed its chain (its
	// first record is there).
	waitFor("task 3 to claim its chain", func() bool {
		c, err := taskchain.Open(ctx, store, "3")
		return err == nil && c.Newest().Seq > 0
	})
	chain, err := taskchain.Open(ctx, store, "3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chain.Claim(ctx, "the test, out of the group"); err != nil {
		t.Fatal(err)
	}
	waitFor("task 3 to claim it again", func() bool { return out.count("task 3: fenced by a process out of the group") > 0 })
	if err := produce(t, brokers, events/2, events, keys); err != nil {
		t.Fatal(err)
	}
	waitFor("every record committed", func() bool { return len(committedOutput(t, brokers)) >= events })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v, want nil after a reclaim and a planned stop", err)
	}
	checkExactlyOnce(t, committedOutput(t, brokers), events, keys)
	if _, err := chain.Commit(context.Background(), []byte("late")); err == nil {
		t.Fatal("the outsider's commit after the task claimed again succeeded; it must be fenced")
	}
}

// prefixed2 adds each line of a task log to out.
type prefixed2 struct{ out *syncLog }

func (p prefixed2) Write(b []byte) (int, error) {
	p.out.add(string(b))
	return len(b), nil
}
