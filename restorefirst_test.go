package eddy_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/discard"
)

// slowOpen is a keyed function whose Open takes a while, as a restore of
// a large state does; opened records when the last Open returned.
type slowOpen struct {
	d      time.Duration
	mu     *sync.Mutex
	opened *time.Time
}

func (f *slowOpen) Open(ctx *eddy.OpenContext) error {
	time.Sleep(f.d) // the slow work itself, not a synchronization
	f.mu.Lock()
	*f.opened = time.Now()
	f.mu.Unlock()
	return nil
}

func (f *slowOpen) Process(ctx *eddy.Context[string, datagen.GPSPoint], p *datagen.GPSPoint) error {
	return nil
}

// TestCheckpointsWaitForRestore: checkpoints start once every subtask has
// restored and opened, not while one is still at it: with checkpoints due
// every 10 ms and a start of 300 ms, the first checkpoint starts after
// the last Open returned, and checkpoints complete.
func TestCheckpointsWaitForRestore(t *testing.T) {
	var mu sync.Mutex
	var opened, firstStart time.Time
	completed := 0
	env := eddy.New(eddy.Checkpoints(filepath.Join(t.TempDir(), "data"), 10*time.Millisecond),
		eddy.Restarts(0, 0), eddy.Parallelism(2), eddy.LogOutput(&logBuf{}),
		eddy.OnCheckpoint(func(s eddy.CheckpointStats) {
			mu.Lock()
			defer mu.Unlock()
			if start := s.Completed.Add(-s.Duration); firstStart.IsZero() || start.Before(firstStart) {
				firstStart = start
			}
			completed++
		}))
	src := eddy.FromSource(env, datagen.GPS(datagen.Events(5000), datagen.Rate(50_000)))
	keyed := eddy.KeyBy(src, func(p *datagen.GPSPoint) string { return p.DriverID })
	out := eddy.Process[string, datagen.GPSPoint, datagen.GPSPoint](keyed, &slowOpen{d: 300 * time.Millisecond, mu: &mu, opened: &opened})
	eddy.ToSink(out, discard.Sink[datagen.GPSPoint]())
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if completed == 0 {
		t.Fatal("no checkpoint completed")
	}
	if firstStart.Before(opened) {
		t.Fatalf("the first checkpoint started %v before the last subtask had opened", opened.Sub(firstStart))
	}
}
