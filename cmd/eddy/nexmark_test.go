package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/connector/nexmark"
)

func genFile(t *testing.T, args ...string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "events.jsonl")
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"nexmark", "gen", "--out", out}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("nexmark gen %v: exit %d: %s", args, code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "events (seed") {
		t.Fatalf("no summary: %q", stdout.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestNexmarkGenDeterministic: the same --events, --seed and --rate give
// the same bytes whatever the number of splits read, and they are the
// source's events 0 to N-1 in order; another seed or rate gives others.
func TestNexmarkGenDeterministic(t *testing.T) {
	const n = 2_521
	want := genFile(t, "--events", "2521", "--seed", "7", "--rate", "1000")
	for _, splits := range []string{"3", "8", "64"} {
		if got := genFile(t, "--events", "2521", "--seed", "7", "--rate", "1000", "--splits", splits); !bytes.Equal(got, want) {
			t.Fatalf("--splits %s: output differs", splits)
		}
	}
	src, err := nexmark.New(nexmark.Seed(7), nexmark.Rate(1000))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(want))
	sc.Buffer(nil, 1<<20)
	var i int64
	for ; sc.Scan(); i++ {
		e := src.Event(i)
		if line := sc.Bytes(); !bytes.Equal(line, e.AppendJSON(nil)) || !json.Valid(line) {
			t.Fatalf("line %d is not event %d:\n%s", i+1, i, line)
		}
	}
	if i != n {
		t.Fatalf("%d lines, want %d", i, n)
	}
	if bytes.Equal(genFile(t, "--events", "2521", "--seed", "8", "--rate", "1000"), want) {
		t.Fatal("seeds 7 and 8 give the same file")
	}
	if bytes.Equal(genFile(t, "--events", "2521", "--seed", "7"), want) {
		t.Fatal("rates 1000 and the default give the same file")
	}
}

func TestNexmarkGenStdoutAndBadArguments(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"nexmark", "gen", "--events", "50", "--out", "-"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if lines := strings.Count(stdout.String(), "\n"); lines != 50 || !strings.Contains(stderr.String(), "50 events") {
		t.Fatalf("--out -: %d lines on stdout, stderr %q", lines, stderr.String())
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"nexmark"}, 2, "usage"},
		{[]string{"nexmark", "run2"}, 2, `unknown subcommand "run2"`},
		{[]string{"nexmark", "gen", "--events", "0", "--out", "x"}, 2, "--events"},
		{[]string{"nexmark", "gen", "--events", "10"}, 2, "--out"},
		{[]string{"nexmark", "gen", "--events", "10", "--rate", "0", "--out", "x"}, 2, "Rate(0)"},
		{[]string{"nexmark", "gen", "--events", "10", "--splits", "0", "--out", "x"}, 2, "Splits(0)"},
		{[]string{"nexmark", "gen", "--events", "10", "--out", filepath.Join(dir, "missing", "x")}, 1, "no such file"},
	} {
		stderr.Reset()
		if code := run(tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("files left behind: %v", left)
	}
}
