package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/internal/inspect"
	"github.com/eddyflow/eddy/internal/restore"
	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
)

// dumpLine is one line of `eddy state dump --format json`.
type dumpLine struct {
	State    string          `json:"state"`
	Kind     string          `json:"kind"`
	KeyGroup int             `json:"key_group"`
	Key      json.RawMessage `json:"key"`
	Value    json.RawMessage `json:"value"`
}

func parseDump(t *testing.T, out string) []dumpLine {
	t.Helper()
	var lines []dumpLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l dumpLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("dump line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return lines
}

// finalTotals reads the demo's committed running totals and returns each
// driver's last (most points) line as JSON.
func finalTotals(t *testing.T, out string) map[string]struct {
	Points    int64
	DistanceM float64
} {
	t.Helper()
	type total struct {
		Points    int64
		DistanceM float64
	}
	final := map[string]struct {
		Points    int64
		DistanceM float64
	}{}
	files, _ := filepath.Glob(filepath.Join(out, "*.jsonl"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var v struct {
				Driver    string  `json:"driver"`
				Points    int64   `json:"points"`
				DistanceM float64 `json:"distance_m"`
			}
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("%s: %q: %v", f, l, err)
			}
			if v.Points > final[v.Driver].Points {
				final[v.Driver] = total{v.Points, v.DistanceM}
			}
		}
	}
	if len(final) == 0 {
		t.Fatal("no committed totals")
	}
	return final
}

// TestStateDumpEqualsJobOutput: the dumped state of the demo's distance
// operator at its final checkpoint holds, per driver, exactly the totals
// the job committed last, decoded with the stored schemas alone (this
// test never names the demo's state type), with and without the changelog
// backend (materialized parts plus the log replayed).
func TestStateDumpEqualsJobOutput(t *testing.T) {
	for _, changelog := range []bool{false, true} {
		name := "parts"
		if changelog {
			name = "changelog"
		}
		t.Run(name, func(t *testing.T) {
			data, out := demoCheckpoints(t, changelog)
			want := finalTotals(t, out)
			code, stdout, stderr := eddyRun(t, data, "state", "dump", "--data", data, "--operator", "distance",
				"--state", "last-point", "--format", "json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			lines := parseDump(t, stdout)
			if len(lines) != len(want) {
				t.Fatalf("%d keys dumped, %d drivers committed", len(lines), len(want))
			}
			for _, l := range lines {
				var driver string
				var v struct {
					Points    int64   `json:"points"`
					DistanceM float64 `json:"distance_m"`
				}
				if json.Unmarshal(l.Key, &driver) != nil || json.Unmarshal(l.Value, &v) != nil {
					t.Fatalf("line %+v", l)
				}
				w, ok := want[driver]
				if !ok || l.State != "last-point" || l.Kind != "value" || v.Points != w.Points ||
					math.Round(v.DistanceM*1000)/1000 != w.DistanceM {
					t.Errorf("driver %q: state %s = %+v, committed %+v", driver, l.State, v, w)
				}
			}
			if changelog {
				// The final checkpoint must really have had a log to replay
				// for this to test replay.
				code, js, _ := eddyRun(t, data, "checkpoints", "show", "latest", "--data", data, "--format", "json")
				if code != 0 || !strings.Contains(js, `"changelog"`) {
					t.Logf("note: the final checkpoint lists no log ranges")
				}
			}

			// One key: the same entry, alone.
			var one dumpLine
			for _, l := range lines {
				one = l
			}
			var key string
			json.Unmarshal(one.Key, &key)
			code, stdout, stderr = eddyRun(t, data, "state", "dump", "--data", data, "--operator", "distance",
				"--key", key, "--format", "json")
			got := parseDump(t, stdout)
			if code != 0 {
				t.Fatalf("--key: exit %d %s", code, stderr)
			}
			found := false
			for _, g := range got {
				if string(g.Key) != string(one.Key) {
					t.Fatalf("--key %s dumped key %s", key, g.Key)
				}
				if g.State == "last-point" {
					found = string(g.Value) == string(one.Value)
				}
			}
			if !found {
				t.Fatalf("--key %s: %s, want %s", key, stdout, one.Value)
			}
		})
	}
}

// TestStateDumpBadInput: unknown operators, states and keys, and unknown
// checkpoints, are errors naming what is known; nothing is written.
func TestStateDumpBadInput(t *testing.T) {
	data, _ := demoCheckpoints(t, false)
	for _, c := range []struct {
		args  []string
		code  int
		wants []string
	}{
		{[]string{"--operator", "nope"}, 1, []string{`operator "nope"`, `"distance"`, `"windows"`}},
		{[]string{"--operator", "distance", "--state", "nope"}, 1, []string{`state "nope"`, `"last-point"`, `"eddy.timers"`}},
		{[]string{"--operator", "distance", "--key", "no-such-driver"}, 1, []string{`key "no-such-driver"`, "holds no state"}},
		{[]string{"--operator", "distance", "--checkpoint", "12345"}, 1, []string{"checkpoint 12345 does not exist"}},
		{[]string{"--operator", "distance", "--checkpoint", "x"}, 1, []string{`checkpoint id "x"`}},
		{[]string{"--state", "x"}, 2, []string{"--operator is required"}},
		{[]string{"--operator", "distance", "--format", "xml"}, 2, []string{"--format"}},
	} {
		args := append([]string{"state", "dump", "--data", data}, c.args...)
		code, _, stderr := eddyRun(t, data, args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d: %s", c.args, code, c.code, stderr)
		}
		for _, w := range c.wants {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr lacks %q: %s", c.args, w, stderr)
			}
		}
	}
}

