package demojob

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
)

// slowFirstCheckpoint holds the state uploads of checkpoint 1 until a state
// upload of checkpoint 3 or later starts.
type slowFirstCheckpoint struct {
	blob.Store
	once    sync.Once
	release chan struct{}
}

func (s *slowFirstCheckpoint) Put(ctx context.Context, name string, data []byte) error {
	if strings.HasSuffix(name, ".state") {
		switch {
		case strings.HasPrefix(name, "checkpoints/00000000000000000001/"):
			select {
			case <-s.release:
			case <-ctx.Done():
				return ctx.Err()
			}
		case !strings.HasPrefix(name, "checkpoints/00000000000000000002/"):
			s.once.Do(func() { close(s.release) })
		}
	}
	return s.Store.Put(ctx, name, data)
}

// TestAbortedCheckpointsTransactionsCommit: a checkpoint aborted while one
// subtask still uploads its state has sink transactions pre-committed at
// its barrier; a later checkpoint must commit them (their records precede
// its barrier). If the later checkpoint could complete before the aborted
// one's acknowledgement arrived, its manifest would leave them out, and a
// restore from it would abort them: committed output lost. A subtask's
// acknowledgements therefore reach the coordinator in barrier order.
func TestAbortedCheckpointsTransactionsCommit(t *testing.T) {
	dir := t.TempDir()
	c := Config{Seed: 5, Events: 20_000, Drivers: 100, Out: filepath.Join(dir, "out"), Parallelism: 2, Rate: 20_000}
	inner, err := blob.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stopped uint64
	store := &slowFirstCheckpoint{Store: inner, release: make(chan struct{})}
	// The 200 ms timeout aborts checkpoint 1; on a loaded machine (the
	// race detector) it may abort a few after it too, before the one
	// that releases 1's uploads: tolerate them, not fail the run.
	env := Env(c, eddy.CheckpointStore(store, 10*time.Millisecond), eddy.CheckpointTimeout(200*time.Millisecond),
		eddy.TolerableCheckpointFailures(1000), eddy.Restarts(0, 0), eddy.LogOutput(testWriter{t}),
		eddy.OnCheckpoint(func(s eddy.CheckpointStats) {
			if s.ID >= 2 && stopped == 0 {
				stopped = s.ID // the first checkpoint after the slow one: stop there
				cancel()
			}
		}))
	if err := env.Run(ctx); err != context.Canceled {
		t.Fatalf("first run: %v", err)
	}
	if stopped == 0 {
		t.Fatal("no checkpoint completed after the slow first one")
	}
	// Resume from the checkpoint the first run stopped at, to the end.
	env = Env(c, eddy.CheckpointStore(inner, 10*time.Millisecond), eddy.LogOutput(testWriter{t}))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := env.Stats().RestoredFrom; got != stopped {
		t.Fatalf("resumed from checkpoint %d, want %d", got, stopped)
	}
	sameLines(t, committed(t, c.Out), expected(c))
	noPending(t, c.Out)
}
