package main

import (
	"bytes"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
)

// TestMain lets the test binary stand in for eddy when the bench runs a
// cold restore in a new process of "this program".
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "bench" && os.Args[2] == "restore-once" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestBenchCheckpointRuns runs a small bench checkpoint with both kinds of
// recovery and checks that each configuration reports checkpoints, a
// recovery and the ratios against the run without the changelog.
func TestBenchCheckpointRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs jobs for seconds")
	}
	for _, mode := range []string{"cold", "warm"} {
		t.Run(mode, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run([]string{"bench", "checkpoint", "--jobs", "value", "--state-mb", "4", "--duration", "500ms",
				"--latency=false", "--recoveries", "2", "--recovery", mode, "--dir", t.TempDir()}, &out, &errb)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			t.Log(out.String())
			var rows [][]string
			for _, l := range strings.Split(out.String(), "\n") {
				if f := strings.Fields(l); len(f) > 0 && f[0] == "value" {
					rows = append(rows, f)
				}
			}
			if len(rows) != 2 || rows[0][1] != "false" || rows[1][1] != "true" {
				t.Fatalf("want a row without and one with the changelog:\n%s", out.String())
			}
			// The recovery ratio ends the row without the changelog; the
			// row with it adds the range of the per-round ratios.
			for i, r := range rows {
				if r[2] == "0" || !strings.HasSuffix(r[len(r)-1-i], "x") || !strings.HasSuffix(r[len(r)-3-i], "x") {
					t.Fatalf("row %q lacks checkpoints, full/state or recovery/state", r)
				}
			}
			if rng := rows[1][len(rows[1])-1]; !strings.HasPrefix(rng, "(") || !strings.Contains(rng, "-") {
				t.Fatalf("row %q lacks the range of the recovery ratios", rows[1])
			}
		})
	}
	var errb bytes.Buffer
	if code := run([]string{"bench", "checkpoint", "--recovery", "tepid"}, &bytes.Buffer{}, &errb); code != 2 || !strings.Contains(errb.String(), "tepid") {
		t.Fatalf("--recovery tepid: exit %d, %q", code, errb.String())
	}
}

// TestRestoreFlagsRoundTrip: the flags a cold restore is started with give
// the child the parent's configuration.
func TestRestoreFlagsRoundTrip(t *testing.T) {
	want := benchConfig{job: "window", changelog: true, dir: "/x/y", stateMB: 7, valueBytes: 99,
		interval: 30 * time.Millisecond, materialize: 3 * time.Second, latency: false, readLatency: true, logRatio: 0.4, upto: 42}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	var got benchConfig
	got.onceFlags(fs)
	if err := fs.Parse(want.restoreFlags()); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("the child gets %+v, want %+v", got, want)
	}
}

func TestKeepSlowKeepsTheSlowest(t *testing.T) {
	var r benchResult
	for i, ms := range []int{5, 9, 1, 7, 9, 3, 12} {
		r.keepSlow(eddy.CheckpointStats{ID: uint64(i), Duration: time.Duration(ms) * time.Millisecond})
	}
	var got []time.Duration
	for _, s := range r.slowest {
		got = append(got, s.Duration)
	}
	want := []time.Duration{12 * time.Millisecond, 9 * time.Millisecond, 9 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Fatalf("slowest %v, want %v", got, want)
	}
	var b strings.Builder
	explainSlow(&b, "value", true, r)
	if n := strings.Count(b.String(), "\n"); n != slowestKept || !strings.Contains(b.String(), "checkpoint 6 took 12ms") {
		t.Fatalf("explanation (%d lines):\n%s", n, b.String())
	}
}
