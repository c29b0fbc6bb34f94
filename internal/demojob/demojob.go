package demojob

import (
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/state"
	"github.com/eddyflow/eddy/state/pebble"
)

// Config is the demo's settings.
type Config struct {
	Seed               uint64
	Events             int64
	Drivers            int
	Data               string // checkpoint directory
	Out                string // output directory
	CheckpointInterval time.Duration
	Parallelism        int
	Rate               float64 // events per second, 0 for unlimited
	EmitEvery          int64   // write a driver's totals after every n-th of its points (default 1)
	LateEvery          int64   // every n-th point of a driver (from its 100th) is an hour late; 0: none
	// Changelog turns on the changelog state backend, materializing every
	// Materialize (default 10 s).
	Changelog   bool
	Materialize time.Duration
	// LogFlushBytes is the changelog's dstl.Options.FlushBytes; 0: the
	// default. A small one makes every checkpoint interval's log several
	// batches.
	LogFlushBytes int
	// LogOnePerBatch makes each of the log's batches an object of its
	// own on S3 (dstl.Options.NoParts) instead of streaming a checkpoint
	// interval's batches into one object.
	LogOnePerBatch bool
	// PebbleDir, when set, keeps the keyed state in Pebble databases under
	// this local directory (the Pebble state backend) instead of the heap.
	PebbleDir string
	// PebbleMemory is the Pebble databases' memory (pebble.Memory); 0:
	// the default.
	PebbleMemory int64
}

// WindowSize is the length of the demo's tumbling windows.
const WindowSize = 10 * time.Second

// LateBy is how far in the past the demo's late points are stamped.
const LateBy = time.Hour

// WindowTotal is one window result: a driver's points and distance within
// a 10-second event-time window.
type WindowTotal struct {
	Driver    string  `json:"driver"`
	Start     string  `json:"start"`
	End       string  `json:"end"`
	Points    int64   `json:"points"`
	DistanceM float64 `json:"distance_m"`
}

// windowAcc accumulates a driver's path within one window.
type windowAcc struct {
	Points    int64   `proto:"1"`
	DistanceM float64 `proto:"2,name=distance_m"`
	LastLat   float64 `proto:"3,name=last_lat"`
	LastLon   float64 `proto:"4,name=last_lon"`
}

func addPoint(a windowAcc, p *datagen.GPSPoint) windowAcc {
	if a.Points > 0 {
		a.DistanceM += Haversine(a.LastLat, a.LastLon, p.Lat, p.Lon)
	}
	a.LastLat, a.LastLon = p.Lat, p.Lon
	a.Points++
	return a
}

// WindowResult turns a window's accumulator into its output line.
func WindowResult(driver string, w eddy.Window, a windowAcc) WindowTotal {
	return WindowTotal{Driver: driver, Start: w.Start.Format(time.RFC3339Nano), End: w.End.Format(time.RFC3339Nano),
		Points: a.Points, DistanceM: math.Round(a.DistanceM*1000) / 1000}
}

// LatePoint is one point that arrived after its window was gone.
type LatePoint struct {
	Driver string `json:"driver"`
	At     string `json:"at"`
}

// GPSOptions are the generator options of c.
func (c Config) GPSOptions() []datagen.Option {
	// Each driver reports once per second of event time, ten points per
	// 10-second window.
	opts := []datagen.Option{datagen.Seed(c.Seed), datagen.Events(c.Events), datagen.Drivers(c.Drivers),
		datagen.Spacing(time.Second / time.Duration(max(c.Drivers, 1)))}
	if c.Rate > 0 {
		opts = append(opts, datagen.Rate(c.Rate))
	}
	if c.LateEvery > 0 {
		opts = append(opts, datagen.LateEvery(c.LateEvery, LateBy))
	}
	return opts
}

// DriverTotal is one output line: a driver's totals after one of its points.
type DriverTotal struct {
	Driver    string  `json:"driver"`
	Points    int64   `json:"points"`
	DistanceM float64 `json:"distance_m"`
	At        string  `json:"at"`
}

// lastPoint is the keyed state per driver.
type lastPoint struct {
	Lat       float64 `proto:"1"`
	Lon       float64 `proto:"2"`
	Points    int64   `proto:"3"`
	DistanceM float64 `proto:"4,name=distance_m"`
}

// distanceFn keeps each driver's running totals.
type distanceFn struct {
	emitEvery int64
	last      *state.Value[lastPoint]
}

func (f *distanceFn) Open(ctx *eddy.OpenContext) error {
	var err error
	f.last, err = state.NewValue[lastPoint](ctx.State, "last-point")
	return err
}

