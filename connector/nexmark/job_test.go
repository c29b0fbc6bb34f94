package nexmark_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/connector/nexmark"
)

// TestInAJob runs the source in an Eddy job at parallelism 2 with
// checkpoints, shuffles the events by kind and writes them with the
// exactly-once file sink: every event arrives once, equal to
// Source.Event.
func TestInAJob(t *testing.T) {
	const n = 5_000
	src, err := nexmark.New(nexmark.Seed(3), nexmark.Events(n), nexmark.Rate(1000), nexmark.Splits(5))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(io.Discard), eddy.Checkpoints("file://"+t.TempDir(), 0))
	events := eddy.FromSource(env, src, eddy.UID("nexmark"))
	byKind := eddy.Reduce(eddy.KeyBy(events, func(e *nexmark.Event) int32 { return int32(e.Kind) }),
		func(_, e nexmark.Event) nexmark.Event { return e }) // the latest event of its kind, through keyed state
	eddy.ToSink(byKind, file.JSONLines[nexmark.Event](out))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, n)
	files, _ := filepath.Glob(filepath.Join(out, "*.jsonl"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e nexmark.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
			i := (e.DateTime() - nexmark.DefaultBaseTime.UnixMilli()) // 1 ms per event at Rate(1000)
			if i < 0 || i >= n || seen[i] {
				t.Fatalf("event %d out of range or twice", i)
			}
			seen[i] = true
			if want := src.Event(i); !reflect.DeepEqual(e, want) {
				t.Fatalf("event %d: %+v, want %+v", i, e, want)
			}
		}
		fh.Close()
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("event %d missing", i)
		}
	}
}