// TestStateDumpCorruptSchema: a part whose stored value schema is damaged
// (with a valid blob trailer and manifest checksum, so only the schema is
// wrong) fails the dump and verify, naming the part and the state.
func TestStateDumpCorruptSchema(t *testing.T) {
	data, _ := demoCheckpoints(t, false)
	ctx := context.Background()
	store, err := file.New(data)
	if err != nil {
		t.Fatal(err)
	}
	st := checkpoint.NewStorage(store, 0)
	m, _, err := st.Latest(ctx)
	if err != nil || m == nil {
		t.Fatalf("latest: %v", err)
	}
	var op *checkpoint.OperatorState
	for i := range m.Operators {
		if m.Operators[i].Name == "distance" {
			op = &m.Operators[i]
		}
	}
	p := &op.Parts[0]
	payload, err := store.Get(ctx, p.Blob)
	if err != nil {
		t.Fatal(err)
	}
	// The first schema is the key's, the second the first state's value
	// schema: damage a byte inside the latter (its CRC then fails).
	first := strings.Index(string(payload), "EDSC")
	second := first + 4 + strings.Index(string(payload[first+4:]), "EDSC")
	payload[second+12] ^= 0x55
	if err := store.Put(ctx, p.Blob, payload); err != nil {
		t.Fatal(err)
	}
	p.CRC, p.Size = blobChecksum(payload), int64(len(payload))
	m.Version = checkpoint.ManifestVersion
	mb, err := serde.MustFor[checkpoint.Manifest]().Append(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, st.ManifestName(m.ID), mb); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := eddyRun(t, data, "state", "dump", "--data", data, "--operator", "distance")
	if code != 1 || !strings.Contains(stderr, p.Blob) || !strings.Contains(stderr, `value schema of state "last-point"`) {
		t.Fatalf("dump: exit %d: %s", code, stderr)
	}
	code, stdout, _ := eddyRun(t, data, "checkpoints", "verify", "latest", "--data", data)
	if code != 1 || !strings.Contains(stdout, "FAIL "+p.Blob+": ") || !strings.Contains(stdout, `value schema of state "last-point"`) {
		t.Fatalf("verify: exit %d: %s", code, stdout)
	}
}

func blobChecksum(b []byte) uint32 { return blob.Checksum(b) }

// Types shaped like the demo's state, declared here (under other names)
// to restore checkpoints with the runtime's own restore for comparison.
type testLastPoint struct {
	Lat       float64 `proto:"1"`
	Lon       float64 `proto:"2"`
	Points    int64   `proto:"3"`
	DistanceM float64 `proto:"4,name=distance_m"`
}

type testWindowAcc struct {
	Points    int64   `proto:"1"`
	DistanceM float64 `proto:"2,name=distance_m"`
	LastLat   float64 `proto:"3,name=last_lat"`
	LastLon   float64 `proto:"4,name=last_lon"`
}

type testWinState struct {
	End int64         `proto:"1"`
	Acc testWindowAcc `proto:"2"`
}

// TestStateDumpMatchesRestore: for every checkpoint of a changelog run
// (materialized parts plus log ranges, also mid-run), the dump of each
// operator equals what the runtime's restore (internal/restore, which
// replays the log into typed state) holds: the same keys in every state
// and the same values.
func TestStateDumpMatchesRestore(t *testing.T) {
	data, _ := demoCheckpoints(t, true)
	ctx := context.Background()
	store, err := file.New(data)
	if err != nil {
		t.Fatal(err)
	}
	st := checkpoint.NewStorage(store, 0)
	ids, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replayed := 0
	for _, id := range ids {
		m, err := st.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range m.Operators {
			code, stdout, stderr := eddyRun(t, data, "state", "dump", "--data", data, "--operator", op.Name,
				"--checkpoint", fmt.Sprint(id), "--format", "json")
			if code != 0 {
				if len(op.Parts) == 0 && strings.Contains(stderr, "only parts carry the schemas") {
					continue // before any materialization: nothing carries schemas yet
				}
				t.Fatalf("checkpoint %d operator %s: exit %d %s", id, op.Name, code, stderr)
			}
			for _, l := range op.Changelog {
				if len(l.Objects) > 0 {
					replayed++
					break
				}
			}
			compareWithRestore(t, store, m, op.Name, parseDump(t, stdout))
		}
	}
	if replayed == 0 {
		t.Fatalf("no checkpoint of %v had a log to replay", ids)
	}
	t.Logf("checkpoints %v: %d operator dumps replayed a log", ids, replayed)
}

