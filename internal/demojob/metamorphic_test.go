package demojob

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
)

// testSeed returns the seed in $env, or a new one; it logs it either way so a
// failure can be replayed.
func testSeed(t *testing.T, env string) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(env); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", env, s, err)
		}
		seed = v
	}
	t.Logf("random seed %d (rerun with %s=%d)", seed, env, seed)
	return seed
}

func noPending(t *testing.T, out string) {
	t.Helper()
	pending, _ := filepath.Glob(filepath.Join(out, ".*"))
	if len(pending) != 0 {
		t.Fatalf("pending files left: %v", pending)
	}
}

// TestMetamorphicConfigurations runs the same job (same seed, events and
// drivers) under settings that must not change its output: the state
// backend (the heap or Pebble), parallelism, checkpoint interval (or no
// checkpoints at all), shuffle batch size, and cancellations followed by
// resumes with other parallelisms (and, from the heap, onto Pebble). Every
// run's committed output must be exactly the reference.
func TestMetamorphicConfigurations(t *testing.T) {
	// Every 7th point of a driver from its 100th is an hour late: the late
	// side output must not depend on the configuration either.
	base := Config{Seed: 11, Events: 30_000, Drivers: 250, LateEvery: 7}
	want := expected(base)
	seed := testSeed(t, "EDDY_METAMORPHIC_SEED")
	rng := rand.New(rand.NewPCG(seed, seed^0x3e7a))

	for _, backend := range []string{"heap", "pebble"} {
		for _, par := range []int{1, 2, 4} {
			for _, interval := range []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 0} {
				for _, batch := range []int{1, 7, 512} {
					ckpt := "none"
					if interval > 0 {
						ckpt = interval.String()
					}
					t.Run(fmt.Sprintf("%s/par=%d/checkpoints=%s/batch=%d", backend, par, ckpt, batch), func(t *testing.T) {
						dir := t.TempDir()
						c := base
						c.Parallelism, c.Out = par, filepath.Join(dir, "out")
						if backend == "pebble" {
							c.PebbleDir = filepath.Join(dir, "pebble")
						}
						if interval > 0 {
							// Without Data, Env adds no Checkpoints option: no
							// storage, only the final checkpoint commits.
							c.Data, c.CheckpointInterval = filepath.Join(dir, "data"), interval
						}
						env := Env(c, eddy.BatchSize(batch), eddy.LogOutput(testWriter{t}))
						if err := env.Run(context.Background()); err != nil {
							t.Fatal(err)
						}
						sameLines(t, committed(t, c.Out), want)
						noPending(t, c.Out)
						st := env.Stats()
						if st.RecordsIn != c.Events || st.RecordsOut < c.Events || st.Checkpoints < 1 { // totals plus window results
							t.Fatalf("stats %+v", st)
						}
						if interval == 0 {
							if _, err := os.Stat(filepath.Join(dir, "data")); !errors.Is(err, os.ErrNotExist) {
								t.Fatalf("a job without checkpoints wrote a data directory: %v", err)
							}
							if st.Checkpoints != 1 {
								t.Fatalf("%d checkpoints without checkpoint storage, want the final one only", st.Checkpoints)
							}
						}
					})
				}
			}
		}
	}

	// Cancelled at random points and resumed in process with another
	// parallelism (and batch size) each time; the last run completes. The
	// state is on the heap, on Pebble, or on the heap until a random run
	// from which it is on Pebble (whose databases load the heap's parts).
	for _, withCheckpoints := range []bool{true, false} {
		for _, backend := range []string{"heap", "pebble", "heap-then-pebble"} {
			if backend == "heap-then-pebble" && !withCheckpoints {
				continue // nothing carries over without checkpoints
			}
			t.Run(fmt.Sprintf("cancel-resume/checkpoints=%v/%s", withCheckpoints, backend), func(t *testing.T) {
				cancelResume(t, base, want, rng, withCheckpoints, backend)
			})
		}
	}
}

// cancelResume is a cancel-resume case of TestMetamorphicConfigurations.
func cancelResume(t *testing.T, base Config, want []string, rng *rand.Rand, withCheckpoints bool, backend string) {
	dir := t.TempDir()
	c := base
	c.Out = filepath.Join(dir, "out")
	c.Rate = 40_000 // about 0.75 s uninterrupted
	if withCheckpoints {
		c.Data, c.CheckpointInterval = filepath.Join(dir, "data"), 20*time.Millisecond
	}
	pars := rng.Perm(4) // a permutation of 0..3: parallelism 1..4 in random order
	cancels := 2 + rng.IntN(2)
	switchAt := 0 // the first run on Pebble
	switch backend {
	case "heap":
		switchAt = -1
	case "heap-then-pebble":
		switchAt = 1 + rng.IntN(cancels)
	}
	for i := 0; ; i++ {
		c.Parallelism = pars[i%len(pars)] + 1
		if switchAt >= 0 && i >= switchAt {
			c.PebbleDir = filepath.Join(dir, "pebble")
		}
		batch := []int{1, 7, 512}[rng.IntN(3)]
		ctx, cancel := context.WithCancel(context.Background())
		last := i == cancels
		var delay time.Duration
		if !last {
			delay = time.Duration(30+rng.IntN(250)) * time.Millisecond
			time.AfterFunc(delay, cancel)
		}
		// A run restores a checkpoint if an earlier one completed any.
		mustRestore := withCheckpoints && len(manifestIDs(c.Data)) > 0
		env := Env(c, eddy.BatchSize(batch), eddy.LogOutput(testWriter{t}))
		err := env.Run(ctx)
		cancel()
		st := env.Stats()
		t.Logf("run %d: parallelism %d, batch %d, Pebble %v, cancel after %v: %v; restored from %d, %d records in, %d checkpoints",
			i, c.Parallelism, batch, c.PebbleDir != "", delay, err, st.RestoredFrom, st.RecordsIn, st.Checkpoints)
		// A run cancelled before its restore finished (no record read:
		// records flow only after it) has nothing to show; any other
		// must have restored.
		if mustRestore && st.RestoredFrom == 0 && (last || st.RecordsIn > 0) {
			t.Fatalf("run %d did not restore a checkpoint", i)
		}
		if last {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled run: %v", err)
		}
		if err == nil {
			t.Fatalf("run %d finished before its cancellation after %v; the job is too short", i, delay)
		}
	}
	sameLines(t, committed(t, c.Out), want)
	noPending(t, c.Out)
}
