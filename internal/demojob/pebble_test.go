package demojob

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/checkpoint"
)

// TestPebbleDemoMatchesReference runs the demo on the Pebble state
// backend uninterrupted: its output is the reference's.
func TestPebbleDemoMatchesReference(t *testing.T) {
	dir := t.TempDir()
	c := Config{Seed: 3, Events: 20_000, Drivers: 150, Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out"),
		CheckpointInterval: 20 * time.Millisecond, Parallelism: 2, LateEvery: 37, EmitEvery: 3, PebbleDir: filepath.Join(dir, "pebble")}
	env := Env(c, eddy.LogOutput(testWriter{t}))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameLines(t, committed(t, c.Out), expected(c))
	if st := env.Stats(); st.Checkpoints < 1 {
		t.Fatalf("stats %+v", st)
	}
	// The Run's directory is gone once it returns.
	if ents, _ := os.ReadDir(c.PebbleDir); len(ents) != 0 {
		t.Fatalf("%s holds %d entries after the run", c.PebbleDir, len(ents))
	}
}

// TestPebbleDemoResumeRescale cancels the demo on Pebble after a few
// checkpoints again and again, at parallelism 2, 3, 1 and 2 in turn, and
// resumes it each time from its last checkpoint: the committed output is
// the reference's, and every checkpoint kept lists Pebble files only.
func TestPebbleDemoResumeRescale(t *testing.T) {
	dir := t.TempDir()
	c := Config{Seed: 5, Events: 30_000, Drivers: 120, Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out"),
		CheckpointInterval: 10 * time.Millisecond, Rate: 25_000, LateEvery: 41, EmitEvery: 2, PebbleDir: filepath.Join(dir, "pebble")}
	pars := []int{2, 3, 1, 2}
	for round := 0; ; round++ {
		c.Parallelism = pars[round%len(pars)]
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		env := Env(c, eddy.LogOutput(testWriter{t}), eddy.OnCheckpoint(func(eddy.CheckpointStats) {
			if n++; n == 3 {
				cancel()
			}
		}))
		err := env.Run(ctx)
		cancel()
		if err == nil {
			t.Logf("finished in round %d", round)
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d (parallelism %d): %v", round, c.Parallelism, err)
		}
		if round > 40 {
			t.Fatal("the job does not finish")
		}
	}
	sameLines(t, committed(t, c.Out), expected(c))
	store, err := file.New(c.Data)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := checkpoint.NewStorage(store, 3).Latest(context.Background())
	if err != nil || m == nil {
		t.Fatalf("latest checkpoint: %v %v", m, err)
	}
	for _, op := range m.Operators {
		for _, p := range op.Parts {
			if p.Pebble == nil || len(p.Pebble.Files) == 0 || !strings.Contains(p.Blob, ".state") {
				t.Fatalf("operator %s part %+v: not a Pebble part", op.Name, p)
			}
		}
	}
}
