package eddy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
)

// joined is a join's output: the driver and the event times (ms since the
// generator's start) of the records that met; B is -1 for none.
type joined struct {
	Driver string `json:"driver" proto:"1"`
	A      int64  `json:"a" proto:"2"`
	B      int64  `json:"b" proto:"3"`
}

func (j joined) String() string {
	b, _ := json.Marshal(j)
	return string(b)
}

func msOf(t time.Time) int64 { return t.Sub(datagen.DefaultStartTime).Milliseconds() }

// Two generated GPS streams with interleaving event times: points every
// 10 ms (each driver every 100 ms), pings every 37 ms.
var (
	pointOpts = []datagen.Option{datagen.Seed(3), datagen.Events(6000), datagen.Drivers(10), datagen.Spacing(10 * time.Millisecond), datagen.Splits(4)}
	pingOpts  = []datagen.Option{datagen.Seed(4), datagen.Events(1500), datagen.Drivers(10), datagen.Spacing(37 * time.Millisecond), datagen.Splits(3)}
)

func events(n int64, opts []datagen.Option) []datagen.GPSPoint {
	out := make([]datagen.GPSPoint, n)
	for i := range out {
		out[i] = datagen.GPSEvent(int64(i), opts...)
	}
	return out
}

// runJoin runs a join of the points (first input) and pings (second) with
// event time from both sources; cancelAt > 0 cancels the run once that
// checkpoint completed.
func runJoin(t *testing.T, data, out string, cancelAt uint64, rate float64,
	join func(cs *eddy.ConnectedStreams[string, datagen.GPSPoint, datagen.GPSPoint]) *eddy.Stream[joined]) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := eddy.New(eddy.Parallelism(2), eddy.Checkpoints(data, 10*time.Millisecond), eddy.LogOutput(&logBuf{}), eddy.Restarts(0, 0),
		eddy.OnCheckpoint(func(s eddy.CheckpointStats) {
			if cancelAt > 0 && s.ID >= cancelAt {
				cancel()
			}
		}))
	ts := eddy.Watermarks(func(p *datagen.GPSPoint) time.Time { return p.Timestamp }, 0)
	pts := eddy.FromSource(env, datagen.GPS(append(pointOpts, datagen.Rate(rate))...), eddy.UID("points"), ts)
	pings := eddy.FromSource(env, datagen.GPS(append(pingOpts, datagen.Rate(rate/4))...), eddy.UID("pings"), ts)
	key := func(p *datagen.GPSPoint) string { return p.DriverID }
	eddy.ToSink(join(eddy.Connect(eddy.KeyBy(pts, key), eddy.KeyBy(pings, key))), file.JSONLines[joined](out))
	return env.Run(ctx)
}

// checkJoin runs the join uninterrupted and cancelled-and-resumed, and
// compares both outputs with want.
func checkJoin(t *testing.T, want []string, join func(cs *eddy.ConnectedStreams[string, datagen.GPSPoint, datagen.GPSPoint]) *eddy.Stream[joined]) {
	t.Helper()
	slices.Sort(want)
	out := t.TempDir()
	if err := runJoin(t, "file://"+t.TempDir(), out, 0, 0, join); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, out)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("%d lines, want %d; first differences:\n%s", len(got), len(want), diffLines(got, want))
	}
	data, out := "file://"+t.TempDir(), t.TempDir()
	if err := runJoin(t, data, out, 3, 40_000, join); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	if err := runJoin(t, data, out, 0, 0, join); err != nil {
		t.Fatal(err)
	}
	got = readLines(t, out)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("cancelled and resumed: %d lines, want %d; first differences:\n%s", len(got), len(want), diffLines(got, want))
	}
}

func diffLines(got, want []string) string {
	var out []string
	for _, l := range got {
		if _, ok := slices.BinarySearch(want, l); !ok && len(out) < 5 {
			out = append(out, "extra   "+l)
		}
	}
	for _, l := range want {
		if _, ok := slices.BinarySearch(got, l); !ok && len(out) < 10 {
			out = append(out, "missing "+l)
		}
	}
	return fmt.Sprint(out)
}

func TestIntervalJoin(t *testing.T) {
	const lower, upper = -50 * time.Millisecond, 30 * time.Millisecond
	// The model: every pair of one driver within the bounds.
	var want []string
	pings := events(1500, pingOpts)
	for _, a := range events(6000, pointOpts) {
		for _, b := range pings {
			d := b.Timestamp.Sub(a.Timestamp)
			if a.DriverID == b.DriverID && d >= lower && d <= upper {
				want = append(want, joined{a.DriverID, msOf(a.Timestamp), msOf(b.Timestamp)}.String())
			}
		}
	}
	if len(want) < 500 {
		t.Fatalf("the model finds only %d pairs", len(want))
	}
	checkJoin(t, want, func(cs *eddy.ConnectedStreams[string, datagen.GPSPoint, datagen.GPSPoint]) *eddy.Stream[joined] {
		return eddy.IntervalJoin(cs, lower, upper, func(k string, a, b *datagen.GPSPoint) joined {
			return joined{k, msOf(a.Timestamp), msOf(b.Timestamp)}
		}, eddy.UID("interval"))
	})
}

func TestJoinTable(t *testing.T) {
	for _, left := range []bool{false, true} {
		t.Run(fmt.Sprintf("left=%v", left), func(t *testing.T) {
			// The model: each point meets its driver's latest ping at or
			// before it.
			latest := map[string][]datagen.GPSPoint{}
			for _, p := range events(1500, pingOpts) {
				latest[p.DriverID] = append(latest[p.DriverID], p)
			}
			var want []string
			for _, a := range events(6000, pointOpts) {
				b := int64(-1)
				for _, p := range latest[a.DriverID] {
					if !p.Timestamp.After(a.Timestamp) {
						b = msOf(p.Timestamp)
					}
				}
				if b >= 0 || left {
					want = append(want, joined{a.DriverID, msOf(a.Timestamp), b}.String())
				}
			}
			join := eddy.JoinTable[string, datagen.GPSPoint, datagen.GPSPoint, joined]
			if left {
				join = eddy.LeftJoinTable[string, datagen.GPSPoint, datagen.GPSPoint, joined]
			}
			checkJoin(t, want, func(cs *eddy.ConnectedStreams[string, datagen.GPSPoint, datagen.GPSPoint]) *eddy.Stream[joined] {
				return join(cs, func(k string, a, b *datagen.GPSPoint) joined {
					if b == nil {
						return joined{k, msOf(a.Timestamp), -1}
					}
					return joined{k, msOf(a.Timestamp), msOf(b.Timestamp)}
				}, eddy.UID("table"))
			})
		})
	}
}
