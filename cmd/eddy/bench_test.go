package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/connector/datagen"
)

// TestMain lets the test binary stand in for eddy when the bench runs a
// cold restore in a new process of "this program", when the Nexmark kill
// test runs queries in processes it kills, and when the --group test runs
// the processes of a demo job.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "bench" && os.Args[2] == "restore-once" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 2 && os.Args[1] == "nexmark" && os.Args[2] == "run" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) // the kill test's process
	}
	if len(os.Args) > 1 && os.Args[1] == "demo" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) // a process of the --group test
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
			// Progress goes to stderr, stage by stage.
			for _, stage := range []string{"value changelog=false: pre-filling 4 MiB", "value changelog=true: recovery 2 of 2"} {
				if !strings.Contains(errb.String(), stage) {
					t.Errorf("no progress line %q on stderr:\n%s", stage, errb.String())
				}
			}
			rows, reqs := benchTables(out.String(), "value")
			if len(rows) != 2 || rows[0][1] != "false" || rows[1][1] != "true" {
				t.Fatalf("want a row without and one with the changelog:\n%s", out.String())
			}
			wantRequestRows(t, rows, reqs, false, out.String())
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

// benchTables returns the rows of job in the two tables bench checkpoint
// prints, checkpoints and recoveries first, then store requests, split
// into fields.
func benchTables(out, job string) (rows, reqs [][]string) {
	tables := strings.SplitN(out, "\nstore requests", 2)
	for i, table := range tables {
		for _, l := range strings.Split(table, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == job {
				if i == 0 {
					rows = append(rows, f)
				} else {
					reqs = append(reqs, f)
				}
			}
		}
	}
	return rows, reqs
}

// wantRequestRows checks the store requests table against the rows of
// the first: a row without and one with the changelog, each with PUTs and
// LISTs per checkpoint and per minute (every checkpoint writes its
// manifest and lists the checkpoints to prune), counted between measured
// checkpoints, so "-" where only one was measured without the changelog
// (a slow machine), and
// the GETs of a recovery (it reads the manifest at least); the HTTP PUTs
// of an S3 store (s3), "-" for another.
func wantRequestRows(t *testing.T, rows, reqs [][]string, s3 bool, out string) {
	t.Helper()
	if len(reqs) != 2 || reqs[0][1] != "false" || reqs[1][1] != "true" {
		t.Fatalf("want a row of requests without and one with the changelog:\n%s", out)
	}
	for i, r := range reqs {
		if len(r) != 15 {
			t.Fatalf("requests row %q: want 15 cells", r)
		}
		if !s3 && r[8] != "-" {
			t.Errorf("requests row %q: S3 HTTP PUT/ckpt is %q for a local store, want -", r, r[8])
		}
		cells := []int{2, 4, 9, 11} // PUT/ckpt, LIST/ckpt, PUT/min, LIST/min
		if s3 {
			cells = append(cells, 8) // S3 HTTP PUT/ckpt
		}
		if rows[i][2] == "1" {
			// Without the changelog the counting starts at the first
			// measured checkpoint: with one, there is no interval. With
			// it, at the checkpoint before (the measured job completes
			// some before its materializations): one interval, counted.
			for _, c := range cells {
				if i == 0 && r[c] != "-" {
					t.Errorf("requests row %q: cell %d is %q with one checkpoint measured, want -", r, c+1, r[c])
				}
			}
			cells = nil
		}
		if i == 1 && rows[i][2] != "1" {
			// With the changelog: log objects per checkpoint and their size.
			cells = append(cells, 6, 7)
		}
		for _, c := range append(cells, 13) { // and GET/recovery
			if v, err := strconv.ParseFloat(r[c], 64); err != nil || v <= 0 {
				t.Errorf("requests row %q: cell %d is %q, want a positive count", r, c+1, r[c])
			}
		}
	}
}

// TestRestoreOnceOutputRoundTrip: the parent reads back what a cold
// restore's child prints.
func TestRestoreOnceOutputRoundTrip(t *testing.T) {
	want := blob.Requests{Put: 1, Get: 22, List: 3, Delete: 4}
	d, id, got, err := parseRestoreOnce(formatRestoreOnce(1234*time.Microsecond, 9, want) + "\n")
	if err != nil || d != 1234*time.Microsecond || id != 9 || got != want {
		t.Fatalf("parsed %v, %d, %+v, %v", d, id, got, err)
	}
	for _, bad := range []string{"", "1ms 9", "1ms 9 1 2 3", "soon 9 1 2 3 4", "1ms x 1 2 3 4", "1ms 9 1 2 three 4"} {
		if _, _, _, err := parseRestoreOnce(bad); err == nil || !strings.Contains(err.Error(), "printed") {
			t.Errorf("parseRestoreOnce(%q) = %v, want an error quoting the output", bad, err)
		}
	}
}

