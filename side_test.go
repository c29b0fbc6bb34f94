package eddy_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
)

var fastTag = eddy.NewOutputTag[datagen.GPSPoint]("fast")

// splitter sends fast points to a side output, counts the others per
// subtask, and emits its count when the input ends.
type splitter struct {
	fastOver float32 // km/h
	slow     int64
}

func (s *splitter) Open(*eddy.OpenContext) error { return nil }

func (s *splitter) Process(ctx *eddy.Context[string, sumOut], p *datagen.GPSPoint) error {
	if p.SpeedKmh > s.fastOver {
		eddy.Output(ctx, fastTag, *p)
		return nil
	}
	s.slow++
	return nil
}

func (s *splitter) Final(emit func(sumOut)) error {
	emit(sumOut{Driver: "slow", Sum: s.slow})
	return nil
}

func TestSideOutputAndFinal(t *testing.T) {
	const n = 5000
	opts := []datagen.Option{datagen.Seed(5), datagen.Events(n), datagen.Drivers(20)}
	fast := 0
	for i := range int64(n) {
		if datagen.GPSEvent(i, opts...).SpeedKmh > 450 {
			fast++
		}
	}
	if fast == 0 || fast == n {
		t.Fatalf("the data has %d fast points of %d: the test would show nothing", fast, n)
	}
	mainDir, sideDir := t.TempDir(), t.TempDir()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}), eddy.Checkpoints("file://"+t.TempDir(), 0))
	pts := eddy.FromSource(env, datagen.GPS(opts...))
	counts := eddy.Process[string, datagen.GPSPoint, sumOut](eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID }), &splitter{fastOver: 450})
	eddy.ToSink(counts, file.JSONLines[sumOut](mainDir))
	eddy.ToSink(eddy.SideOutput(counts, fastTag), file.JSONLines[datagen.GPSPoint](sideDir))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(readLines(t, sideDir)); got != fast {
		t.Fatalf("side output has %d points, want the %d fast ones", got, fast)
	}
	var slow int64
	lines := readLines(t, mainDir)
	for _, l := range lines {
		var s sumOut
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		slow += s.Sum
	}
	if len(lines) != 2 || slow != int64(n-fast) {
		t.Fatalf("Final emitted %v, want one count per subtask summing to %d", lines, n-fast)
	}
}

func TestSideOutputErrors(t *testing.T) {
	env := eddy.New(eddy.LogOutput(&logBuf{}))
	pts := eddy.FromSource(env, datagen.GPS(datagen.Events(10)))
	mapped := eddy.Map(pts, func(p *datagen.GPSPoint) sumOut { return sumOut{} })
	eddy.ToSink(mapped, file.JSONLines[sumOut](t.TempDir()))
	eddy.ToSink(eddy.SideOutput(mapped, fastTag), file.JSONLines[datagen.GPSPoint](t.TempDir()))
	if err := env.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "has no side outputs") {
		t.Fatalf("Run = %v, want an error saying a map has no side outputs", err)
	}
	env = eddy.New(eddy.LogOutput(&logBuf{}))
	pts = eddy.FromSource(env, datagen.GPS(datagen.Events(10)))
	counts := eddy.Process[string, datagen.GPSPoint, sumOut](eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID }), &splitter{})
	eddy.ToSink(counts, file.JSONLines[sumOut](t.TempDir()))
	eddy.ToSink(eddy.SideOutput(counts, eddy.NewOutputTag[sumOut]("fast")), file.JSONLines[sumOut](t.TempDir()))
	if err := env.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "consumed as another type") {
		t.Fatalf("Run = %v, want an error saying the side output is consumed as another type", err)
	}
}
