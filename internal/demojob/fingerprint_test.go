package demojob

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
)

// TestChangedSeedRefused: a run stopped at a checkpoint and resumed with
// another seed is refused, naming the changed parameter, and commits
// nothing; AllowChangedJob resumes anyway.
func TestChangedSeedRefused(t *testing.T) {
	dir := t.TempDir()
	c := Config{Seed: 7, Events: 20_000, Drivers: 50, Parallelism: 2, Rate: 20_000, CheckpointInterval: 10 * time.Millisecond,
		Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out")}
	ctx, cancel := context.WithCancel(context.Background())
	env := Env(c, eddy.LogOutput(testWriter{t}), eddy.OnCheckpoint(func(s eddy.CheckpointStats) {
		if s.ID >= 3 {
			cancel()
		}
	}))
	if err := env.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}
	before := committed(t, c.Out)
	c.Seed = 8
	env = Env(c, eddy.LogOutput(testWriter{t}))
	err := env.Run(context.Background())
	if !errors.Is(err, eddy.ErrIncompatibleState) || !errors.Is(err, eddy.ErrPermanent) ||
		!strings.Contains(err.Error(), `- parameter seed="7"`) || !strings.Contains(err.Error(), `+ parameter seed="8"`) {
		t.Fatalf("resume with another seed: %v", err)
	}
	if got := committed(t, c.Out); len(got) != len(before) {
		t.Fatalf("the refused run changed the committed output: %d lines, %d before", len(got), len(before))
	}
	env = Env(c, eddy.LogOutput(testWriter{t}), eddy.AllowChangedJob())
	if err := env.Run(context.Background()); err != nil {
		t.Fatalf("with AllowChangedJob: %v", err)
	}
}

// TestSwappedStateFileRefused: a checkpoint's state file replaced by
// another valid one of the same size (an older checkpoint's) is caught by
// the checksum the manifest records: the restore falls back.
func TestSwappedStateFileRefused(t *testing.T) {
	dir := t.TempDir()
	c := Config{Seed: 3, Events: 30_000, Drivers: 50, Parallelism: 1, Rate: 30_000, CheckpointInterval: 10 * time.Millisecond,
		Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out")}
	ctx, cancel := context.WithCancel(context.Background())
	env := Env(c, eddy.RetainCheckpoints(3), eddy.LogOutput(testWriter{t}), eddy.OnCheckpoint(func(s eddy.CheckpointStats) {
		if s.ID >= 5 {
			cancel()
		}
	}))
	if err := env.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}
	newest := maxID(manifestIDs(c.Data))
	stateFile := func(id uint64) string {
		parts, _ := filepath.Glob(filepath.Join(c.Data, "checkpoints", fmt.Sprintf("%020d", id), "distance-0-*.state"))
		if len(parts) != 1 {
			return filepath.Join(c.Data, "checkpoints", fmt.Sprintf("%020d", id), "none")
		}
		return parts[0]
	}
	newer, older := stateFile(newest), ""
	for id := newest - 1; id > 0 && older == ""; id-- {
		if _, err := os.Stat(stateFile(id)); err == nil {
			older = stateFile(id)
		}
	}
	if older == "" {
		t.Fatalf("no older state file to swap in below checkpoint %d", newest)
	}
	a, _ := os.ReadFile(newer)
	b, _ := os.ReadFile(older)
	if len(a) != len(b) {
		t.Skipf("state files differ in size (%d, %d): nothing to swap unnoticed", len(a), len(b))
	}
	if err := os.WriteFile(newer, b, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{t: t}
	env = Env(c, eddy.RetainCheckpoints(3), eddy.LogOutput(logs))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := env.Stats(); st.RestoredFrom >= newest || !strings.Contains(logs.String(), "replaced by another file") {
		t.Fatalf("restored from %d (the swapped one is %d); log:\n%s", st.RestoredFrom, newest, logs.String())
	}
}
