package eddy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/state"
)

// Total is one output record: a driver's point count so far.
type Total struct {
	Driver string `json:"driver"`
	Points int64  `json:"points"`
}

// CountFn counts points per driver in keyed state.
type CountFn struct {
	count *state.Value[int64]
}

// Open declares the keyed state.
func (f *CountFn) Open(ctx *eddy.OpenContext) error {
	var err error
	f.count, err = state.NewValue[int64](ctx.State, "count")
	return err
}

// Process runs once per point, with state scoped to the point's driver.
func (f *CountFn) Process(ctx *eddy.Context[string, Total], p *datagen.GPSPoint) error {
	n, _ := f.count.Get()
	n++
	f.count.Update(n)
	if n%100 == 0 {
		ctx.Emit(Total{Driver: ctx.Key, Points: n})
	}
	return nil
}

func Example() {
	dir, _ := os.MkdirTemp("", "eddy-example")
	defer os.RemoveAll(dir)

	env := eddy.New(eddy.Checkpoints(filepath.Join(dir, "eddy-data"), 100*time.Millisecond))
	points := eddy.FromSource(env, datagen.GPS(datagen.Seed(7), datagen.Events(100_000), datagen.Drivers(100)))
	byDriver := eddy.KeyBy(points, func(p *datagen.GPSPoint) string { return p.DriverID })
	totals := eddy.Process[string, datagen.GPSPoint, Total](byDriver, &CountFn{})
	eddy.ToSink(totals, file.JSONLines[Total](filepath.Join(dir, "out")))
	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("records committed:", env.Stats().RecordsOut)
	// Output: records committed: 1000
}
