//go:build unix

package eddy_test

import (
	"context"
	"fmt"
	"github.com/eddyflow/eddy/internal/cputime"
	"runtime"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/discard"
	"github.com/eddyflow/eddy/state"
)

// slideCountFn counts points per key in a Value[int64] and emits nothing.
type slideCountFn struct{ n *state.Value[int64] }

func (c *slideCountFn) Open(ctx *eddy.OpenContext) error {
	var err error
	c.n, err = state.NewValue[int64](ctx.State, "count")
	return err
}

func (c *slideCountFn) Process(ctx *eddy.Context[string, int64], p *datagen.GPSPoint) error {
	v, _ := c.n.Get()
	c.n.Update(v + 1)
	return nil
}

type slideOut struct {
	Driver string `proto:"1"`
	Points int64  `proto:"2"`
}

// BenchmarkSlidingWindows compares, in one run, sliding windows (1 minute,
// 10 second slide, so each point is in 6 windows) with the keyed count over
// the same GPS points from 10 000 drivers. Each driver reports every second
// of event time. Run with:
//
//	go test -run '^$' -bench SlidingWindows -benchtime 1x -count 3 .
func BenchmarkSlidingWindows(b *testing.B) {
	const events = 2_000_000
	const drivers = 10_000
	gps := func() eddy.Source[datagen.GPSPoint] {
		return datagen.GPS(datagen.Seed(1), datagen.Events(events), datagen.Drivers(drivers), datagen.Spacing(time.Second/drivers))
	}
	run := func(b *testing.B, build func(env *eddy.Env)) { runJobBench(b, 2, events, build) }
	b.Run("keyed-count", func(b *testing.B) {
		run(b, func(env *eddy.Env) {
			pts := eddy.FromSource(env, gps())
			keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
			eddy.ToSink(eddy.Process[string, datagen.GPSPoint, int64](keyed, &slideCountFn{}), discard.Sink[int64]())
		})
	})
	b.Run("map-reduce", func(b *testing.B) {
		// Every record goes through Map and comes out of Reduce: the
		// per-record path of operators that emit.
		run(b, func(env *eddy.Env) {
			pts := eddy.FromSource(env, gps())
			ones := eddy.Map(pts, func(p *datagen.GPSPoint) slideOut { return slideOut{Driver: p.DriverID, Points: 1} })
			keyed := eddy.KeyBy(ones, func(s *slideOut) string { return s.Driver })
			sums := eddy.Reduce(keyed, func(a, x slideOut) slideOut { a.Points += x.Points; return a })
			eddy.ToSink(sums, discard.Sink[slideOut]())
		})
	})
	b.Run("sliding-1m-10s", func(b *testing.B) {
		run(b, func(env *eddy.Env) {
			pts := eddy.FromSource(env, gps(), eddy.Watermarks(func(p *datagen.GPSPoint) time.Time { return p.Timestamp }, time.Second))
			keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
			w := eddy.AggregateWindows(keyed, eddy.Sliding(time.Minute, 10*time.Second), eddy.Aggregator[string, datagen.GPSPoint, int64, slideOut]{
				Add:    func(n int64, _ *datagen.GPSPoint) int64 { return n + 1 },
				Result: func(k string, _ eddy.Window, n int64) slideOut { return slideOut{Driver: k, Points: n} },
			})
			eddy.ToSink(w.Results, discard.Sink[slideOut]())
		})
	})
}

// BenchmarkEventTimeParallelism runs the event-time sliding-window job of
// BenchmarkSlidingWindows (watermarks on, 1 minute windows sliding by 10 s,
// every driver reporting once a second of event time) at parallelism 2, 4
// and 8 on whatever cores the machine has: oversubscribing them must not
// collapse throughput or make the hot path allocate. With 1000 drivers each
// key sees 2000 events (the demo's shape); with 10 000, 200, so what a new
// key costs once (its window map, timer list, interned key, and the
// generator's driver) shows in allocs/event. The source subtasks are kept
// within eddy.DefaultAlignment (30 s here) of each other in event time;
// "-aligned" bounds the drift to 10 s, as the demo does, and "-unaligned"
// turns alignment off (AlignWatermarks(0)): then the subtasks drift apart
// (more of them than cores), so each key holds more open windows and its
// state grows. Each parallelism in its own process:
//
//	go test -c -o w.test .
//	for i in 1 2 3; do for keys in keys=1k keys=1k-aligned keys=1k-unaligned keys=10k; do for p in 2 4 8; do
//	  ./w.test -test.run '^$' -test.bench "EventTimeParallelism/$keys\$/par=$p\$" -test.benchtime 1x
//	done; done; done
func BenchmarkEventTimeParallelism(b *testing.B) {
	const events = 2_000_000
	for _, cfg := range []struct {
		name    string
		drivers int
		align   []eddy.WatermarkOption // none: the default alignment
		merge   func(a, b int64) int64 // with a Merge the windows keep panes
	}{
		{"keys=1k", 1000, nil, nil},
		{"keys=1k-aligned", 1000, []eddy.WatermarkOption{eddy.AlignWatermarks(10 * time.Second)}, nil},
		{"keys=1k-unaligned", 1000, []eddy.WatermarkOption{eddy.AlignWatermarks(0)}, nil},
		{"keys=10k", 10_000, nil, nil},
		{"keys=1k-panes", 1000, nil, func(a, b int64) int64 { return a + b }},
	} {
		drivers, wmOpts, merge := cfg.drivers, cfg.align, cfg.merge
		for _, par := range []int{2, 4, 8} {
			b.Run(fmt.Sprintf("%s/par=%d", cfg.name, par), func(b *testing.B) {
				runJobBench(b, par, events, func(env *eddy.Env) {
					src := datagen.GPS(datagen.Seed(1), datagen.Events(events), datagen.Drivers(drivers), datagen.Spacing(time.Second/time.Duration(drivers)))
					pts := eddy.FromSource(env, src, eddy.Watermarks(func(p *datagen.GPSPoint) time.Time { return p.Timestamp }, time.Second, wmOpts...))
					keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
					w := eddy.AggregateWindows(keyed, eddy.Sliding(time.Minute, 10*time.Second), eddy.Aggregator[string, datagen.GPSPoint, int64, slideOut]{
						Add:    func(n int64, _ *datagen.GPSPoint) int64 { return n + 1 },
						Merge:  merge,
						Result: func(k string, _ eddy.Window, n int64) slideOut { return slideOut{Driver: k, Points: n} },
					})
					eddy.ToSink(w.Results, discard.Sink[slideOut]())
				})
			})
		}
	}
}

// runJobBench runs, per benchmark iteration, the job build makes at
// parallelism par with checkpoints every second, and reports events/s,
// allocs/event and cpu-ns/event (the process's CPU time per event: the
// cost of the work, whatever share of the shared machine the run got).
func runJobBench(b *testing.B, par int, events int64, build func(env *eddy.Env)) {
	for b.Loop() {
		env := eddy.New(eddy.Parallelism(par), eddy.Checkpoints(b.TempDir(), time.Second), eddy.LogOutput(&logBuf{}))
		build(env)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start, cpu := time.Now(), cputime.Process()
		if err := env.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
		el, cpu := time.Since(start), cputime.Process()-cpu
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(events)/el.Seconds(), "events/s")
		b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(events), "allocs/event")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(events), "cpu-ns/event")
	}
}