func (f *distanceFn) Process(ctx *eddy.Context[string, DriverTotal], p *datagen.GPSPoint) error {
	lp, seen := f.last.Get()
	if seen {
		lp.DistanceM += Haversine(lp.Lat, lp.Lon, p.Lat, p.Lon)
	}
	lp.Lat, lp.Lon = p.Lat, p.Lon
	lp.Points++
	f.last.Update(lp)
	if f.emitEvery > 1 && lp.Points%f.emitEvery != 0 {
		return nil
	}
	ctx.Emit(DriverTotal{Driver: p.DriverID, Points: lp.Points, DistanceM: math.Round(lp.DistanceM*1000) / 1000,
		At: p.Timestamp.UTC().Format(time.RFC3339Nano)})
	return nil
}

// Haversine is the great-circle distance in meters.
func Haversine(lat1, lon1, lat2, lon2 float64) float64 {
	const r = 6_371_000.0
	p1, p2 := lat1*math.Pi/180, lat2*math.Pi/180
	dp, dl := (lat2-lat1)*math.Pi/180, (lon2-lon1)*math.Pi/180
	a := math.Sin(dp/2)*math.Sin(dp/2) + math.Cos(p1)*math.Cos(p2)*math.Sin(dl/2)*math.Sin(dl/2)
	return 2 * r * math.Asin(math.Sqrt(a))
}

// Build adds the demo job to env: running totals per driver under c.Out,
// per-driver 10-second tumbling windows under c.Out/windows, and the points
// that came too late for their window under c.Out/late.
func Build(env *eddy.Env, c Config) {
	points := eddy.FromSource(env, datagen.GPS(c.GPSOptions()...), eddy.Named("gps"),
		eddy.Watermarks(func(p *datagen.GPSPoint) time.Time { return p.Timestamp }, 100*time.Millisecond,
			// Aligned sources keep the late/not-late decision for points an
			// hour late identical in every run, killed or not.
			eddy.AlignWatermarks(10*time.Second)))
	byDriver := eddy.KeyBy(points, func(p *datagen.GPSPoint) string { return p.DriverID })
	totals := eddy.Process[string, datagen.GPSPoint, DriverTotal](byDriver, &distanceFn{emitEvery: c.EmitEvery}, eddy.Named("distance"))
	eddy.ToSink(totals, file.JSONLines[DriverTotal](c.Out))

	windows := eddy.AggregateWindows(byDriver, eddy.Tumbling(WindowSize), eddy.Aggregator[string, datagen.GPSPoint, windowAcc, WindowTotal]{
		Add:    addPoint,
		Result: WindowResult,
	}, eddy.WindowOp(eddy.Named("windows")))
	eddy.ToSink(windows.Results, file.JSONLines[WindowTotal](filepath.Join(c.Out, "windows")))
	late := eddy.Map(windows.Late, func(p *datagen.GPSPoint) LatePoint {
		return LatePoint{Driver: p.DriverID, At: p.Timestamp.UTC().Format(time.RFC3339Nano)}
	})
	eddy.ToSink(late, file.JSONLines[LatePoint](filepath.Join(c.Out, "late")))
}

// Env returns an environment configured for c, with the demo job built.
func Env(c Config, opts ...eddy.Option) *eddy.Env {
	// What the output depends on: a resume with another seed or event
	// count would mix two jobs' output, so it is refused.
	base := []eddy.Option{eddy.JobName("eddy-demo"), eddy.JobParameters(
		"seed", fmt.Sprint(c.Seed), "events", fmt.Sprint(c.Events), "drivers", fmt.Sprint(c.Drivers),
		"emit-every", fmt.Sprint(c.EmitEvery), "late-every", fmt.Sprint(c.LateEvery))}
	if c.Data != "" {
		base = append(base, eddy.Checkpoints(c.Data, c.CheckpointInterval))
	}
	if c.Parallelism > 0 {
		base = append(base, eddy.Parallelism(c.Parallelism))
	}
	if c.Changelog {
		every := c.Materialize
		if every <= 0 {
			every = 10 * time.Second
		}
		var co []eddy.ChangelogOption
		if c.LogFlushBytes > 0 {
			co = append(co, eddy.LogOptions(dstl.Options{FlushBytes: c.LogFlushBytes, NoParts: c.LogOnePerBatch}))
		}
		base = append(base, eddy.Changelog(every, co...))
	}
	if c.PebbleDir != "" {
		var po []pebble.PoolOption
		if c.PebbleMemory > 0 {
			po = append(po, pebble.Memory(c.PebbleMemory))
		}
		base = append(base, eddy.StateBackend(eddy.Pebble(c.PebbleDir, po...)))
	}
	env := eddy.New(append(base, opts...)...)
	Build(env, c)
	return env
}