func compareWithRestore(t *testing.T, store blob.Store, m *checkpoint.Manifest, opName string, lines []dumpLine) {
	t.Helper()
	ks, _ := serde.SchemaOf[string]()
	b := state.NewBackend(state.DefaultMaxParallelism, 0, state.DefaultMaxParallelism, ks)
	var (
		last *state.Value[testLastPoint]
		wins *state.Map[int64, testWinState]
	)
	var err error
	if opName == "distance" {
		last, err = state.NewValue[testLastPoint](b, "last-point")
	} else {
		wins, err = state.NewMap[int64, testWinState](b, "windows")
	}
	if err != nil {
		t.Fatal(err)
	}
	timers, _ := state.NewList[int64](b, "eddy.timers")
	events, _ := state.NewList[int64](b, "eddy.event-timers")
	if _, _, err := restore.Keyed(context.Background(), restore.From{Manifest: m, Store: store}, opName, b); err != nil {
		t.Fatalf("checkpoint %d operator %s: restore: %v", m.ID, opName, err)
	}
	if b.Entries() != len(lines) {
		t.Fatalf("checkpoint %d operator %s: restore holds %d entries, the dump %d", m.ID, opName, b.Entries(), len(lines))
	}
	for _, l := range lines {
		var key string
		if err := json.Unmarshal(l.Key, &key); err != nil {
			t.Fatal(err)
		}
		b.SetCurrentKey([]byte(key), state.KeyGroupFor([]byte(key), state.DefaultMaxParallelism))
		var want any
		switch l.State {
		case "last-point":
			v, ok := last.Get()
			if !ok {
				t.Fatalf("checkpoint %d: key %q not restored", m.ID, key)
			}
			want = map[string]any{"lat": v.Lat, "lon": v.Lon, "points": v.Points, "distance_m": v.DistanceM}
		case "windows":
			mp := map[string]any{}
			for k, v := range wins.All() {
				mp[fmt.Sprint(k)] = map[string]any{"end": v.End, "acc": map[string]any{"points": v.Acc.Points,
					"distance_m": v.Acc.DistanceM, "last_lat": v.Acc.LastLat, "last_lon": v.Acc.LastLon}}
			}
			want = mp
		case "eddy.timers":
			want = timers.Get()
		case "eddy.event-timers":
			want = events.Get()
		default:
			t.Fatalf("unexpected state %q", l.State)
		}
		wb, _ := json.Marshal(want)
		if !sameJSONSet(string(wb), string(l.Value)) {
			t.Errorf("checkpoint %d operator %s state %s key %q: dump %s, restore %s", m.ID, opName, l.State, key, l.Value, wb)
		}
	}
}

// sameJSONSet reports whether two JSON texts hold the same value,
// whatever the order of object keys.
func sameJSONSet(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// TestStateDumpKeyReadsOnePart: a dump of one key reads only the part that
// holds the key's key group.
func TestStateDumpKeyReadsOnePart(t *testing.T) {
	data, _ := demoCheckpoints(t, false)
	ctx := context.Background()
	store, err := inspect.OpenStore(data)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := inspect.FindCheckpoint(ctx, store, "latest")
	if err != nil {
		t.Fatal(err)
	}
	key := "driver-00003"
	parts, n := -1, 0
	err = inspect.Dump(ctx, store, m, inspect.DumpOptions{Operator: "distance", State: "last-point", Key: &key,
		Progress: func(_, p, _, _ int) { parts = p }}, func(e inspect.Entry) error {
		n++
		if e.Key != key || e.KeyGroup != state.KeyGroupFor([]byte(key), 128) {
			t.Errorf("entry %+v", e)
		}
		return nil
	})
	if err != nil || n != 1 || parts != 1 {
		t.Fatalf("err %v, %d entries, %d parts read", err, n, parts)
	}
}

// TestStateDumpMissingPart: a dump of a checkpoint whose part is gone
// fails naming the part; "latest" passes over it to the newest usable
// checkpoint and says so.
func TestStateDumpMissingPart(t *testing.T) {
	data, _ := demoCheckpoints(t, false)
	ids := checkpointIDs(t, data)
	if len(ids) < 2 {
		t.Skipf("only checkpoints %v", ids)
	}
	id := ids[len(ids)-1]
	parts, _ := filepath.Glob(filepath.Join(data, "checkpoints", fmt.Sprintf("%020s", id), "distance-0-*.state"))
	if len(parts) != 1 {
		t.Fatalf("parts %v", parts)
	}
	os.Remove(parts[0])
	rel, _ := filepath.Rel(data, parts[0])
	code, _, stderr := eddyRun(t, data, "state", "dump", "--data", data, "--operator", "distance", "--checkpoint", id)
	if code != 1 || !strings.Contains(stderr, filepath.ToSlash(rel)) || !strings.Contains(stderr, "not found") {
		t.Fatalf("explicit id: exit %d %s", code, stderr)
	}
	code, _, stderr = eddyRun(t, data, "state", "dump", "--data", data, "--operator", "distance")
	if code != 0 || !strings.Contains(stderr, "note: checkpoint "+id+": 1 of its") {
		t.Fatalf("latest: exit %d %s", code, stderr)
	}
}
