package main

import (
	"bufio"
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestNexmarkRunKilled SIGKILLs `eddy nexmark run --out` at random moments
// and runs it again until it finishes: each query's committed output then
// equals an uninterrupted run's, line for line.
func TestNexmarkRunKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes for seconds")
	}
	seed := rand.Uint64()
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	queries := "q5,q9,q11"
	args := func(out string, paced bool) []string {
		a := []string{"nexmark", "run", "--query", queries, "--events", "20000", "--seed", "3", "--rate", "8000",
			"--parallelism", "2", "--checkpoint-interval", "50ms", "--out", out}
		if paced {
			a = append(a, "--paced")
		}
		return a
	}
	whole := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(args(whole, false), &stdout, &stderr); code != 0 {
		t.Fatalf("uninterrupted run: exit %d: %s", code, stderr.String())
	}
	killed := t.TempDir()
	kills := 0
	for attempt := 0; ; attempt++ {
		if attempt > 60 {
			t.Fatalf("no run finished in %d attempts", attempt)
		}
		cmd := exec.Command(os.Args[0], args(killed, true)...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// Three paced queries of 2.5 s each: kills spread over them.
		delay := time.Duration(50+rng.IntN(1500)) * time.Millisecond
		if kills >= 8 {
			delay = time.Hour // enough kills: let it finish
		}
		timer := time.NewTimer(delay)
		select {
		case err := <-done:
			timer.Stop()
			if err != nil {
				t.Fatalf("run %d failed: %v\n%s", attempt, err, errb.String())
			}
		case <-timer.C:
			_ = cmd.Process.Kill()
			err := <-done
			var ee *exec.ExitError
			if err == nil || !errors.As(err, &ee) {
				// It finished just as it was killed.
				if err == nil {
					break
				}
				t.Fatalf("run %d: %v", attempt, err)
			}
			kills++
			continue
		}
		break
	}
	if kills < 3 {
		t.Fatalf("only %d kills landed", kills)
	}
	t.Logf("%d kills", kills)
	for _, q := range []string{"q5", "q9", "q11"} {
		want, got := queryLines(t, filepath.Join(whole, q)), queryLines(t, filepath.Join(killed, q))
		if len(want) == 0 {
			t.Fatalf("%s: the uninterrupted run committed nothing", q)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %d lines after %d kills, want the uninterrupted run's %d", q, len(got), kills, len(want))
		}
	}
}

// queryLines reads every committed line under dir, sorted.
func queryLines(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".jsonl" || filepath.Base(path)[0] == '.' {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			out = append(out, sc.Text())
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
