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

// TestGlobalWindows counts all records per tumbling window across keys:
// one result per window, holding every record of its time span.
func TestGlobalWindows(t *testing.T) {
	const n = 6000
	opts := []datagen.Option{datagen.Seed(8), datagen.Events(n), datagen.Drivers(13), datagen.Spacing(10 * time.Millisecond)}
	want := map[int64]int64{}
	for i := range int64(n) {
		ts := datagen.GPSEvent(i, opts...).Timestamp.UnixNano()
		want[ts-ts%int64(time.Second)]++
	}
	dir := t.TempDir()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}))
	pts := eddy.FromSource(env, datagen.GPS(opts...), eddy.Watermarks(func(p *datagen.GPSPoint) time.Time { return p.Timestamp }, 0))
	counts := eddy.AggregateWindows(eddy.Global(pts), eddy.Tumbling(time.Second), eddy.Aggregator[eddy.GlobalKey, datagen.GPSPoint, int64, winOut]{
		Add: func(c int64, _ *datagen.GPSPoint) int64 { return c + 1 },
		Result: func(_ eddy.GlobalKey, w eddy.Window, c int64) winOut {
			return winOut{Key: "all", Start: w.Start.UnixNano(), End: w.End.UnixNano(), Count: c}
		},
	})
	eddy.ToSink(counts.Results, file.JSONLines[winOut](dir))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, dir)
	if len(lines) != len(want) {
		t.Fatalf("%d results, want one per window (%d)", len(lines), len(want))
	}
	for _, l := range lines {
		var o winOut
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatal(err)
		}
		if want[o.Start] != o.Count {
			t.Fatalf("window at %d counted %d, want %d", o.Start, o.Count, want[o.Start])
		}
	}
}
