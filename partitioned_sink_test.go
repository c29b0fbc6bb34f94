package eddy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
)

// runPartitioned sums points per driver and writes every running sum to a
// partition per driver; cancelAt > 0 cancels after that checkpoint.
func runPartitioned(t *testing.T, data, out string, cancelAt uint64) error {
	ctx, cancel, cancelOpt := cancelAfterCheckpoint(cancelAt)
	defer cancel()
	env := eddy.New(eddy.Parallelism(2), eddy.Checkpoints(data, 10*time.Millisecond), eddy.LogOutput(&logBuf{}), eddy.Restarts(0, 0), cancelOpt)
	pts := eddy.FromSource(env, datagen.GPS(datagen.Seed(6), datagen.Events(40_000), datagen.Drivers(8), datagen.Rate(200_000)))
	ones := eddy.Map(pts, func(p *datagen.GPSPoint) sumOut { return sumOut{Driver: p.DriverID, Sum: 1} })
	sums := eddy.Reduce(eddy.KeyBy(ones, func(s *sumOut) string { return s.Driver }), func(a, b sumOut) sumOut {
		return sumOut{Driver: a.Driver, Sum: a.Sum + b.Sum}
	}, eddy.UID("sums"))
	eddy.ToSink(sums, file.PartitionedJSONLines[sumOut](out, func(s *sumOut) string { return "driver=" + s.Driver + "/hundreds=" + string(rune('0'+s.Sum/1000)) }))
	return env.Run(ctx)
}

// partitionLines reads every committed line under dir, prefixed with its
// partition.
func partitionLines(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".jsonl" {
			return err
		}
		rel, _ := filepath.Rel(dir, filepath.Dir(path))
		for _, l := range readLines(t, filepath.Dir(path)) {
			out = append(out, rel+" "+l)
		}
		return filepath.SkipDir
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func TestPartitionedSinkExactlyOnce(t *testing.T) {
	whole := t.TempDir()
	if err := runPartitioned(t, "file://"+t.TempDir(), whole, 0); err != nil {
		t.Fatal(err)
	}
	want := partitionLines(t, whole)
	if len(want) != 40_000 {
		t.Fatalf("%d lines, want one per point", len(want))
	}
	data, out := "file://"+t.TempDir(), t.TempDir()
	if err := runPartitioned(t, data, out, 3); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	if err := runPartitioned(t, data, out, 0); err != nil {
		t.Fatal(err)
	}
	got := partitionLines(t, out)
	if !slices.Equal(got, want) {
		t.Fatalf("resumed: %d lines, want %d", len(got), len(want))
	}
}
