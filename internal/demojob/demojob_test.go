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

// expected computes the demo's output directly from the generator: the
// reference every run, killed or not, must match.
func expected(c Config) []string {
	type acc struct {
		lat, lon, dist float64
		n              int64
	}
	per := map[string]*acc{}
	var lines []string
	opts := []datagen.Option{datagen.Seed(c.Seed), datagen.Drivers(c.Drivers)}
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
		b, _ := json.Marshal(DriverTotal{Driver: p.DriverID, Points: a.n, DistanceM: math.Round(a.dist*1000) / 1000,
			At: p.Timestamp.UTC().Format(time.RFC3339Nano)})
		lines = append(lines, string(b))
	}
	sort.Strings(lines)
	return lines
}

// committed reads every committed output line, sorted.
func committed(t testing.TB, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	var lines []string
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
	}
	sort.Strings(lines)
	return lines
}

func sameLines(t testing.TB, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d committed lines, want %d", len(got), len(want))
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
		c := Config{Seed: 3, Events: 20_000, Drivers: 150, Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out"),
			CheckpointInterval: 20 * time.Millisecond, Parallelism: par}
		env := Env(c, eddy.Logger(testWriter{t}))
		if err := env.Run(context.Background()); err != nil {
			t.Fatalf("parallelism %d: %v", par, err)
		}
		sameLines(t, committed(t, c.Out), expected(c))
		if st := env.Stats(); st.Checkpoints < 1 || st.RecordsIn != c.Events {
			t.Fatalf("stats %+v", st)
		}
		// A finished job run again changes nothing.
		if err := Env(c, eddy.Logger(testWriter{t})).Run(context.Background()); err != nil {
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
