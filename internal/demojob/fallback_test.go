package demojob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
)

// logBuffer collects the runtime's log lines and echoes them to the test log.
type logBuffer struct {
	t  testing.TB
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(strings.TrimSpace(string(p)))
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// flipByte corrupts the file at path by inverting one byte in its middle.
func flipByte(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		t.Fatalf("%s is empty", path)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkpointDir is the directory of checkpoint id under the data directory.
func checkpointDir(data string, id uint64) string {
	return filepath.Join(data, "checkpoints", fmt.Sprintf("%020d", id))
}

// supersetOf checks that got holds every line of want (sorted, as committed
// and expected return them) and nothing that is not in want; lines of want
// may repeat in got. It returns the number of repeated lines.
func supersetOf(t *testing.T, got, want []string) int {
	t.Helper()
	count := make(map[string]int, len(want))
	for _, l := range want {
		count[l]++
	}
	for _, l := range want {
		if count[l] != 1 {
			t.Fatalf("the reference repeats %s", l)
		}
	}
	seen := make(map[string]int, len(got))
	for _, l := range got {
		if count[l] == 0 {
			t.Fatalf("committed line not in the reference: %s", l)
		}
		seen[l]++
	}
	repeats := 0
	for _, l := range want {
		switch n := seen[l]; {
		case n == 0:
			t.Fatalf("reference line never committed: %s", l)
		case n > 1:
			repeats += n - 1
		}
	}
	return repeats
}

// TestCorruptCheckpointFallsBack stops a job after a few checkpoints,
// corrupts the newest one (a state part, the manifest, or with the
// changelog on an object of its log), and checks that
// the next run says it falls back to an older checkpoint and completes.
//
// Falling back is not exactly-once: the corrupt checkpoint's sink
// transactions were already committed (made visible) when it completed, and
// the job replays the records between the older checkpoint and the corrupt
// one, so their output lines are committed a second time. The file sink can
// abort only pending transactions, not take back committed files. So this
// test checks that every reference line is committed and that nothing else
// is (a superset of the reference with repeats), not exact equality.
func TestCorruptCheckpointFallsBack(t *testing.T) {
	for _, what := range []string{"state", "manifest", "log"} {
		t.Run(what, func(t *testing.T) {
			dir := t.TempDir()
			c := Config{Seed: 5, Events: 60_000, Drivers: 200, Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out"),
				CheckpointInterval: 20 * time.Millisecond, Parallelism: 2, Rate: 40_000,
				Changelog: what == "log", Materialize: time.Minute}
			want := expected(c)

			// A partial run, cancelled once six checkpoints are complete.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			completed := 0
			env := Env(c, eddy.RetainCheckpoints(3), eddy.LogOutput(testWriter{t}), eddy.OnCheckpoint(func(s eddy.CheckpointStats) {
				if completed++; completed == 6 {
					cancel()
				}
			}))
			if err := env.Run(ctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("partial run: %v, want context.Canceled", err)
			}
			ids := manifestIDs(c.Data)
			if len(ids) < 2 {
				t.Fatalf("%d complete checkpoints after the partial run, want at least 2 (retaining 3): %v", len(ids), ids)
			}
			newest := maxID(ids)
			before := len(committed(t, c.Out))
			if before == 0 || before >= len(want) {
				t.Fatalf("%d lines committed by the partial run, want some of %d", before, len(want))
			}

			cdir := checkpointDir(c.Data, newest)
			var marker string
			switch what {
			case "state":
				parts, _ := filepath.Glob(filepath.Join(cdir, "*.state"))
				if len(parts) == 0 {
					t.Fatalf("no state parts in %s", cdir)
				}
				flipByte(t, parts[0])
				marker = fmt.Sprintf("checkpoint=%d ", newest)
			case "manifest":
				flipByte(t, filepath.Join(cdir, "MANIFEST"))
				marker = fmt.Sprintf("checkpoint %d:", newest)
			case "log":
				// The newest log object: older checkpoints end before it.
				store, err := blob.Open(c.Data)
				if err != nil {
					t.Fatal(err)
				}
				m, _, err := checkpoint.NewStorage(store, 3).Latest(context.Background())
				if err != nil || m == nil || m.ID != newest {
					t.Fatalf("latest checkpoint: %v, %v; want %d", m, err, newest)
				}
				var obj string
				for _, op := range m.Operators {
					for _, l := range op.Changelog {
						if n := len(l.Objects); n > 0 && l.Objects[n-1] > obj {
							obj = l.Objects[n-1]
						}
					}
				}
				if obj == "" {
					t.Fatalf("checkpoint %d has no log objects", newest)
				}
				flipByte(t, filepath.Join(c.Data, filepath.FromSlash(obj)))
				marker = fmt.Sprintf("checkpoint=%d ", newest)
			}

			// The next run, with another parallelism, falls back and finishes.
			logs := &logBuffer{t: t}
			c.Parallelism, c.Rate = 3, 0
			env = Env(c, eddy.RetainCheckpoints(3), eddy.LogOutput(logs))
			if err := env.Run(context.Background()); err != nil {
				t.Fatalf("run after corrupting checkpoint %d: %v", newest, err)
			}
			out := logs.String()
			fellBack := false
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, marker) && strings.Contains(line, "falling back") {
					fellBack = true
				}
			}
			if !fellBack {
				t.Fatalf("no log line mentions %q and \"falling back\"; the log:\n%s", marker, out)
			}
			st := env.Stats()
			if st.RestoredFrom == 0 || st.RestoredFrom >= newest {
				t.Fatalf("restored from checkpoint %d, want one before the corrupt %d", st.RestoredFrom, newest)
			}
			if !strings.Contains(out, fmt.Sprintf("msg=\"restoring from checkpoint\" component=eddy checkpoint=%d\n", st.RestoredFrom)) {
				t.Fatalf("the log does not say it restores checkpoint %d:\n%s", st.RestoredFrom, out)
			}
			repeats := supersetOf(t, committed(t, c.Out), want)
			t.Logf("checkpoint %d corrupt, restored %d: %d lines committed twice", newest, st.RestoredFrom, repeats)
			noPending(t, c.Out)
		})
	}
}
