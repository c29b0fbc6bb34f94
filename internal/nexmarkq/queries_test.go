package nexmarkq

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/nexmark"
)

// The test events: 20,000 at 200 events/s of event time, 100 s, so that
// windows, sessions and auctions (8 s long on average) open and close
// many times.
const (
	testEvents = 20_000
	testRate   = 200
)

func testSource(t *testing.T, opts ...nexmark.Option) *nexmark.Source {
	t.Helper()
	src, err := nexmark.New(append([]nexmark.Option{nexmark.Seed(7), nexmark.Events(testEvents), nexmark.Rate(testRate), nexmark.Splits(2)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// runQuery runs q over src at parallelism 2, its output in out and its
// checkpoints in data; cancelAt > 0 cancels the run once that checkpoint
// has completed.
func runQuery(q Query, src *nexmark.Source, data, out string, cancelAt uint64) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := eddy.New(eddy.Parallelism(2), eddy.Checkpoints("file://"+data, 20*time.Millisecond),
		eddy.LogOutput(&logBuf{}), eddy.Restarts(0, 0),
		eddy.OnCheckpoint(func(s eddy.CheckpointStats) {
			if cancelAt > 0 && s.ID >= cancelAt {
				cancel()
			}
		}))
	q.Build(env, src, out)
	return env.Run(ctx)
}

// committed reads every committed JSON line under dir (recursively: q10
// writes partitions), canonical (keys sorted, numbers as written), with
// the partition directory each came from.
func committed(t *testing.T, dir string) (lines []string, parts []string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, _ := filepath.Rel(dir, filepath.Dir(p))
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
			dec.UseNumber()
			var r row
			if err := dec.Decode(&r); err != nil {
				return err
			}
			lines = append(lines, canon(r))
			parts = append(parts, filepath.ToSlash(rel))
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return lines, parts
}

// fold applies a changelog's rows in order (within a file; files are
// independent since a key's changes come from one subtask, in one file per
// checkpoint, in commit order) and returns the result table.
func fold(t *testing.T, lines []string) []string {
	t.Helper()
	table := map[string]int{}
	for _, l := range lines {
		var r row
		dec := json.NewDecoder(strings.NewReader(l))
		dec.UseNumber()
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		op, _ := r["op"].(string)
		delete(r, "op")
		c := canon(r)
		switch op {
		case "+I", "+U":
			table[c]++
		case "-U", "-D":
			if table[c] == 0 {
				t.Fatalf("%s retracts a row not in the table: %s", op, c)
			}
			table[c]--
		default:
			t.Fatalf("row without a valid op: %s", l)
		}
	}
	var out []string
	for c, n := range table {
		for range n {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// committedInOrder reads dir's committed lines file by file in name order
// (subtask, then checkpoint), unsorted, as written.
func committedInOrder(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	slices.Sort(files)
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

// result is q's result table from its output in dir: the sorted lines, or
// the fold of an updating query's changes.
func result(t *testing.T, q Query, dir string) []string {
	t.Helper()
	if q.Updating {
		return fold(t, committedInOrder(t, dir))
	}
	lines, _ := committed(t, dir)
	slices.Sort(lines)
	return lines
}

var models = map[string]func([]nexmark.Person, []nexmark.Auction, []nexmark.Bid) []row{
	"q0": modelQ0, "q1": modelQ1, "q2": modelQ2, "q3": modelQ3, "q4": modelQ4, "q5": modelQ5, "q6": modelQ6,
	"q7": modelQ7, "q8": modelQ8, "q9": modelQ9, "q10": modelQ10, "q11": modelQ11,
}

func diffLines(got, want []string) string {
	var out []string
	for _, l := range got {
		if _, ok := slices.BinarySearch(want, l); !ok && len(out) < 4 {
			out = append(out, "extra   "+l)
		}
	}
	for _, l := range want {
		if _, ok := slices.BinarySearch(got, l); !ok && len(out) < 8 {
			out = append(out, "missing "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestQueriesMatchModels runs every query at parallelism 2 on the test
// events and compares its result table with the model's.
func TestQueriesMatchModels(t *testing.T) {
	src := testSource(t)
	ps, as, bs := eventsOf(src)
	for _, q := range All {
		t.Run(q.Name, func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			if err := runQuery(q, src, t.TempDir(), out, 0); err != nil {
				t.Fatal(err)
			}
			got := result(t, q, out)
			if q.Name == "q12" {
				checkQ12(t, got, modelQ12Totals(bs))
				return
			}
			want := canonAll(models[q.Name](ps, as, bs))
			if len(want) == 0 {
				t.Fatal("the model's result is empty: the test events exercise nothing")
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%d rows, want %d; first differences:\n%s", len(got), len(want), diffLines(got, want))
			}
			t.Logf("%d rows, as the model", len(got))
			if q.Name == "q10" {
				checkPartitions(t, out)
			}
		})
	}
}

// checkPartitions: every q10 row is in the directory of its dt and hm.
func checkPartitions(t *testing.T, dir string) {
	lines, parts := committed(t, dir)
	for i, l := range lines {
		var r struct{ DT, HM string }
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if want := "dt=" + r.DT + "/hm=" + r.HM; parts[i] != want {
			t.Fatalf("row in %s, want %s: %s", parts[i], want, l)
		}
	}
}

// checkQ12: processing-time windows depend on the clock, so only their
// shape and their totals per bidder are checked.
func checkQ12(t *testing.T, lines []string, want map[int64]int64) {
	got := map[int64]int64{}
	for _, l := range lines {
		var r Q11Row
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.EndTime-r.StartTime != 10_000 || r.StartTime%10_000 != 0 || r.BidCount < 1 {
			t.Fatalf("not a 10 s tumbling window's count: %s", l)
		}
		got[r.Bidder] += r.BidCount
	}
	if len(got) != len(want) {
		t.Fatalf("%d bidders, want %d", len(got), len(want))
	}
	for b, n := range want {
		if got[b] != n {
			t.Fatalf("bidder %d: %d bids counted, want %d", b, got[b], n)
		}
	}
}

// TestCancelAndResume: stateful queries cancelled after a checkpoint and
// resumed on the same checkpoints commit the result of an uninterrupted
// run.
func TestCancelAndResume(t *testing.T) {
	for _, name := range []string{"q4", "q5", "q9"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			qs, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			q := qs[0]
			// 6,000 events at 4,000/s; paced, the cancelled run would take
			// 1.5 s, so the cancel after the third checkpoint (every 20 ms)
			// comes before the end.
			src := testSource(t, nexmark.Events(6000), nexmark.Rate(4000))
			whole := t.TempDir()
			if err := runQuery(q, src, t.TempDir(), whole, 0); err != nil {
				t.Fatal(err)
			}
			want := result(t, q, whole)
			if len(want) == 0 {
				t.Fatal("empty result: the test exercises nothing")
			}
			data, out := t.TempDir(), t.TempDir()
			err = runQuery(q, testSource(t, nexmark.Events(6000), nexmark.Rate(4000), nexmark.Paced()), data, out, 3)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled run: %v", err)
			}
			if err := runQuery(q, src, data, out, 0); err != nil {
				t.Fatal(err)
			}
			if got := result(t, q, out); !slices.Equal(got, want) {
				t.Fatalf("%d rows, want %d; first differences:\n%s", len(got), len(want), diffLines(got, want))
			}
		})
	}
}