// TestRestoreFlagsRoundTrip: the flags a cold restore is started with give
// the child the parent's configuration.
func TestRestoreFlagsRoundTrip(t *testing.T) {
	want := benchConfig{job: "window", changelog: true, dir: "/x/y", storeURL: "s3://b/p/value-true?endpoint=http://h:1", stateMB: 7, valueBytes: 99,
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

// TestBenchWindowStateFollowsStateMB: the window job (b) holds about
// --state-mb of window state (its drivers are chosen for it), in the full
// size of the run without the changelog, and runs with it too.
func TestBenchWindowStateFollowsStateMB(t *testing.T) {
	if testing.Short() {
		t.Skip("runs jobs for seconds")
	}
	var out, errb bytes.Buffer
	code := run([]string{"bench", "checkpoint", "--jobs", "window", "--state-mb", "8", "--duration", "500ms",
		"--latency=false", "--recoveries", "1", "--dir", t.TempDir()}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	t.Log(out.String())
	rows, reqs := benchTables(out.String(), "window")
	if len(rows) != 2 || rows[0][1] != "false" || rows[1][1] != "true" {
		t.Fatalf("want a row without and one with the changelog:\n%s", out.String())
	}
	wantRequestRows(t, rows, reqs, false, out.String())
	// job, changelog, checkpoints, p50, p99, p99.9, max, sync p99, stall,
	// uploaded (2 fields), full size (2 fields), ...
	off := rows[0]
	mb, err := strconv.ParseFloat(off[11], 64)
	if err != nil || off[12] != "MiB" || mb < 4 || mb > 16 {
		t.Fatalf("full size of the window state without the changelog %q %q, want about 8 MiB", off[11], off[12])
	}
}

// TestPausingSourcePausesEverySplit: the pre-fill's source yields every
// event below the pause index, then reads Idle, and says so once every
// split has paused.
func TestPausingSourcePausesEverySplit(t *testing.T) {
	const drivers, at = 40, 1000
	src := &pausingSource[datagen.GPSPoint]{Source: datagen.GPS(datagen.Drivers(drivers), datagen.Splits(4)), at: at, paused: make(chan struct{})}
	seen := 0
	for split := range src.Splits() {
		r, err := src.OpenSplit(context.Background(), split, nil)
		if err != nil {
			t.Fatal(err)
		}
		var p datagen.GPSPoint
		for {
			st, err := r.Next(&p)
			if err != nil {
				t.Fatal(err)
			}
			if st == eddy.Idle {
				break
			}
			if i := p.Timestamp.Sub(datagen.DefaultStartTime) / datagen.EventInterval; i >= at {
				t.Fatalf("split %d yielded event %d, at or past the pause at %d", split, i, at)
			}
			seen++
		}
		if st, _ := r.Next(&p); st != eddy.Idle {
			t.Fatalf("split %d resumed after pausing", split)
		}
	}
	if seen != at {
		t.Errorf("yielded %d events before the pause, want %d", seen, at)
	}
	select {
	case <-src.paused:
	default:
		t.Fatal("paused not closed once every split paused")
	}
}

// TestBenchGroupRuns runs a small bench group (processes of this test
// binary, see TestMain) and checks that it prints the throughput of each
// process count, with totals equal across them, and the handover and
// kill times.
func TestBenchGroupRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs processes of the demo for seconds")
	}
	var out, errb bytes.Buffer
	code := run([]string{"bench", "group", "--events", "20000", "--drivers", "50", "--processes", "1,2", "--rounds", "1",
		"--session-timeout", "2s", "--dir", t.TempDir()}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
	}
	t.Log(out.String())
	rows := map[string][]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	for _, n := range []string{"1", "2"} {
		r := rows[n]
		if len(r) != 7 || !strings.HasSuffix(r[3], "x") {
			t.Fatalf("no throughput row for %s processes: %q\n%s", n, r, out.String())
		}
		if v, err := strconv.ParseFloat(r[2], 64); err != nil || v <= 0 {
			t.Errorf("%s processes: events/s %q", n, r[2])
		}
		if r[5] != rows["1"][5] || r[6] != rows["1"][6] {
			t.Errorf("%s processes committed %s totals (digest %s), 1 process %s (%s)", n, r[5], r[6], rows["1"][5], rows["1"][6])
		}
	}
	for _, what := range []string{"handover on revoke: SIGTERM", "SIGKILL -> the moved task started", "SIGKILL -> its first checkpoint"} {
		var row string
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, what) {
				row = line
			}
		}
		// samples, p50, p99, max after the description.
		f := strings.Fields(row)
		if len(f) < 4 || f[len(f)-4] == "0" {
			t.Errorf("no samples of %q: %q", what, row)
		}
	}
}
