package nexmarkq

import (
	"context"
	"fmt"
	"github.com/eddyflow/eddy/internal/cputime"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/connector/nexmark"
)

// runLoop runs a query's hand loop over src's events read with one reader
// and returns the number of result rows. src must have one split: the
// loops rely on reading every event, in time order.
func runLoop(tb testing.TB, name string, src *nexmark.Source) int64 {
	if n := src.Splits(); n != 1 {
		tb.Fatalf("%s: the loop reads one split, the source has %d", name, n)
	}
	var rows int64
	step, end := loops(&rows)[name]()
	r, err := src.OpenSplit(context.Background(), 0, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	var e nexmark.Event
	for {
		st, err := r.Next(&e)
		if err != nil {
			tb.Fatal(err)
		}
		if st == connector.End {
			break
		}
		if st == connector.Record {
			step(&e)
		}
	}
	end()
	return rows
}

// TestLoopsMatchModels: the hand loops the benchmarks compare with give as
// many result rows as the models (the row count of the result table; for
// q4 and q6, one per closed auction).
func TestLoopsMatchModels(t *testing.T) {
	src := testSource(t, nexmark.Splits(1))
	ps, as, bs := eventsOf(src)
	for name, model := range models {
		want := int64(len(model(ps, as, bs)))
		if name == "q4" || name == "q6" {
			want = int64(len(winnersOf(as, bs)))
		}
		if got := runLoop(t, name, src); got != want {
			t.Errorf("%s: the loop gives %d rows, the model %d", name, got, want)
		}
	}
}

// BenchmarkQueries compares, per query, the Eddy job at parallelism 1 and
// 2 (checkpoints every second, results discarded; eddy-p2-nockpt without
// checkpoints, for their cost) with the hand loop, on NEXMARK_EVENTS events
// (default 200,000) at 10,000 events/s of event time. ns/op is per event;
// cpu-ns/event counts the whole process's CPU.
func BenchmarkQueries(b *testing.B) {
	n := int64(200_000)
	if s := os.Getenv("NEXMARK_EVENTS"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	for _, q := range All {
		b.Run(q.Name+"/loop", func(b *testing.B) {
			src, err := nexmark.New(nexmark.Events(n), nexmark.Rate(10_000), nexmark.Splits(1))
			if err != nil {
				b.Fatal(err)
			}
			measure(b, n, func() { runLoop(b, q.Name, src) })
		})
		for _, v := range []struct {
			p    int
			ckpt bool
		}{{1, true}, {2, true}, {2, false}} {
			name := fmt.Sprintf("%s/eddy-p%d", q.Name, v.p)
			if !v.ckpt {
				name += "-nockpt"
			}
			b.Run(name, func(b *testing.B) {
				src, err := nexmark.New(nexmark.Events(n), nexmark.Rate(10_000), nexmark.Splits(v.p))
				if err != nil {
					b.Fatal(err)
				}
				measure(b, n, func() {
					opts := []eddy.Option{eddy.Parallelism(v.p), eddy.LogOutput(&logBuf{})}
					if v.ckpt {
						opts = append(opts, eddy.Checkpoints("file://"+b.TempDir(), time.Second))
					}
					env := eddy.New(opts...)
					q.Build(env, src, "")
					if err := env.Run(context.Background()); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}

// measure runs fn b.N times and reports per-event time and CPU.
func measure(b *testing.B, events int64, fn func()) {
	b.ResetTimer()
	cpu := cputime.Process()
	for range b.N {
		fn()
	}
	cpu = cputime.Process() - cpu
	b.StopTimer()
	total := float64(events) * float64(b.N)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/event")
	b.ReportMetric(float64(cpu.Nanoseconds())/total, "cpu-ns/event")
	b.ReportMetric(0, "ns/op")
}
