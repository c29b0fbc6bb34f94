package eddy_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob/faulty"
	blobfile "github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/discard"
)

// A checkpoint's stats say where its time went: with every upload taking
// putDelay, the subtask that acknowledged last spent at least that long
// uploading its state, the manifest write took at least that long, and
// the parts add up to no more than the whole.
func TestCheckpointStatsExplainDuration(t *testing.T) {
	const putDelay = 40 * time.Millisecond
	inner, err := blobfile.New(filepath.Join(t.TempDir(), "ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	store := faulty.New(inner, faulty.Options{Latency: faulty.Fixed(putDelay), PutOnly: true})
	var mu sync.Mutex
	var stats []eddy.CheckpointStats
	env := eddy.New(eddy.Parallelism(2), eddy.CheckpointStore(store, 20*time.Millisecond), eddy.Restarts(0, 0),
		eddy.LogOutput(&logBuf{}), eddy.OnCheckpoint(func(s eddy.CheckpointStats) {
			mu.Lock()
			stats = append(stats, s)
			mu.Unlock()
		}))
	pts := eddy.FromSource(env, datagen.GPS(datagen.Seed(3), datagen.Events(20_000), datagen.Drivers(50), datagen.Rate(40_000)))
	keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
	counts := eddy.Process[string, datagen.GPSPoint, sumOut](keyed, &counter[countV1]{inc: func(v *countV1) { v.N++ }}, eddy.Named("counter"))
	eddy.ToSink(counts, discard.Sink[sumOut]())
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(stats) < 2 {
		t.Fatalf("%d checkpoints, want at least 2", len(stats))
	}
	for _, s := range stats {
		l := s.Last
		if l.Stage != 1 {
			t.Errorf("checkpoint %d: last ack from stage %d, want the keyed stage 1 (its state upload is the slow part)", s.ID, l.Stage)
		}
		if l.Subtask < 0 || l.Subtask >= 2 {
			t.Errorf("checkpoint %d: last ack from subtask %d of 2", s.ID, l.Subtask)
		}
		if l.Async < putDelay {
			t.Errorf("checkpoint %d: async part %v, want at least the upload's %v", s.ID, l.Async, putDelay)
		}
		if s.ManifestWrite < putDelay {
			t.Errorf("checkpoint %d: manifest write %v, want at least %v", s.ID, s.ManifestWrite, putDelay)
		}
		if l.Barrier < 0 || l.Sync < 0 {
			t.Errorf("checkpoint %d: negative part: %+v", s.ID, l)
		}
		if sum := l.Barrier + l.Sync + l.Async + s.ManifestWrite; sum > s.Duration {
			t.Errorf("checkpoint %d: parts add up to %v, more than its duration %v", s.ID, sum, s.Duration)
		}
	}
}
