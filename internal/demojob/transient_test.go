package demojob

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	blobfile "github.com/eddyflow/eddy/blob/file"
)

// flakyStore fails the next failGets reads of state parts with an error that
// is neither corruption nor a missing object: a network blip.
type flakyStore struct {
	blob.Store
	failGets atomic.Int32
}

var errTransient = errors.New("connection reset by peer")

func (s *flakyStore) Get(ctx context.Context, name string) ([]byte, error) {
	if strings.HasSuffix(name, ".state") && s.failGets.Add(-1) >= 0 {
		return nil, errTransient
	}
	return s.Store.Get(ctx, name)
}

// TestTransientReadErrorDoesNotFallBack: a read error that is not corruption
// (checkpoint.Storage.Latest returns such errors instead of skipping, since
// falling back past a committed checkpoint repeats output) must not make the
// restore fall back; the attempt fails, the restart strategy retries, and the
// output stays exactly-once.
func TestTransientReadErrorDoesNotFallBack(t *testing.T) {
	dir := t.TempDir()
	c := Config{Seed: 5, Events: 60_000, Drivers: 200, Out: filepath.Join(dir, "out"), Parallelism: 2, Rate: 40_000}
	fs, err := blobfile.New(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	store := &flakyStore{Store: fs}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	env := Env(c, eddy.CheckpointStore(store, 20*time.Millisecond), eddy.LogOutput(testWriter{t}), eddy.OnCheckpoint(func(eddy.CheckpointStats) {
		if n++; n == 6 {
			cancel()
		}
	}))
	if err := env.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("partial run: %v, want context.Canceled", err)
	}
	newest := maxID(manifestIDs(filepath.Join(dir, "data")))

	store.failGets.Store(1) // one transient failure reading a state part
	logs := &logBuffer{t: t}
	env = Env(c, eddy.CheckpointStore(store, 20*time.Millisecond), eddy.LogOutput(logs), eddy.Restarts(2, 10*time.Millisecond))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "falling back") {
		t.Errorf("a transient read error made the restore fall back")
	}
	if got := env.Stats().RestoredFrom; got != newest {
		t.Errorf("restored checkpoint %d, want the newest, %d", got, newest)
	}
	sameLines(t, committed(t, c.Out), expected(c))
	noPending(t, c.Out)
}
