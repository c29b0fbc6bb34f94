package demojob

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
)

// expected computes the demo's committed output directly from the
// generator: the reference every run, killed or not, must match. Lines are
// prefixed with the output they belong to (totals, windows, late).
func expected(c Config) []string {
	type acc struct {
		lat, lon, dist float64
		n              int64
	}
	per := map[string]*acc{}
	type wkey struct {
		driver string
		start  int64
	}
	wins := map[wkey]*windowAcc{}
	var lines []string
	opts := c.GPSOptions()
	emitEvery := max(c.EmitEvery, 1)
	for i := int64(0); i < c.Events; i++ {
		p := datagen.GPSEvent(i, opts...)
		a := per[p.DriverID]
		if a == nil {
			a = &acc{}
			per[p.DriverID] = a
		} else {
			a.dist += Haversine(a.lat, a.lon, p.Lat, p.Lon)
		}
		a.lat, a.lon = p.Lat, p.Lon
		a.n++
		if a.n%emitEvery == 0 {
			b, _ := json.Marshal(DriverTotal{Driver: p.DriverID, Points: a.n, DistanceM: math.Round(a.dist*1000) / 1000,
				At: p.Timestamp.UTC().Format(time.RFC3339Nano)})
			lines = append(lines, "totals "+string(b))
		}
		// Late points are exactly the shifted ones: in-order points never
		// fall behind the watermark, shifted ones are an hour behind it.
		if c.LateEvery > 0 && (i/int64(c.Drivers)) >= 100 && (i/int64(c.Drivers))%c.LateEvery == 0 {
			b, _ := json.Marshal(LatePoint{Driver: p.DriverID, At: p.Timestamp.UTC().Format(time.RFC3339Nano)})
			lines = append(lines, "late "+string(b))
			continue
		}
		ts := p.Timestamp.UnixNano()
		k := wkey{p.DriverID, ts - ts%int64(WindowSize)}
		w := wins[k]
		if w == nil {
			w = &windowAcc{}
			wins[k] = w
		}
		*w = addPoint(*w, &p)
	}
	for k, w := range wins {
		win := eddy.Window{Start: time.Unix(0, k.start).UTC(), End: time.Unix(0, k.start+int64(WindowSize)).UTC()}
		b, _ := json.Marshal(WindowResult(k.driver, win, *w))
		lines = append(lines, "windows "+string(b))
	}
	sort.Strings(lines)
	return lines
}

// committed reads every committed output line of the demo under dir, with
// the same prefixes as expected.
func committed(t testing.TB, dir string) []string {
	t.Helper()
	var lines []string
	for _, part := range []struct{ prefix, dir string }{{"totals ", dir}, {"windows ", filepath.Join(dir, "windows")}, {"late ", filepath.Join(dir, "late")}} {
		for _, l := range committedLines(t, part.dir) {
			lines = append(lines, part.prefix+l)
		}
	}
	sort.Strings(lines)
	return lines
}

// committedLines returns the lines of the committed files (*.jsonl) of a
// file sink's directory, in file order.
func committedLines(t testing.TB, dir string) []string {
	t.Helper()
	lines := []string{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	return lines
}

func sameLines(t testing.TB, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		// Say which lines are extra and which are missing.
		count := map[string]int{}
		for _, l := range want {
			count[l]++
		}
		for _, l := range got {
			count[l]--
		}
		var extra, missing []string
		for l, n := range count {
			for ; n < 0; n++ {
				extra = append(extra, l)
			}
			for ; n > 0; n-- {
				missing = append(missing, l)
			}
		}
		sort.Strings(extra)
		sort.Strings(missing)
		t.Fatalf("%d committed lines, want %d: %d extra (first %v), %d missing (first %v)", len(got), len(want),
			len(extra), head3(extra), len(missing), head3(missing))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("line %d differs:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

func TestDemoMatchesReference(t *testing.T) {
	for _, par := range []int{1, 2, 3} {
		dir := t.TempDir()
		c := Config{Seed: 3, Events: 40_000, Drivers: 150, Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out"),
			CheckpointInterval: 20 * time.Millisecond, Parallelism: par, LateEvery: 37, EmitEvery: 3}
		env := Env(c, eddy.LogOutput(testWriter{t}))
		if err := env.Run(context.Background()); err != nil {
			t.Fatalf("parallelism %d: %v", par, err)
		}
		sameLines(t, committed(t, c.Out), expected(c))
		if st := env.Stats(); st.Checkpoints < 1 || st.RecordsIn != c.Events || st.LateRecords == 0 {
			t.Fatalf("stats %+v", st)
		}
		// A finished job run again changes nothing.
		if err := Env(c, eddy.LogOutput(testWriter{t})).Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		sameLines(t, committed(t, c.Out), expected(c))
		pending, _ := filepath.Glob(filepath.Join(c.Out, ".*"))
		if len(pending) != 0 {
			t.Fatalf("pending files left: %v", pending)
		}
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// onlyTotals keeps the running-totals lines, for jobs that write only those.
func onlyTotals(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "totals ") {
			out = append(out, l)
		}
	}
	return out
}

func head3(xs []string) []string {
	if len(xs) > 3 {
		return xs[:3]
	}
	return xs
}
