package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestBenchPebbleRuns runs a small bench pebble and checks that it filled
// every key, settled, measured the updates' checkpoints, and restored the last
// checkpoint at the same parallelism and rescaled, each reading bytes.
func TestBenchPebbleRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs jobs for seconds")
	}
	var out, errb bytes.Buffer
	code := run([]string{"bench", "pebble", "--state-gb", "0.005", "--value-bytes", "1024", "--interval", "200ms",
		"--report", "200ms", "--update", "1s", "--update-rate", "2000", "--rescale", "3", "--dir", t.TempDir()}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	t.Log(s)
	if !strings.Contains(s, "fill done: 5242 records") {
		t.Errorf("the fill did not report its 5242 keys:\n%s", s)
	}
	if !regexp.MustCompile(`settle: compactions caught up \S+ after the start`).MatchString(s) || !regexp.MustCompile(`settle done in \S+: restored checkpoint \d+`).MatchString(s) {
		t.Errorf("no settle phase between the fill and the updates:\n%s", s)
	}
	m := regexp.MustCompile(`update done: 2000 updates changed [0-9.]+ MiB of values; checkpoints uploaded [0-9.]+ MiB in all: uploaded/changed ([0-9.]+)`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no update summary:\n%s", s)
	}
	if r, _ := strconv.ParseFloat(m[1], 64); r <= 0 {
		t.Errorf("uploaded/changed %s: the updates' checkpoints uploaded nothing", m[1])
	}
	// Checkpoints of the update phase, then the two restores, each of the
	// newest checkpoint so far.
	last := 0
	for _, row := range regexp.MustCompile(`(?m)^(\d+)  [0-9.]+  [0-9.]+  \(`).FindAllStringSubmatch(s, -1) {
		id, _ := strconv.Atoi(row[1])
		last = max(last, id)
	}
	if last == 0 {
		t.Fatalf("no checkpoint of the update phase listed:\n%s", s)
	}
	restores := regexp.MustCompile(`restore of checkpoint (\d+) at parallelism (\d) \(from 2\): recovery \S+ \(whole run \S+\), read ([0-9.]+) MiB`).FindAllStringSubmatch(s, -1)
	if len(restores) != 2 || restores[0][2] != "2" || restores[1][2] != "3" {
		t.Fatalf("want a restore at parallelism 2 and one at 3:\n%s", s)
	}
	for _, r := range restores {
		id, _ := strconv.Atoi(r[1])
		if id < last {
			t.Errorf("restore at parallelism %s restored checkpoint %d, older than %d", r[2], id, last)
		}
		last = id
		if mib, _ := strconv.ParseFloat(r[3], 64); mib < 5 {
			t.Errorf("restore at parallelism %s read %s MiB, less than the 5 MiB of values", r[2], r[3])
		}
	}
	if !regexp.MustCompile(`peak RSS of the process: [1-9]\d* MiB`).MatchString(s) {
		t.Errorf("no peak RSS:\n%s", s)
	}
	var errb2 bytes.Buffer
	if code := run([]string{"bench", "pebble", "--value-bytes", "4"}, &bytes.Buffer{}, &errb2); code != 2 || !strings.Contains(errb2.String(), "value-bytes") {
		t.Fatalf("--value-bytes 4: exit %d, %q", code, errb2.String())
	}
}
