package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/s3/s3test"
	"github.com/eddyflow/eddy/internal/demojob"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestKafkaDemo runs the Kafka demo against kfake twice, once interrupted
// and resumed: the committed totals are the same.
func TestKafkaDemo(t *testing.T) {
	digest := func(interrupt bool) (int64, string) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		brokers := c.ListenAddrs()
		cfg := demojob.Config{Seed: 3, Events: 100_000, Drivers: 50, Data: filepath.Join(t.TempDir(), "data"),
			CheckpointInterval: 20 * time.Millisecond, Parallelism: 2, EmitEvery: 10}
		ctx := context.Background()
		run := func(d time.Duration) error {
			env, _, err := kafkaDemoEnv(ctx, cfg, brokers, io.Discard, new(blob.Counter), eddy.LogOutput(io.Discard), eddy.Restarts(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return env.Run(rctx)
		}
		if interrupt {
			interrupted := 0
			for _, d := range []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond} {
				if err := run(d); err != nil {
					interrupted++
				}
			}
			if interrupted == 0 {
				t.Log("no run was interrupted")
			}
		}
		if err := run(time.Minute); err != nil {
			t.Fatal(err)
		}
		n, d, err := kafkaDemoDigest(ctx, brokers)
		if err != nil {
			t.Fatal(err)
		}
		return n, d
	}
	n1, d1 := digest(false)
	n2, d2 := digest(true)
	if n1 != 10_000 || n1 != n2 || d1 != d2 {
		t.Fatalf("uninterrupted: %d records, digest %s; interrupted: %d, %s (want 10000 records, equal digests)", n1, d1, n2, d2)
	}
	if got := splitBrokers(" a:1, b:2,"); len(got) != 2 || got[1] != "b:2" {
		t.Fatalf("splitBrokers: %q", got)
	}
}

// TestKafkaDemoGroup runs `eddy demo --kafka --group` as two processes of
// one job: one loads the input while the other waits for it, they share
// the eight tasks, and each prints its tasks as they move; one stops
// (SIGTERM: it hands its tasks over) and starts again midway. The
// committed totals equal those of the one-process demo. The processes
// share a local directory, then an S3 bucket on versitygw.
func TestKafkaDemoGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two processes of the demo")
	}
	t.Run("file", func(t *testing.T) { testKafkaDemoGroup(t, filepath.Join(t.TempDir(), "data")) })
	t.Run("s3", func(t *testing.T) {
		srv := s3test.Versitygw(t)
		srv.CreateBucket(t, "group")
		s3Credentials(t, srv)
		testKafkaDemoGroup(t, "s3://group/demo?endpoint="+srv.Endpoint+"&region="+srv.Region)
	})
}

func testKafkaDemoGroup(t *testing.T, data string) {
	const events, drivers, every = 40_000, 50, 10
	// The one-process demo's totals.
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	cfg := demojob.Config{Seed: 3, Events: events, Drivers: drivers, Data: filepath.Join(t.TempDir(), "data"),
		CheckpointInterval: 20 * time.Millisecond, Parallelism: 1, EmitEvery: every}
	env, _, err := kafkaDemoEnv(context.Background(), cfg, c.ListenAddrs(), io.Discard, new(blob.Counter), eddy.LogOutput(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantN, want, err := kafkaDemoDigest(context.Background(), c.ListenAddrs())
	c.Close()
	if err != nil {
		t.Fatal(err)
	}

	c, err = kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")
	var mu sync.Mutex
	var lines []string
	count := func(subs ...string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			all := true
			for _, sub := range subs {
				all = all && strings.Contains(l, sub)
			}
			if all {
				n++
			}
		}
		return n
	}
	type proc struct {
		name   string
		cmd    *exec.Cmd
		stderr *tailBuffer
		exited chan struct{}
	}
	var procs []proc
	start := func(name string) (*exec.Cmd, chan error) {
		cmd := exec.Command(os.Args[0], "demo", "--kafka", brokers, "--group", "--data", data, "--quiet",
			"--events", fmt.Sprint(events), "--drivers", fmt.Sprint(drivers), "--emit-every", fmt.Sprint(every),
			"--seed", "3", "--parallelism", "1", "--checkpoint-interval", "20ms")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr := &tailBuffer{max: 256 << 10}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		done, exited := make(chan error, 1), make(chan struct{})
		procs = append(procs, proc{name, cmd, stderr, exited})
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				mu.Lock()
				lines = append(lines, name+": "+sc.Text())
				mu.Unlock()
			}
			err := cmd.Wait()
			close(exited)
			done <- err
		}()
		return cmd, done
	}
	defer func() {
		if !t.Failed() {
			return
		}
		mu.Lock()
		for _, l := range lines {
			t.Log(l)
		}
		mu.Unlock()
		// A process still running is stuck: SIGQUIT makes it print its
		// goroutines to stderr before it exits.
		for _, p := range procs {
			select {
			case <-p.exited:
			default:
				_ = p.cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case <-p.exited:
				case <-time.After(10 * time.Second):
				}
			}
			t.Logf("%s's stderr (its end):\n%s", p.name, p.stderr.String())
		}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: timed out", what)
			}
			time.Sleep(50 * time.Millisecond) // polling the processes' output
		}
	}
	a, aDone := start("a")
	b, bDone := start("b")
	waitFor("both processes to run tasks", func() bool { return count("a: ", ": started") > 0 && count("b: ", ": started") > 0 })
	// The process that joined second took half the tasks from the first,
	// which handed them over at a checkpoint.
	waitFor("a handover at a checkpoint", func() bool { return count("handed over at checkpoint") > 0 })
	stop := func(cmd *exec.Cmd, done chan error, name string) {
		t.Helper()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s after SIGTERM: %v", name, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s did not stop within a minute of SIGTERM", name)
		}
	}
	stop(a, aDone, "a")
	waitFor("a to leave", func() bool { return count("a: eddy demo --group: handed the tasks over and left the group") > 0 })
	a, aDone = start("a again")
	waitFor("a to run tasks again", func() bool { return count("a again: ", ": started") > 0 })
	waitFor("every committed total", func() bool {
		n, _, err := kafkaDemoDigest(context.Background(), c.ListenAddrs())
		return err == nil && n >= wantN
	})
	stop(a, aDone, "a again")
	stop(b, bDone, "b")
	n, got, err := kafkaDemoDigest(context.Background(), c.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	if n != wantN || got != want {
		t.Fatalf("two processes committed %d totals, digest %s; one process %d, %s", n, got, wantN, want)
	}
}

// tailBuffer keeps the last max bytes written to it, for a child process's
// stderr; safe for the process's writer and the test's reader at once.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
