package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSerdeShowcaseRuns(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"serde", "--events", "500", "--seed", "3"}, &out, &errb); code != 0 {
		t.Fatalf("demo exited %d: %s", code, errb.String())
	}
	for _, want := range []string{"protobuf bytes", "encode:", "decode:", "checked: 64 distinct events"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBadArguments(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"frobnicate"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown command") {
		t.Fatalf("unknown command: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"serde", "--events", "0"}, &out, &errb); code != 2 {
		t.Fatalf("--events 0: exit %d", code)
	}
}

// TestDemoExitCodesAndCommittedLines: the demo's summary counts the lines it
// committed (a rerun of a finished job commits none), a job failure exits 1
// (not 130, which only a signal gives), and bad usage exits 2.
func TestDemoExitCodesAndCommittedLines(t *testing.T) {
	dir := t.TempDir()
	out, data := filepath.Join(dir, "out"), filepath.Join(dir, "data")
	args := []string{"demo", "--events", "3000", "--drivers", "20", "--rate", "0", "--quiet", "--parallelism", "2", "--data", data, "--out", out}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("demo exited %d: %s", code, stderr.String())
	}
	lines := committedLines(out)
	if lines == 0 || !strings.Contains(stdout.String(), fmt.Sprintf("lines committed this run  %d\n", lines)) {
		t.Fatalf("%d lines committed; summary:\n%s", lines, stdout.String())
	}
	stdout.Reset()
	if code := run(args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "lines committed this run  0\n") {
		t.Fatalf("rerun of a finished job: exit %d, summary:\n%s", code, stdout.String())
	}
	if committedLines(out) != lines {
		t.Fatal("the rerun committed output again")
	}

	// The output directory is a file: the sink cannot recover.
	blocked := filepath.Join(dir, "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	bad := []string{"demo", "--events", "100", "--quiet", "--data", filepath.Join(dir, "data2"), "--out", blocked}
	if code := run(bad, &stdout, &stderr); code != 1 || strings.Contains(stderr.String(), "context canceled") ||
		strings.Contains(stderr.String(), "restarting") || !strings.Contains(stderr.String(), "not a directory") {
		t.Fatalf("failing job: exit %d, stderr %s", code, stderr.String())
	}
	if code := run([]string{"demo", "--data", ""}, &stdout, &stderr); code != 2 {
		t.Fatalf(`--data "": exit %d`, code)
	}
}
