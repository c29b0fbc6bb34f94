package tasks_test

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestStopAllAtOnce: every process of a job gets SIGTERM at the same time
// (a deployment that stops them all): each hands its tasks over or stops
// them, leaves and exits cleanly, and the committed output is exactly
// once.
func TestStopAllAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	brokers := newCluster(t)
	const events, keys = 20_000, 300
	if err := produce(t, brokers, 0, events, keys); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "store")
	var out syncLog
	defer func() {
		if t.Failed() {
			out.dump(t)
		}
	}()
	procs := make([]*proc, 3)
	for i := range procs {
		procs[i] = startProcess(t, helperConfig{Brokers: brokers, Store: store, Name: fmt.Sprintf("p%d", i)}, &out)
	}
	deadline := time.Now().Add(time.Minute)
	for len(committedOutput(t, brokers)) < events {
		if time.Now().After(deadline) {
			t.Fatal("the output was not committed within a minute")
		}
		time.Sleep(100 * time.Millisecond) // polling the output topic
	}
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		if err := waitStopped(t, p); err != nil {
			t.Errorf("%s after SIGTERM: %v", p.name, err)
		}
	}
	checkExactlyOnce(t, committedOutput(t, brokers), events, keys)
}
