package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDemoPebble: `eddy demo --state pebble` runs the demo on Pebble state,
// with the changelog or without, and commits what the heap run commits;
// the state directory is left empty; bad flag combinations are usage
// errors.
func TestDemoPebble(t *testing.T) {
	dir := t.TempDir()
	base := []string{"demo", "--events", "3000", "--drivers", "20", "--rate", "0", "--quiet", "--parallelism", "2"}
	runDemo := func(state, name string, more ...string) string {
		t.Helper()
		out := filepath.Join(dir, name, "out")
		args := append(append(slices.Clone(base), more...), "--state", state, "--state-dir", filepath.Join(dir, name, "state"), "--data", filepath.Join(dir, name, "data"), "--out", out)
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("--state %s: exit %d: %s", state, code, stderr.String())
		}
		return out
	}
	heap := runDemo("heap", "heap")
	if readAll(t, heap) == "" {
		t.Fatal("the heap run committed nothing")
	}
	for _, name := range []string{"pebble", "pebble-changelog"} {
		var peb string
		if name == "pebble" {
			peb = runDemo("pebble", name)
		} else {
			peb = runDemo("pebble", name, "--changelog", "--materialize", "20ms")
		}
		for _, sub := range []string{"", "windows", "late"} {
			if h, p := readAll(t, filepath.Join(heap, sub)), readAll(t, filepath.Join(peb, sub)); h != p {
				t.Fatalf("%s %s: Pebble committed other lines than the heap", name, sub)
			}
		}
		if ents, _ := os.ReadDir(filepath.Join(dir, name, "state")); len(ents) != 0 {
			t.Fatalf("%s: the state directory holds %d entries after the run", name, len(ents))
		}
	}
	for _, bad := range [][]string{{"--state", "rocks"}, {"--state", "pebble", "--state-dir", ""}} {
		var stdout, stderr bytes.Buffer
		if code := run(append(append([]string{}, base...), bad...), &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", bad, code, stderr.String())
		}
	}
}

// readAll returns the committed lines of a file sink's directory, sorted:
// which file holds a line depends on when checkpoints came.
func readAll(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	var lines []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")...)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestBenchCheckpointPebble: `eddy bench checkpoint --backend pebble` runs
// both configurations (the changelog off and on) and restores them; an
// unknown backend is a usage error.
func TestBenchCheckpointPebble(t *testing.T) {
	if testing.Short() {
		t.Skip("runs jobs for seconds")
	}
	var out, errb bytes.Buffer
	code := run([]string{"bench", "checkpoint", "--backend", "pebble", "--jobs", "value", "--state-mb", "4", "--duration", "500ms",
		"--latency=false", "--recoveries", "1", "--dir", t.TempDir()}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	rows, _ := benchTables(out.String(), "value")
	if len(rows) != 2 || rows[0][1] != "false" || rows[1][1] != "true" || rows[0][2] == "0" || rows[1][2] == "0" || !strings.Contains(out.String(), "state backend: pebble") {
		t.Fatalf("want a row without the changelog and one with it, with checkpoints:\n%s", out.String())
	}
	for _, bad := range [][]string{{"--backend", "rocks"}} {
		errb.Reset()
		if code := run(append([]string{"bench", "checkpoint"}, bad...), &bytes.Buffer{}, &errb); code != 2 {
			t.Errorf("%v: exit %d (%s)", bad, code, errb.String())
		}
	}
}
