package eddy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
)

// TestUnionKeyBy unions two sources of different parallelism with a
// mapped copy of one of them, keys the union and counts per driver: every
// input's records reach the count, the mapped copy's too.
func TestUnionKeyBy(t *testing.T) {
	dir := t.TempDir()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}), eddy.Checkpoints("file://"+t.TempDir(), 0))
	a := eddy.FromSource(env, datagen.GPS(datagen.Seed(1), datagen.Events(3000), datagen.Drivers(10)), eddy.UID("gps-a"))
	b := eddy.FromSource(env, datagen.GPS(datagen.Seed(2), datagen.Events(2000), datagen.Drivers(10)), eddy.UID("gps-b"), eddy.WithParallelism(1))
	ones := func(p *datagen.GPSPoint) sumOut { return sumOut{Driver: p.DriverID, Sum: 1} }
	tens := func(p *datagen.GPSPoint) sumOut { return sumOut{Driver: p.DriverID, Sum: 10} }
	all := eddy.Union(eddy.Map(a, ones), eddy.Map(b, ones), eddy.Map(a, tens))
	sums := eddy.Reduce(eddy.KeyBy(all, func(s *sumOut) string { return s.Driver }), func(x, y sumOut) sumOut {
		return sumOut{Driver: x.Driver, Sum: x.Sum + y.Sum}
	})
	// 300 points of a and 200 of b per driver, a's counted 1 + 10 times.
	eddy.ToSink(eddy.Filter(sums, func(s *sumOut) bool { return s.Sum == 300*11+200 }), file.JSONLines[sumOut](dir))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var drivers []string
	for _, l := range readLines(t, dir) {
		var s sumOut
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		drivers = append(drivers, s.Driver)
	}
	slices.Sort(drivers)
	if len(drivers) != 10 || len(slices.Compact(slices.Clone(drivers))) != 10 {
		t.Fatalf("drivers reaching the full count: %v, want each of 10 once", drivers)
	}
}

// TestUnionToSink writes a union of two sources of different parallelism
// to one sink: its writers are numbered across both stages, so no writer
// replaces another's output.
func TestUnionToSink(t *testing.T) {
	dir := t.TempDir()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}), eddy.Checkpoints("file://"+t.TempDir(), 0))
	a := eddy.FromSource(env, datagen.GPS(datagen.Seed(1), datagen.Events(500), datagen.Drivers(5)), eddy.UID("gps-a"))
	b := eddy.FromSource(env, datagen.GPS(datagen.Seed(2), datagen.Events(300), datagen.Drivers(5)), eddy.UID("gps-b"), eddy.WithParallelism(1))
	tag := func(src string) func(p *datagen.GPSPoint) sumOut {
		return func(p *datagen.GPSPoint) sumOut { return sumOut{Driver: src + p.DriverID, Sum: 1} }
	}
	eddy.ToSink(eddy.Union(eddy.Map(a, tag("a-")), eddy.Map(b, tag("b-"))), file.JSONLines[sumOut](dir))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	counts := map[byte]int{}
	for _, l := range readLines(t, dir) {
		var s sumOut
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		counts[s.Driver[0]]++
	}
	if counts['a'] != 500 || counts['b'] != 300 {
		t.Fatalf("lines per source %v, want a: 500, b: 300", fmt.Sprint(counts))
	}
}
