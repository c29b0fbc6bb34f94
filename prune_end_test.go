package eddy_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	blobfile "github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/discard"
)

// hangingDeletes is a store whose Deletes hang until their context is done.
type hangingDeletes struct{ blob.Store }

func (h hangingDeletes) Delete(ctx context.Context, name string) error {
	<-ctx.Done()
	return ctx.Err()
}

// A job that has finished does not wait without end for the deletion of
// old checkpoints: with every Delete hanging, Run returns (after
// eddy.PruneGrace), says the cleanup was cut short, and the next run's
// checkpoints delete what it left.
func TestRunDoesNotWaitForHangingCleanup(t *testing.T) {
	inner, err := blobfile.New(filepath.Join(t.TempDir(), "ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(store blob.Store, log *logBuf) int {
		checkpoints := 0
		env := eddy.New(eddy.Parallelism(2), eddy.CheckpointStore(store, 10*time.Millisecond), eddy.Restarts(0, 0),
			eddy.LogOutput(log), eddy.OnCheckpoint(func(eddy.CheckpointStats) { checkpoints++ }))
		// About a second: enough 10 ms checkpoints to prune, also when a
		// loaded machine completes few of them.
		pts := eddy.FromSource(env, datagen.GPS(datagen.Seed(5), datagen.Events(40_000), datagen.Drivers(20), datagen.Rate(40_000)))
		keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
		counts := eddy.Process[string, datagen.GPSPoint, sumOut](keyed, &counter[countV1]{inc: func(v *countV1) { v.N++ }}, eddy.Named("counter"))
		eddy.ToSink(counts, discard.Sink[sumOut]())
		done := make(chan error, 1)
		go func() { done <- env.Run(context.Background()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("Run did not return: it waits for the hanging deletes")
		}
		return checkpoints
	}
	var log logBuf
	if n := run(hangingDeletes{inner}, &log); n <= checkpoint.DefaultRetain {
		t.Fatalf("%d checkpoints, want more than the %d retained so that some are pruned", n, checkpoint.DefaultRetain)
	}
	if !strings.Contains(log.String(), "cut short") {
		t.Fatalf("log does not say the cleanup was cut short:\n%s", log.String())
	}
	st := checkpoint.NewStorage(inner, 0)
	ids, err := st.List(context.Background())
	if err != nil || len(ids) <= checkpoint.DefaultRetain {
		t.Fatalf("List = %v, %v: want the checkpoints no delete could remove", ids, err)
	}
	// The next run resumes from the newest and prunes the rest.
	run(inner, &logBuf{})
	ids, err = st.List(context.Background())
	if err != nil || len(ids) > checkpoint.DefaultRetain {
		t.Fatalf("after the next run List = %v, %v: want at most %d", ids, err, checkpoint.DefaultRetain)
	}
}
