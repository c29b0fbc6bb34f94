package eddy_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/state"
)

// tally counts, per driver, the records of both inputs in one shared state
// and emits the counts once both inputs have ended.
type tally struct {
	a, b *state.Value[int64]
}

func (f *tally) Open(ctx *eddy.OpenContext) error {
	var err error
	if f.a, err = state.NewValue[int64](ctx.State, "a"); err != nil {
		return err
	}
	f.b, err = state.NewValue[int64](ctx.State, "b")
	return err
}

var theEnd = time.Unix(0, 1<<62)

func (f *tally) Process1(ctx *eddy.Context[string, sumOut], _ *datagen.GPSPoint) error {
	n, _ := f.a.Get()
	f.a.Update(n + 1)
	ctx.RegisterEventTimer(theEnd)
	return nil
}

func (f *tally) Process2(ctx *eddy.Context[string, sumOut], _ *sumOut) error {
	n, _ := f.b.Get()
	f.b.Update(n + 1)
	ctx.RegisterEventTimer(theEnd)
	return nil
}

func (f *tally) OnTimer(ctx *eddy.Context[string, sumOut], _ time.Time) error {
	a, _ := f.a.Get()
	b, _ := f.b.Get()
	ctx.Emit(sumOut{Driver: ctx.Key, Sum: a*100_000 + b})
	return nil
}

// runTally connects GPS points keyed by driver with (driver, 1) records of
// another source, keyed the same way, into one tally; cancelAt > 0
// cancels the run once that checkpoint completed.
func runTally(t *testing.T, data, out string, cancelAt uint64) error {
	ctx, cancel, cancelOpt := cancelAfterCheckpoint(cancelAt)
	defer cancel()
	env := eddy.New(eddy.Parallelism(2), eddy.Checkpoints(data, 10*time.Millisecond), eddy.LogOutput(&logBuf{}), eddy.Restarts(0, 0), cancelOpt)
	pts := eddy.FromSource(env, datagen.GPS(datagen.Seed(3), datagen.Events(60_000), datagen.Drivers(30), datagen.Rate(200_000)), eddy.UID("points"))
	other := eddy.FromSource(env, datagen.GPS(datagen.Seed(4), datagen.Events(30_000), datagen.Drivers(30), datagen.Rate(100_000)), eddy.UID("pings"),
		eddy.WithParallelism(1))
	ones := eddy.Map(other, func(p *datagen.GPSPoint) sumOut { return sumOut{Driver: p.DriverID, Sum: 1} })
	cs := eddy.Connect(eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID }),
		eddy.KeyBy(ones, func(s *sumOut) string { return s.Driver }))
	eddy.ToSink(eddy.CoProcess[string, datagen.GPSPoint, sumOut, sumOut](cs, &tally{}, eddy.UID("tally")), file.JSONLines[sumOut](out))
	return env.Run(ctx)
}

// TestConnectSharesStateAcrossInputs: both inputs of a CoProcess update
// the same keyed state, and a run cancelled after a checkpoint and resumed
// commits exactly what an uninterrupted run does.
func TestConnectSharesStateAcrossInputs(t *testing.T) {
	whole := t.TempDir()
	if err := runTally(t, "file://"+t.TempDir(), whole, 0); err != nil {
		t.Fatal(err)
	}
	want := readLines(t, whole)
	slices.Sort(want)
	if len(want) != 30 {
		t.Fatalf("%d lines, want one per driver (30): %v", len(want), want)
	}
	for _, l := range want {
		// 2000 points and 1000 pings per driver.
		if !strings.Contains(l, `"sum":200001000`) {
			t.Fatalf("line %s: want 2000 records of the first input and 1000 of the second", l)
		}
	}
	data, out := "file://"+t.TempDir(), t.TempDir()
	if err := runTally(t, data, out, 3); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	if err := runTally(t, data, out, 0); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, out)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("resumed run committed\n%v\nwant\n%v", got, want)
	}
}

func TestConnectErrors(t *testing.T) {
	key := func(p *datagen.GPSPoint) string { return p.DriverID }
	for _, tc := range []struct {
		name  string
		build func(env *eddy.Env)
		want  string
	}{
		{"second already used", func(env *eddy.Env) {
			a := eddy.KeyBy(eddy.FromSource(env, datagen.GPS(), eddy.UID("a")), key)
			b := eddy.KeyBy(eddy.FromSource(env, datagen.GPS(), eddy.UID("b")), key)
			eddy.ToSink(eddy.Reduce(b, func(x, _ datagen.GPSPoint) datagen.GPSPoint { return x }), file.JSONLines[datagen.GPSPoint](t.TempDir()))
			eddy.Connect(a, b)
		}, "already used"},
		{"other parallelism", func(env *eddy.Env) {
			a := eddy.KeyBy(eddy.FromSource(env, datagen.GPS(), eddy.UID("a")), key, eddy.WithParallelism(2))
			b := eddy.KeyBy(eddy.FromSource(env, datagen.GPS(), eddy.UID("b")), key, eddy.WithParallelism(3))
			eddy.Connect(a, b)
		}, "parallelism 2 and 3"},
		{"itself", func(env *eddy.Env) {
			a := eddy.KeyBy(eddy.FromSource(env, datagen.GPS(), eddy.UID("a")), key)
			eddy.Connect(a, a)
		}, "with itself"},
	} {
		env := eddy.New(eddy.LogOutput(&logBuf{}))
		tc.build(env)
		err := env.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Run = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
