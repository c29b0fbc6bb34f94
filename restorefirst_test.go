package eddy_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/discard"
)

// slowOpen is a keyed function whose Open takes a while, as a restore of
// a large state does.
type slowOpen struct{ d time.Duration }

func (f *slowOpen) Open(ctx *eddy.OpenContext) error {
	time.Sleep(f.d) // the slow work itself, not a synchronization
	return nil
}

func (f *slowOpen) Process(ctx *eddy.Context[string, datagen.GPSPoint], p *datagen.GPSPoint) error {
	return nil
}

// TestCheckpointsWaitForRestore: checkpoints start once every subtask has
// restored and opened, not while one is still at it: a start slower than
// the checkpoint timeout, with no checkpoint failure tolerated, does not
// fail the job, and its checkpoints complete.
func TestCheckpointsWaitForRestore(t *testing.T) {
	var completed atomic.Int64
	env := eddy.New(eddy.Checkpoints(filepath.Join(t.TempDir(), "data"), 10*time.Millisecond),
		eddy.CheckpointTimeout(50*time.Millisecond), eddy.TolerableCheckpointFailures(0), eddy.Restarts(0, 0),
		eddy.Parallelism(2), eddy.LogOutput(&logBuf{}), eddy.OnCheckpoint(func(eddy.CheckpointStats) { completed.Add(1) }))
	src := eddy.FromSource(env, datagen.GPS(datagen.Events(5000), datagen.Rate(50_000)))
	keyed := eddy.KeyBy(src, func(p *datagen.GPSPoint) string { return p.DriverID })
	out := eddy.Process[string, datagen.GPSPoint, datagen.GPSPoint](keyed, &slowOpen{d: 300 * time.Millisecond})
	eddy.ToSink(out, discard.Sink[datagen.GPSPoint]())
	if err := env.Run(context.Background()); err != nil {
		t.Fatalf("a start slower than the checkpoint timeout failed the job: %v", err)
	}
	if completed.Load() == 0 {
		t.Error("no checkpoint completed")
	}
}
