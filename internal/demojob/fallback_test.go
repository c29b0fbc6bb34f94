package demojob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
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

// TestCorruptCheckpointFallsBack stops a job after a few checkpoints,
// damages the newest one (a state part, the manifest, with the changelog on
// an object of its log, with Pebble state an SST object, damaged or
// deleted; or deletes its manifest) or every one, and checks
// that the next run falls back to an older checkpoint (or the beginning),
// rolls back the output committed after it (the file sink can), and
// commits exactly the reference: no loss, no duplicate. The damaged
// checkpoints are quarantined, not pruned.
func TestCorruptCheckpointFallsBack(t *testing.T) {
	for _, what := range []string{"state", "manifest", "log", "manifest-deleted", "every-manifest", "pebble-sst", "pebble-sst-missing"} {
		t.Run(what, func(t *testing.T) {
			dir := t.TempDir()
			c := Config{Seed: 5, Events: 60_000, Drivers: 200, Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out"),
				CheckpointInterval: 20 * time.Millisecond, Parallelism: 2, Rate: 20_000, // 3 s: six checkpoints also under the race detector on a loaded machine
				Changelog: what == "log", Materialize: time.Minute}
			if strings.HasPrefix(what, "pebble-sst") {
				// Slower, so that six checkpoints complete before the end
				// of the input also on a loaded machine, where Pebble's
				// checkpoints take longer.
				c.PebbleDir, c.Rate = filepath.Join(dir, "pebble"), 10_000
			}
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
			below := newest // the restore must pick a checkpoint below this
			switch what {
			case "pebble-sst", "pebble-sst-missing":
				// An SST of the newest checkpoint, damaged or gone; the
				// older checkpoints that list it too are as unusable.
				store, err := blob.Open(c.Data)
				if err != nil {
					t.Fatal(err)
				}
				st := checkpoint.NewStorage(store, 3)
				m, err := st.Load(context.Background(), newest)
				if err != nil {
					t.Fatal(err)
				}
				var obj string
				for _, op := range m.Operators {
					for _, p := range op.Parts {
						if p.Pebble == nil {
							t.Fatalf("operator %s part %d is not a Pebble part", op.Name, p.Subtask)
						}
						for _, f := range p.Pebble.Files {
							if strings.HasSuffix(f.Name, ".sst") && f.Object > obj {
								obj = f.Object
							}
						}
					}
				}
				if obj == "" {
					t.Fatalf("checkpoint %d lists no SST", newest)
				}
				for _, id := range ids {
					old, err := st.Load(context.Background(), id)
					if err != nil {
						t.Fatal(err)
					}
					if slices.Contains(old.Files, obj) {
						below = min(below, id)
					}
				}
				path := filepath.Join(c.Data, filepath.FromSlash(obj))
				if what == "pebble-sst" {
					flipByte(t, path)
					marker = fmt.Sprintf("checkpoint=%d ", newest) // found by the restore
				} else {
					if err := os.Remove(path); err != nil {
						t.Fatal(err)
					}
					marker = fmt.Sprintf("checkpoint %d:", newest) // found listing it before
				}
				t.Logf("%s: %s, listed by checkpoints from %d to %d", what, obj, below, newest)
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
			case "manifest-deleted":
				// No trace that it ever completed but its sink's files.
				if err := os.Remove(filepath.Join(cdir, "MANIFEST")); err != nil {
					t.Fatal(err)
				}
				marker = ""
			case "every-manifest":
				for _, id := range ids {
					flipByte(t, filepath.Join(checkpointDir(c.Data, id), "MANIFEST"))
				}
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
			fellBack := marker == ""
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, marker) && strings.Contains(line, "falling back") {
					fellBack = true
				}
			}
			if !fellBack {
				t.Fatalf("no log line mentions %q and \"falling back\"; the log:\n%s", marker, out)
			}
			if !strings.Contains(out, "rolling back output committed after the checkpoint restored from") {
				t.Fatalf("the log does not say the output after the fallback point was rolled back:\n%s", out)
			}
			st := env.Stats()
			if what == "every-manifest" {
				if st.RestoredFrom != 0 {
					t.Fatalf("restored from checkpoint %d with every manifest corrupt", st.RestoredFrom)
				}
			} else {
				if (st.RestoredFrom == 0 && below > ids[0]) || st.RestoredFrom >= below {
					t.Fatalf("restored from checkpoint %d, want one before %d (the damaged %d and those sharing its file)", st.RestoredFrom, below, newest)
				}
				if !strings.Contains(out, fmt.Sprintf("msg=\"restoring from checkpoint\" component=eddy checkpoint=%d\n", st.RestoredFrom)) {
					t.Fatalf("the log does not say it restores checkpoint %d:\n%s", st.RestoredFrom, out)
				}
			}
			sameLines(t, committed(t, c.Out), want)
			noPending(t, c.Out)
			if marker != "" {
				// The damaged checkpoint is kept, set aside.
				if _, err := os.Stat(filepath.Join(c.Data, "quarantine", fmt.Sprintf("%020d", newest))); err != nil {
					t.Fatalf("checkpoint %d was not quarantined: %v", newest, err)
				}
				if _, err := os.Stat(cdir); err != nil {
					t.Fatalf("the quarantined checkpoint %d was pruned: %v", newest, err)
				}
			}
		})
	}
}

// noRollback hides that the file sink can roll back: like Kafka's.
type noRollback[T any] struct{ eddy.Sink[T] }

// TestFallbackRefusedWithoutRollback: falling back past a checkpoint that
// committed output to a sink that cannot roll it back is refused, naming
// the checkpoint, why it is unusable and the sink; AllowDuplicatesOnFallback
// lets it run, saying so at Error level.
func TestFallbackRefusedWithoutRollback(t *testing.T) {
	dir := t.TempDir()
	data, out := filepath.Join(dir, "data"), filepath.Join(dir, "out")
	build := func(opts ...eddy.Option) *eddy.Env {
		env := eddy.New(append([]eddy.Option{eddy.Checkpoints(data, 10*time.Millisecond), eddy.Parallelism(1), eddy.Restarts(0, 0)}, opts...)...)
		src := eddy.FromSource(env, datagen.GPS(datagen.Events(30_000), datagen.Rate(30_000), datagen.Drivers(20)))
		eddy.ToSink(src, noRollback[datagen.GPSPoint]{file.JSONLines[datagen.GPSPoint](out)}, eddy.UID("points"))
		return env
	}
	ctx, cancel := context.WithCancel(context.Background())
	env := build(eddy.LogOutput(testWriter{t}), eddy.OnCheckpoint(func(s eddy.CheckpointStats) {
		if s.ID >= 4 {
			cancel()
		}
	}))
	if err := env.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("partial run: %v", err)
	}
	newest := maxID(manifestIDs(data))
	flipByte(t, filepath.Join(checkpointDir(data, newest), "MANIFEST"))
	err := build(eddy.LogOutput(testWriter{t})).Run(context.Background())
	if !errors.Is(err, eddy.ErrCorruptCheckpoint) || !errors.Is(err, eddy.ErrPermanent) {
		t.Fatalf("Run = %v, want a refusal", err)
	}
	for _, want := range []string{fmt.Sprintf("checkpoint %d: manifest corrupt", newest), "sinks points", "cannot roll it back"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	logs := &logBuffer{t: t}
	if err := build(eddy.LogOutput(logs), eddy.AllowDuplicatesOnFallback()).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "duplicates allowed") {
		t.Fatalf("the allowed fallback was not logged as an error:\n%s", logs.String())
	}
}
