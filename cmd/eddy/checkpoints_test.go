package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/internal/demojob"
	"github.com/eddyflow/eddy/internal/inspect"
)

// demoCheckpoints runs the demo job to completion, with the changelog
// backend or without, and returns its checkpoint store and committed
// output directory.
func demoCheckpoints(t *testing.T, changelog bool) (data, out string) {
	t.Helper()
	root := t.TempDir()
	c := demojob.Config{Seed: 11, Events: 6000, Drivers: 30, Data: filepath.Join(root, "data"), Out: filepath.Join(root, "out"),
		CheckpointInterval: 30 * time.Millisecond, Parallelism: 2, EmitEvery: 8, Rate: 40_000}
	if changelog {
		c.Changelog, c.Materialize, c.Rate = true, 40*time.Millisecond, 30_000
	}
	if err := demojob.Env(c, eddy.LogOutput(io.Discard)).Run(context.Background()); err != nil {
		t.Fatalf("demo run: %v", err)
	}
	return c.Data, c.Out
}

// storeHash hashes every file (name, mode, bytes) and directory under dir:
// a read-only command must leave it equal.
func storeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(h, "%s %v\n", rel, d.Type())
		if !d.IsDir() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// eddyRun runs the CLI and checks the store is unchanged by it.
func eddyRun(t *testing.T, data string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	before := storeHash(t, data)
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	if after := storeHash(t, data); after != before {
		t.Fatalf("eddy %s changed the store", strings.Join(args, " "))
	}
	return code, o.String(), e.String()
}

func checkpointIDs(t *testing.T, data string) []string {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(data, "checkpoints", "*", "MANIFEST"))
	var ids []string
	for _, m := range ms {
		ids = append(ids, strings.TrimLeft(filepath.Base(filepath.Dir(m)), "0"))
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		t.Fatal("the demo left no checkpoint")
	}
	return ids
}

