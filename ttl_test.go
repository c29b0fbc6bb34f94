package eddy_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/state"
)

// runningCount counts each driver's points in event-time TTL state: a
// driver unseen for longer than the TTL starts from zero.
type runningCount struct{ n *state.Value[int64] }

func (r *runningCount) Open(ctx *eddy.OpenContext) error {
	var err error
	r.n, err = state.NewValue[int64](ctx.State, "n", state.TTL(state.TTLConfig{TTL: time.Second, EventTime: true}))
	return err
}

func (r *runningCount) Process(ctx *eddy.Context[string, sumOut], _ *datagen.GPSPoint) error {
	n, _ := r.n.Get()
	r.n.Update(n + 1)
	ctx.Emit(sumOut{Driver: ctx.Key, Sum: n + 1})
	return nil
}

// TestStateTTLInAJob: a driver with a 3-second hole in its points starts
// counting anew after it; the others, seen every 40 ms, never do.
func TestStateTTLInAJob(t *testing.T) {
	dir := t.TempDir()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}), eddy.Checkpoints("file://"+t.TempDir(), 10*time.Millisecond))
	opts := []datagen.Option{datagen.Seed(11), datagen.Events(4000), datagen.Drivers(4), datagen.Spacing(10 * time.Millisecond), datagen.Splits(1)}
	pts := eddy.FromSource(env, datagen.GPS(opts...), eddy.WithParallelism(1),
		eddy.Watermarks(func(p *datagen.GPSPoint) time.Time { return p.Timestamp }, 0))
	holed := datagen.GPSEvent(0, opts...).DriverID
	from := datagen.DefaultStartTime.Add(10 * time.Second)
	kept := eddy.Filter(pts, func(p *datagen.GPSPoint) bool {
		return p.DriverID != holed || p.Timestamp.Before(from) || !p.Timestamp.Before(from.Add(3*time.Second))
	})
	counts := eddy.Process[string, datagen.GPSPoint, sumOut](eddy.KeyBy(kept, func(p *datagen.GPSPoint) string { return p.DriverID }), &runningCount{})
	eddy.ToSink(counts, file.JSONLines[sumOut](dir))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	starts := map[string]int{}
	for _, l := range readLines(t, dir) {
		var s sumOut
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		if s.Sum == 1 {
			starts[s.Driver]++
		}
	}
	for d, n := range starts {
		want := 1
		if d == holed {
			want = 2
		}
		if n != want {
			t.Errorf("driver %s started counting %d times, want %d", d, n, want)
		}
	}
	if len(starts) != 4 {
		t.Fatalf("counts of %d drivers, want 4", len(starts))
	}
}
