package eddy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
)

type driverAgg struct {
	Driver string  `json:"driver" proto:"1"`
	Points int64   `json:"points" proto:"2"`
	Max    float32 `json:"max" proto:"3"`
}

type totals struct {
	Drivers int64 `json:"drivers" proto:"1"`
	Points  int64 `json:"points" proto:"2"`
}

// fold applies changes to a table keyed by key, checking that each
// retraction takes out the row the table holds and that an insert adds a
// new key.
func fold[T comparable](t *testing.T, lines []string, key func(T) string) map[string]T {
	t.Helper()
	table := map[string]T{}
	pendingBefore := false
	for i, l := range lines {
		var c eddy.Change[T]
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("line %d %s: %v", i, l, err)
		}
		k := key(c.Row)
		cur, ok := table[k]
		switch c.Kind {
		case eddy.Insert:
			if ok {
				t.Fatalf("line %d %s: insert of a key the table holds (%v)", i, l, cur)
			}
			table[k] = c.Row
		case eddy.UpdateBefore, eddy.Delete:
			if !ok || cur != c.Row {
				t.Fatalf("line %d %s: retracts a row the table does not hold (holds %v, %v)", i, l, cur, ok)
			}
			delete(table, k)
			pendingBefore = c.Kind == eddy.UpdateBefore
			continue
		case eddy.UpdateAfter:
			if !pendingBefore || ok {
				t.Fatalf("line %d %s: +U without its -U", i, l)
			}
			table[k] = c.Row
		}
		pendingBefore = false
	}
	return table
}

func TestGroupAggregateUpdatesAndRetracts(t *testing.T) {
	const n = 5000
	opts := []datagen.Option{datagen.Seed(9), datagen.Events(n), datagen.Drivers(10)}
	want := map[string]driverAgg{}
	for i := range int64(n) {
		p := datagen.GPSEvent(i, opts...)
		a := want[p.DriverID]
		a.Driver, a.Points, a.Max = p.DriverID, a.Points+1, max(a.Max, p.SpeedKmh)
		want[p.DriverID] = a
	}
	perDriver, all := t.TempDir(), t.TempDir()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}))
	pts := eddy.FromSource(env, datagen.GPS(opts...))
	type acc struct {
		N   int64   `proto:"1"`
		Max float32 `proto:"2"`
	}
	drivers := eddy.GroupAggregate(eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID }), eddy.GroupAggregator[string, datagen.GPSPoint, acc, driverAgg]{
		Add:    func(a acc, p *datagen.GPSPoint) acc { return acc{a.N + 1, max(a.Max, p.SpeedKmh)} },
		Result: func(k string, a acc) driverAgg { return driverAgg{k, a.N, a.Max} },
	})
	eddy.ToSink(drivers, file.JSONLines[eddy.Change[driverAgg]](perDriver))
	// Over the per-driver changes: how many drivers, how many points. Every
	// -U takes the old row's points back out.
	sum := eddy.GroupAggregateChanges(eddy.Global(drivers), eddy.GroupAggregator[eddy.GlobalKey, driverAgg, totals, totals]{
		Add:     func(s totals, d *driverAgg) totals { return totals{s.Drivers + 1, s.Points + d.Points} },
		Retract: func(s totals, d *driverAgg) totals { return totals{s.Drivers - 1, s.Points - d.Points} },
		Result:  func(_ eddy.GlobalKey, s totals) totals { return s },
	})
	eddy.ToSink(sum, file.JSONLines[eddy.Change[totals]](all))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Lines of one key are in order within one file (one writer per key).
	table := fold(t, sortedByWriter(t, perDriver), func(d driverAgg) string { return d.Driver })
	if fmt.Sprint(table) != fmt.Sprint(want) {
		t.Fatalf("folded per-driver table\n%v\nwant\n%v", table, want)
	}
	got := fold(t, sortedByWriter(t, all), func(totals) string { return "" })
	if got[""] != (totals{10, n}) {
		t.Fatalf("folded totals %v, want 10 drivers and %d points", got, n)
	}
}

func TestChangeJSON(t *testing.T) {
	b, err := json.Marshal(eddy.Change[totals]{Kind: eddy.UpdateAfter, Row: totals{3, 4}})
	if err != nil || string(b) != `{"op":"+U","drivers":3,"points":4}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var c eddy.Change[totals]
	if err := json.Unmarshal(b, &c); err != nil || c.Kind != eddy.UpdateAfter || c.Row != (totals{3, 4}) {
		t.Fatalf("Unmarshal = %+v, %v", c, err)
	}
	b, _ = json.Marshal(eddy.Change[int]{Kind: eddy.Delete, Row: 7})
	var ci eddy.Change[int]
	if string(b) != `{"op":"-D","row":7}` || json.Unmarshal(b, &ci) != nil || ci.Row != 7 || ci.Kind != eddy.Delete {
		t.Fatalf("a non-object row: %s -> %+v", b, ci)
	}
	if err := json.Unmarshal([]byte(`{"op":"+X"}`), &c); err == nil {
		t.Fatal("an unknown op decoded")
	}
}

// sortedByWriter reads a file sink's committed lines in the order each
// writer wrote them: files sort by writer, then checkpoint.
func sortedByWriter(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}