func TestCheckpointsListShowVerify(t *testing.T) {
	data, _ := demoCheckpoints(t, false)
	ids := checkpointIDs(t, data)
	id := ids[len(ids)-1]

	code, out, errs := eddyRun(t, data, "checkpoints", "list", "--data", data)
	if code != 0 || !strings.Contains(out, "complete") || !strings.Contains(out, "gps ") || !strings.Contains(out, "\n"+id+" ") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = eddyRun(t, data, "checkpoints", "list", "--data", "file://"+data, "--format", "json")
	var list []inspect.Summary
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != len(ids) || list[0].Job != "eddy-demo" {
		t.Fatalf("list json: exit %d %v\n%s%s", code, list, out, errs)
	}

	code, out, errs = eddyRun(t, data, "checkpoints", "show", id, "--data", data)
	for _, want := range []string{"job         eddy-demo", "parameter seed=\"11\"", "split 0: done", "distance  (128 key groups, parallelism 2)",
		"distance-0-", "state \"last-point\" (value)", "message lastPoint {", "double distance_m = 4;", "int64 points = 3;",
		"map<int64, winState", "file-jsonlines:"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q", want)
		}
	}
	if code != 0 || t.Failed() {
		t.Fatalf("show: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = eddyRun(t, data, "checkpoints", "show", "latest", "--data", data, "--format", "json")
	var d inspect.Details
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || fmt.Sprint(d.ID) != id || len(d.Operators) != 2 ||
		d.Operators[0].KeySchema == nil || len(d.Operators[0].States) == 0 || d.Operators[0].States[0].ValueSchema == nil {
		t.Fatalf("show json: exit %d %+v\n%s", code, d, out)
	}

	code, out, errs = eddyRun(t, data, "checkpoints", "verify", id, "--data", data)
	if code != 0 || !strings.Contains(out, "checkpoint "+id+": ok") {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
	}

	// Unknown ids and stores.
	code, _, errs = eddyRun(t, data, "checkpoints", "show", "999", "--data", data)
	if code != 1 || !strings.Contains(errs, "checkpoint 999 does not exist") || !strings.Contains(errs, id) {
		t.Fatalf("unknown id: exit %d %s", code, errs)
	}
	code, _, errs = eddyRun(t, data, "checkpoints", "verify", "999", "--data", data)
	if code != 1 || !strings.Contains(errs, "checkpoint 999 does not exist") {
		t.Fatalf("verify unknown id: exit %d %s", code, errs)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	if code, _, errs = eddyRun(t, data, "checkpoints", "list", "--data", missing); code != 1 || !strings.Contains(errs, "does not exist") {
		t.Fatalf("missing store: exit %d %s", code, errs)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("list created the store directory")
	}
	if code, _, _ = eddyRun(t, data, "checkpoints", "show", "--data", data); code != 2 {
		t.Fatalf("show without id: exit %d", code)
	}
}

// TestCheckpointsVerifyFindsDamage: each kind of damage makes verify exit 1
// naming the object and what is wrong with it.
func TestCheckpointsVerifyFindsDamage(t *testing.T) {
	type damage struct {
		name  string
		do    func(t *testing.T, dir string) string // returns the object named in the report
		wants []string
	}
	part := func(dir, op string, sub int) string {
		ms, _ := filepath.Glob(filepath.Join(dir, "checkpoints", "*", fmt.Sprintf("%s-%d-*.state", op, sub)))
		sort.Strings(ms)
		return ms[len(ms)-1]
	}
	rel := func(dir, path string) string { r, _ := filepath.Rel(dir, path); return filepath.ToSlash(r) }
	for _, dmg := range []damage{
		{"flipped byte in a state part", func(t *testing.T, dir string) string {
			p := part(dir, "distance", 0)
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x40
			os.WriteFile(p, b, 0o644)
			return rel(dir, p)
		}, []string{"corrupt: checksum mismatch"}},
		{"deleted state part", func(t *testing.T, dir string) string {
			p := part(dir, "windows", 1)
			os.Remove(p)
			return rel(dir, p)
		}, []string{"missing"}},
		{"another valid part under the name", func(t *testing.T, dir string) string {
			p := part(dir, "distance", 0)
			b, _ := os.ReadFile(part(dir, "distance", 1))
			os.WriteFile(p, b, 0o644)
			return rel(dir, p)
		}, []string{"the manifest records", "crc32c"}},
		{"corrupt manifest", func(t *testing.T, dir string) string {
			ms, _ := filepath.Glob(filepath.Join(dir, "checkpoints", "*", "MANIFEST"))
			sort.Strings(ms)
			p := ms[len(ms)-1]
			b, _ := os.ReadFile(p)
			b[3] ^= 0xff
			os.WriteFile(p, b, 0o644)
			return rel(dir, p)
		}, []string{"corrupt: checksum mismatch"}},
	} {
		t.Run(dmg.name, func(t *testing.T) {
			data, _ := demoCheckpoints(t, false)
			ids := checkpointIDs(t, data)
			id := ids[len(ids)-1]
			file := dmg.do(t, data)
			code, out, errs := eddyRun(t, data, "checkpoints", "verify", id, "--data", data)
			if code != 1 || !strings.Contains(out, "FAIL "+file+": ") {
				t.Fatalf("exit %d, want 1 naming %s:\n%s%s", code, file, out, errs)
			}
			for _, w := range dmg.wants {
				if !strings.Contains(out, w) {
					t.Errorf("report lacks %q:\n%s", w, out)
				}
			}
			// list still lists, and says what is wrong with a manifest.
			if code, out, errs := eddyRun(t, data, "checkpoints", "list", "--data", data); code != 0 {
				t.Fatalf("list: exit %d\n%s%s", code, out, errs)
			} else if strings.HasSuffix(file, "MANIFEST") && !strings.Contains(out, "unreadable") {
				t.Fatalf("list of a corrupt manifest:\n%s", out)
			}
		})
	}
}

// TestCheckpointsVerifyChangelog: a checkpoint of the changelog backend
// (materialized parts plus log ranges) verifies, and a damaged log object
// is named.
func TestCheckpointsVerifyChangelog(t *testing.T) {
	data, _ := demoCheckpoints(t, true)
	// The newest checkpoint that lists log objects.
	var id, logObj string
	ids := checkpointIDs(t, data)
	for i := len(ids) - 1; i >= 0 && logObj == ""; i-- {
		code, js, errs := eddyRun(t, data, "checkpoints", "show", ids[i], "--data", data, "--format", "json")
		var d inspect.Details
		if code != 0 || json.Unmarshal([]byte(js), &d) != nil {
			t.Fatalf("show %s: exit %d %s", ids[i], code, errs)
		}
		for _, op := range d.Operators {
			for _, l := range op.Changelog {
				if len(l.Objects) > 0 {
					id, logObj = ids[i], l.Objects[0]
				}
			}
		}
	}
	if logObj == "" {
		t.Fatalf("no checkpoint of %v lists log objects", ids)
	}
	code, out, errs := eddyRun(t, data, "checkpoints", "verify", id, "--data", data)
	if code != 0 || !strings.Contains(out, ": ok") || strings.Contains(out, " 0 log objects") {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = eddyRun(t, data, "checkpoints", "show", id, "--data", data)
	if code != 0 || !strings.Contains(out, "    log     subtask") || !strings.Contains(out, "watermark key groups") {
		t.Fatalf("show: exit %d\n%s%s", code, out, errs)
	}
	p := filepath.Join(data, filepath.FromSlash(logObj))
	b, _ := os.ReadFile(p)
	b[10] ^= 1
	os.WriteFile(p, b, 0o644)
	code, out, _ = eddyRun(t, data, "checkpoints", "verify", id, "--data", data)
	if code != 1 || !strings.Contains(out, "FAIL "+logObj+": corrupt") {
		t.Fatalf("damaged log object: exit %d\n%s", code, out)
	}
}
