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
	ctx, cancel, cancelOpt := cancelAfterCheckpoint(cancelAt)
	defer cancel()
	env := eddy.New(eddy.Parallelism(2), eddy.Checkpoints(data, 10*time.Millisecond), eddy.LogOutput(&logBuf{}), eddy.Restarts(0, 0), cancelOpt)
	ts := eddy.Watermarks(func(p *datagen.GPSPoint) time.Time { return p.Timestamp }, 0)
	pts := eddy.FromSource(env, datagen.GPS(append(pointOpts, datagen.Rate(rate))...), eddy.UID("points"), ts)
	pings := eddy.FromSource(env, datagen.GPS(append(pingOpts, datagen.Rate(rate/4))...), eddy.UID("pings"), ts)
	key := func(p *datagen.GPSPoint) string { return p.DriverID }
	eddy.ToSink(join(eddy.Connect(eddy.KeyBy(pts, key), eddy.KeyBy(pings, key))), file.JSONLines[joined](out))
	return env.Run(ctx)
}

// checkJoin runs the join uninterrupted and cancelled-and-resumed, and
// compares both outputs with want.
func checkJoin(t *testing.T, want []string, join func(cs *eddy.ConnectedStreams[string, datagen.GPSPoint, datagen.GPSPoint]) *eddy.Stream[joined], unwrap ...func(string) string) {
	t.Helper()
	slices.Sort(want)
	lines := func(dir string) []string {
		got := readLines(t, dir)
		for _, u := range unwrap {
			for i := range got {
				got[i] = u(got[i])
			}
		}
		slices.Sort(got)
		return got
	}
	out := t.TempDir()
	if err := runJoin(t, "file://"+t.TempDir(), out, 0, 0, join); err != nil {
		t.Fatal(err)
	}
	got := lines(out)
	if !slices.Equal(got, want) {
		t.Fatalf("%d lines, want %d; first differences:\n%s", len(got), len(want), diffLines(got, want))
	}
	// 6,000 points a second: the input lasts a second, so three
	// checkpoints complete before its end also on a loaded machine (at
	// 40,000 a second it lasted 0.15 s, and a run at load 30 finished
	// first).
	data, out := "file://"+t.TempDir(), t.TempDir()
	if err := runJoin(t, data, out, 3, 6_000, join); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	if err := runJoin(t, data, out, 0, 0, join); err != nil {
		t.Fatal(err)
	}
	got = lines(out)
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

// windowJoined is a window join's output.
type windowJoined struct {
	Driver string `json:"driver" proto:"1"`
	Start  int64  `json:"start" proto:"2"`
	End    int64  `json:"end" proto:"3"`
	A      int64  `json:"a" proto:"4"`
	B      int64  `json:"b" proto:"5"`
}

func (j windowJoined) String() string {
	b, _ := json.Marshal(j)
	return string(b)
}

// sessionsOf merges [t, t+gap) of every time of one key into sessions
// (touching ones merge): start -> end.
func sessionsOf(ts []int64, gap int64) [][2]int64 {
	slices.Sort(ts)
	var out [][2]int64
	for _, t := range ts {
		if n := len(out); n > 0 && t <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], t+gap)
			continue
		}
		out = append(out, [2]int64{t, t + gap})
	}
	return out
}

func TestWindowJoin(t *testing.T) {
	points, pings := events(6000, pointOpts), events(1500, pingOpts)
	for _, tc := range []struct {
		name string
		w    eddy.Windows
		// windows returns the windows (start, end in ms) of a record at ts
		// of driver d.
		windows func(d string, ts int64) [][2]int64
	}{
		{"tumbling", eddy.Tumbling(time.Second), func(_ string, ts int64) [][2]int64 {
			s := ts - ts%1000
			return [][2]int64{{s, s + 1000}}
		}},
		{"sliding", eddy.Sliding(time.Second, 300*time.Millisecond), func(_ string, ts int64) [][2]int64 {
			var out [][2]int64
			for s := ts - ts%300; s > ts-1000; s -= 300 {
				out = append(out, [2]int64{s, s + 1000})
			}
			return out
		}},
		{"session", eddy.Session(70 * time.Millisecond), func() func(string, int64) [][2]int64 {
			byDriver := map[string][]int64{}
			for _, p := range points {
				byDriver[p.DriverID] = append(byDriver[p.DriverID], msOf(p.Timestamp))
			}
			for _, p := range pings {
				byDriver[p.DriverID] = append(byDriver[p.DriverID], msOf(p.Timestamp))
			}
			sessions := map[string][][2]int64{}
			for d, ts := range byDriver {
				sessions[d] = sessionsOf(ts, 70)
			}
			return func(d string, ts int64) [][2]int64 {
				for _, s := range sessions[d] {
					if ts >= s[0] && ts < s[1] {
						return [][2]int64{s}
					}
				}
				return nil
			}
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for _, a := range points {
				for _, b := range pings {
					if a.DriverID != b.DriverID {
						continue
					}
					for _, wa := range tc.windows(a.DriverID, msOf(a.Timestamp)) {
						for _, wb := range tc.windows(b.DriverID, msOf(b.Timestamp)) {
							if wa == wb {
								want = append(want, windowJoined{a.DriverID, wa[0], wa[1], msOf(a.Timestamp), msOf(b.Timestamp)}.String())
							}
						}
					}
				}
			}
			if len(want) < 100 {
				t.Fatalf("the model finds only %d pairs", len(want))
			}
			base := msOf(time.Unix(0, 0))
			checkJoin(t, want, func(cs *eddy.ConnectedStreams[string, datagen.GPSPoint, datagen.GPSPoint]) *eddy.Stream[joined] {
				out := eddy.WindowJoin(cs, tc.w, func(k string, w eddy.Window, a, b *datagen.GPSPoint) windowJoined {
					return windowJoined{k, w.Start.UnixMilli() + base, w.End.UnixMilli() + base, msOf(a.Timestamp), msOf(b.Timestamp)}
				}, eddy.WindowOp(eddy.UID("wjoin")))
				return eddy.Map(out, func(j *windowJoined) joined { return joined{Driver: j.String()} })
			}, func(l string) string {
				var j joined
				_ = json.Unmarshal([]byte(l), &j)
				return j.Driver
			})
		})
	}
}
