// Package demojob is the ride-sharing job that `eddy demo` runs: generated
// GPS points, keyed by driver, a running distance and point count per driver
// in keyed state, written exactly once as JSON lines. Tests run the same job
// in process and as a subprocess that they kill.
package demojob

import (
	"math"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/state"
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

// Build adds the demo job to env.
func Build(env *eddy.Env, c Config) {
	opts := []datagen.Option{datagen.Seed(c.Seed), datagen.Events(c.Events), datagen.Drivers(c.Drivers)}
	if c.Rate > 0 {
		opts = append(opts, datagen.Rate(c.Rate))
	}
	points := eddy.FromSource(env, datagen.GPS(opts...), eddy.Named("gps"))
	byDriver := eddy.KeyBy(points, func(p *datagen.GPSPoint) string { return p.DriverID })
	totals := eddy.Process[string, datagen.GPSPoint, DriverTotal](byDriver, &distanceFn{emitEvery: c.EmitEvery}, eddy.Named("distance"))
	eddy.ToSink(totals, file.JSONLines[DriverTotal](c.Out))
}

// Env returns an environment configured for c, with the demo job built.
func Env(c Config, opts ...eddy.Option) *eddy.Env {
	base := []eddy.Option{eddy.JobName("eddy-demo")}
	if c.Data != "" {
		base = append(base, eddy.Checkpoints(c.Data, c.CheckpointInterval))
	}
	if c.Parallelism > 0 {
		base = append(base, eddy.Parallelism(c.Parallelism))
	}
	env := eddy.New(append(base, opts...)...)
	Build(env, c)
	return env
}
