package eddy_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/state"
)

// limit is a broadcast record: a speed limit for one driver.
type limit struct {
	Driver string  `proto:"1"`
	Kmh    float32 `proto:"2"`
}

// limitsOf gives driver i of n the limit 300 + 40*i km/h.
func limitsOf(n int) []limit {
	out := make([]limit, n)
	for i := range out {
		out[i] = limit{Driver: fmt.Sprintf("driver-%05d", i), Kmh: float32(300 + 40*i)}
	}
	return out
}

// speeding keeps each driver's speeds and, once the input ends, counts
// those over the driver's limit in the broadcast state.
type speeding struct {
	limits *eddy.BroadcastState[string, float32]
	speeds *state.List[float32]
}

func (s *speeding) Open(ctx *eddy.OpenContext) error {
	var err error
	if s.limits, err = eddy.NewBroadcastState[string, float32](ctx, "limits"); err != nil {
		return err
	}
	s.speeds, err = state.NewList[float32](ctx.State, "speeds")
	return err
}

func (s *speeding) Process(ctx *eddy.Context[string, sumOut], p *datagen.GPSPoint) error {
	s.speeds.Add(p.SpeedKmh)
	ctx.RegisterEventTimer(theEnd)
	return nil
}

func (s *speeding) ProcessBroadcast(_ *eddy.BroadcastContext[sumOut], l *limit) error {
	return s.limits.Put(l.Driver, l.Kmh)
}

func (s *speeding) OnTimer(ctx *eddy.Context[string, sumOut], _ time.Time) error {
	lim, ok := s.limits.Get(ctx.Key)
	if !ok {
		return fmt.Errorf("no limit for %s", ctx.Key)
	}
	n := int64(0)
	for _, v := range s.speeds.Get() {
		if v > lim {
			n++
		}
	}
	ctx.Emit(sumOut{Driver: ctx.Key, Sum: n})
	return nil
}

// limitSource is a bounded source of the limits, one split.
type limitSource struct{ limits []limit }

func (l limitSource) Name() string { return "limits" }
func (l limitSource) Splits() int  { return 1 }
func (l limitSource) OpenSplit(_ context.Context, _ int, pos []byte) (eddy.SplitReader[limit], error) {
	r := &limitReader{limits: l.limits}
	if len(pos) == 1 {
		r.next = int(pos[0])
	}
	return r, nil
}

type limitReader struct {
	limits []limit
	next   int
}

func (r *limitReader) Next(l *limit) (eddy.ReadStatus, error) {
	if r.next == len(r.limits) {
		return eddy.End, nil
	}
	*l = r.limits[r.next]
	r.next++
	return eddy.Record, nil
}
func (r *limitReader) Position() []byte { return []byte{byte(r.next)} }
func (r *limitReader) Close() error     { return nil }

func runSpeeding(t *testing.T, par int, data, out string, cancelAt uint64) error {
	ctx, cancel, cancelOpt := cancelAfterCheckpoint(cancelAt)
	defer cancel()
	env := eddy.New(eddy.Parallelism(par), eddy.Checkpoints(data, 10*time.Millisecond), eddy.LogOutput(&logBuf{}), eddy.Restarts(0, 0), cancelOpt)
	pts := eddy.FromSource(env, datagen.GPS(datagen.Seed(10), datagen.Events(30_000), datagen.Drivers(12), datagen.Rate(50_000)), eddy.UID("points"))
	limits := eddy.FromSource[limit](env, limitSource{limitsOf(12)}, eddy.UID("limits"))
	bc := eddy.ConnectBroadcast(eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID }), eddy.Broadcast(limits))
	eddy.ToSink(eddy.ProcessBroadcast[string, datagen.GPSPoint, limit, sumOut](bc, &speeding{}, eddy.UID("speeding")), file.JSONLines[sumOut](out))
	return env.Run(ctx)
}

// TestBroadcastState: every subtask sees every limit, and the limits come
// back from a checkpoint at another parallelism (the limits' source is
// done by then, so nothing replays them).
func TestBroadcastState(t *testing.T) {
	var want []string
	over := map[string]int64{}
	for i := range int64(30_000) {
		p := datagen.GPSEvent(i, datagen.Seed(10), datagen.Drivers(12))
		var lim float32
		for _, l := range limitsOf(12) {
			if l.Driver == p.DriverID {
				lim = l.Kmh
			}
		}
		if _, ok := over[p.DriverID]; !ok {
			over[p.DriverID] = 0
		}
		if p.SpeedKmh > lim {
			over[p.DriverID]++
		}
	}
	some, all := false, true
	for d, n := range over {
		want = append(want, fmt.Sprintf(`{"driver":%q,"sum":%d}`, d, n))
		some, all = some || n > 0, all && n == 2500
	}
	if !some || all {
		t.Fatalf("the limits do not tell drivers apart: %v", over)
	}
	slices.Sort(want)
	whole := t.TempDir()
	if err := runSpeeding(t, 2, "file://"+t.TempDir(), whole, 0); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, whole); !slices.Equal(got, want) {
		t.Fatalf("got\n%v\nwant\n%v", got, want)
	}
	for _, par := range []int{3, 1} {
		data, out := "file://"+t.TempDir(), t.TempDir()
		// Cancelled after its second checkpoint: early enough that a
		// loaded machine, completing few 10 ms checkpoints, gets there
		// before the input ends.
		if err := runSpeeding(t, 2, data, out, 2); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled run: %v", err)
		}
		if err := runSpeeding(t, par, data, out, 0); err != nil {
			t.Fatal(err)
		}
		if got := readLines(t, out); !slices.Equal(got, want) {
			t.Fatalf("resumed at parallelism %d: got\n%v\nwant\n%v", par, got, want)
		}
	}
}
