package eddy_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
)

// TestProcessingTimeWindows counts records without event time in
// processing-time tumbling windows: every record is counted once, in a
// window of the right length, and the windows are the wall clock's.
func TestProcessingTimeWindows(t *testing.T) {
	const n = 20_000
	dir := t.TempDir()
	began := time.Now()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}), eddy.Checkpoints("file://"+t.TempDir(), 20*time.Millisecond))
	pts := eddy.FromSource(env, datagen.GPS(datagen.Seed(7), datagen.Events(n), datagen.Drivers(4), datagen.Rate(50_000)))
	keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
	w := eddy.Tumbling(50 * time.Millisecond).InProcessingTime()
	counts := eddy.AggregateWindows(keyed, w, eddy.Aggregator[string, datagen.GPSPoint, int64, winOut]{
		Add: func(n int64, _ *datagen.GPSPoint) int64 { return n + 1 },
		Result: func(k string, w eddy.Window, n int64) winOut {
			return winOut{Key: k, Start: w.Start.UnixNano(), End: w.End.UnixNano(), Count: n}
		},
	})
	eddy.ToSink(counts.Results, file.JSONLines[winOut](dir))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	total, windows := int64(0), 0
	for _, l := range readLines(t, dir) {
		var o winOut
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatal(err)
		}
		if o.End-o.Start != int64(50*time.Millisecond) || o.Start%int64(50*time.Millisecond) != 0 {
			t.Fatalf("window %+v is not an aligned 50 ms window", o)
		}
		if o.End < began.UnixNano() || o.Start > ended.UnixNano() {
			t.Fatalf("window %+v is outside the run's wall-clock time [%v, %v]", o, began, ended)
		}
		total += o.Count
		windows++
	}
	if total != n {
		t.Fatalf("windows counted %d records, want %d", total, n)
	}
	if windows < 4 {
		t.Fatalf("%d windows for a run paced over 400 ms", windows)
	}
}
