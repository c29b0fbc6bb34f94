package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/connector/nexmark"
)

// TestNexmarkRunOut: with --out, each query's result is committed under
// DIR/<query>/ in the sink table's columns (q0: every bid; q4: changes with
// an op; q10: in its dt/hm partition), and a rerun on the same directory
// resumes from the finished run's checkpoint and adds nothing.
func TestNexmarkRunOut(t *testing.T) {
	out := t.TempDir()
	args := []string{"nexmark", "run", "--query", "q0,q4,q10", "--events", "3000", "--seed", "3", "--rate", "500",
		"--parallelism", "2", "--checkpoint-interval", "50ms", "--out", out}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	src, err := nexmark.New(nexmark.Seed(3), nexmark.Events(3000), nexmark.Rate(500))
	if err != nil {
		t.Fatal(err)
	}
	bids := map[string]bool{}
	for i := range src.Len() {
		if e := src.Event(i); e.Bid != nil {
			b, _ := json.Marshal(map[string]any{"auction": e.Bid.Auction, "bidder": e.Bid.Bidder, "price": e.Bid.Price,
				"dateTime": e.Bid.DateTime, "extra": e.Bid.Extra})
			bids[string(b)] = true
		}
	}
	q0 := jsonRows(t, filepath.Join(out, "q0", "*.jsonl"))
	if len(q0) != len(bids) {
		t.Fatalf("q0: %d rows, want %d bids", len(q0), len(bids))
	}
	for _, r := range q0 {
		if b, _ := json.Marshal(r); !bids[string(b)] {
			t.Fatalf("q0 row is no bid: %s", b)
		}
	}
	q4 := jsonRows(t, filepath.Join(out, "q4", "*.jsonl"))
	if len(q4) == 0 {
		t.Fatal("q4: no rows")
	}
	for _, r := range q4 {
		if _, ok := r["op"]; !ok || r["id"] == nil || r["final"] == nil {
			t.Fatalf("q4 row without op, id or final: %v", r)
		}
	}
	if q10 := jsonRows(t, filepath.Join(out, "q10", "dt=2015-07-15", "hm=00:00", "*.jsonl")); len(q10) != len(bids) {
		t.Fatalf("q10: %d rows in dt=2015-07-15/hm=00:00, want %d", len(q10), len(bids))
	}
	stdout.Reset()
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("rerun: exit %d: %s", code, stderr.String())
	}
	if n := len(jsonRows(t, filepath.Join(out, "q0", "*.jsonl"))); n != len(bids) {
		t.Fatalf("after the rerun q0 has %d rows, want %d", n, len(bids))
	}
}

// TestNexmarkRunDiscard: without --out every query runs and reports its
// throughput.
func TestNexmarkRunDiscard(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"nexmark", "run", "--query", "all", "--events", "2000", "--rate", "1000", "--checkpoint-interval", "0"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, q := range []string{"q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9", "q10", "q11", "q12"} {
		if !strings.Contains(stdout.String(), "\n"+q+" ") {
			t.Fatalf("no line for %s:\n%s", q, stdout.String())
		}
	}
	if code := run([]string{"nexmark", "run", "--query", "q13", "--events", "10"}, &stdout, &stderr); code != 2 {
		t.Fatalf("unknown query: exit %d, want 2", code)
	}
}

func jsonRows(t *testing.T, glob string) []map[string]any {
	t.Helper()
	files, _ := filepath.Glob(glob)
	var rows []map[string]any
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
			var r map[string]any
			d := json.NewDecoder(strings.NewReader(l))
			d.UseNumber()
			if err := d.Decode(&r); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			rows = append(rows, r)
		}
	}
	return rows
}
