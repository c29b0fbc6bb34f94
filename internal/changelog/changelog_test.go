package changelog

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/eddyflow/eddy/checkpoint"
)

// TestFinishMaterializations: a materialization that succeeded becomes the
// base and drops the older ones still uploading, so the base never goes
// back; a newer one still uploading stays; a failure counts until a
// success.
func TestFinishMaterializations(t *testing.T) {
	const end = 8
	mat := func(count int, seq uint64, uploading bool, err error) *materialization {
		m := &materialization{count: count, next: end, seq: seq, putErr: err,
			parts: []checkpoint.StatePart{{Blob: fmt.Sprintf("m%d", count)}}}
		if uploading {
			m.inFlight.Add(1)
		}
		return m
	}
	setup := func(runs ...*materialization) *Operator {
		cfg := &Config{Materialize: time.Minute}
		return &Operator{uid: "op", cfg: cfg, env: Env{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, runs: runs}
	}
	finish := func(cl *Operator) {
		t.Helper()
		if err := cl.finishMaterializations(time.Now(), end); err != nil {
			t.Fatal(err)
		}
	}
	base := func(cl *Operator) string {
		if len(cl.base) == 0 {
			return ""
		}
		return cl.base[0].Blob
	}

	// The newer one finishes first: the older, still uploading, is dropped
	// and its later success cannot replace the base.
	m1, m2 := mat(1, 10, true, nil), mat(2, 20, false, nil)
	rt := setup(m1, m2)
	finish(rt)
	if base(rt) != "m2" || rt.after != 20 || len(rt.runs) != 0 {
		t.Fatalf("base %q after %d, %d running; want m2 after 20, none running", base(rt), rt.after, len(rt.runs))
	}
	m1.inFlight.Add(-1)
	finish(rt)
	if base(rt) != "m2" {
		t.Fatalf("the older materialization replaced the base: %q", base(rt))
	}

	// The older one finishes first: it is the base until the newer one is.
	m1, m2 = mat(1, 10, false, nil), mat(2, 20, true, nil)
	rt = setup(m1, m2)
	finish(rt)
	if base(rt) != "m1" || len(rt.runs) != 1 {
		t.Fatalf("base %q, %d running; want m1, m2 running", base(rt), len(rt.runs))
	}
	m2.inFlight.Add(-1)
	finish(rt)
	if base(rt) != "m2" || rt.after != 20 || len(rt.runs) != 0 {
		t.Fatalf("base %q after %d, %d running; want m2 after 20", base(rt), rt.after, len(rt.runs))
	}

	// A failure counts; the next success resets the count.
	rt = setup(mat(1, 10, false, errors.New("put failed")), mat(2, 20, false, nil))
	rt.failures = 1
	finish(rt)
	if base(rt) != "m2" || rt.failures != 0 {
		t.Fatalf("base %q, %d failures; want m2, 0", base(rt), rt.failures)
	}
	// An older failure settled with a newer success does not count, even
	// as a third.
	rt = setup(mat(1, 10, false, errors.New("put failed")), mat(2, 20, false, nil))
	rt.failures = 2
	finish(rt)
	if base(rt) != "m2" || rt.failures != 0 {
		t.Fatalf("base %q, %d failures; want m2, 0", base(rt), rt.failures)
	}
	// A third failure in a row fails the job.
	rt = setup(mat(3, 30, false, errors.New("put failed")))
	rt.failures = 2
	if err := rt.finishMaterializations(time.Now(), end); err == nil {
		t.Fatal("a third failure in a row did not fail the job")
	}
}

// TestShouldStartMaterialization: a first materialization starts when due
// or when the log since the base is heavy; a second only while the newest
// has serialized everything and the log appended during its upload wait
// alone is heavy; never a third.
func TestShouldStartMaterialization(t *testing.T) {
	const end = 8
	now := time.Now()
	cl := &Operator{cfg: &Config{LogRatio: 0.25, MinInterval: time.Second, Materialize: time.Hour}, nextAt: now.Add(time.Hour),
		base: []checkpoint.StatePart{{Size: 4 << 20}}, baseSize: 4 << 20} // heavy: 1 MiB of log
	if cl.shouldStart(now, end, 0) {
		t.Fatal("started before it was due, without log")
	}
	cl.appended = 2 << 20
	if !cl.shouldStart(now, end, 0) {
		t.Fatal("did not start with 2 MiB of log on a 4 MiB base")
	}
	m := &materialization{next: 4, appended: 2 << 20}
	cl.runs = []*materialization{m}
	cl.appended = 8 << 20
	if cl.shouldStart(now, end, 0) {
		t.Fatal("a second started while the first still serializes")
	}
	m.next, m.serialized = end, 7<<20+512<<10
	if cl.shouldStart(now, end, 0) {
		t.Fatal("a second started after half a MiB of log during the upload wait")
	}
	m.serialized = 6 << 20
	if !cl.shouldStart(now, end, 0) {
		t.Fatal("no second started after 2 MiB of log during the upload wait")
	}
	// Against the newest's state when it is larger than the base (a fresh
	// job has none): 2 MiB of log is light for 16 MiB.
	m.parts, m.size = []checkpoint.StatePart{{Size: 16 << 20}}, 16<<20
	if cl.shouldStart(now, end, 0) {
		t.Fatal("a second started after 2 MiB of log during the upload wait of a 16 MiB state")
	}
	m.parts, m.size = nil, 0
	cl.runs = append(cl.runs, &materialization{next: end, serialized: 0})
	if cl.shouldStart(now, end, 0) {
		t.Fatalf("a third started (at most %d)", maxMaterializations)
	}
}

// TestLogHeavyCountsRedundantBytes: a log that only adds entries does not
// start a materialization early, however long; a log that updates or
// deletes entries does once its redundant bytes pass the ratio.
func TestLogHeavyCountsRedundantBytes(t *testing.T) {
	const end = 8
	now := time.Now()
	// A 4 MiB base of 4096 entries of 1 KiB.
	cl := &Operator{cfg: &Config{LogRatio: 0.25, MinInterval: time.Second, Materialize: time.Hour}, nextAt: now.Add(time.Hour),
		base: []checkpoint.StatePart{{Size: 4 << 20}}, baseSize: 4 << 20, baseEntries: 4096}
	cl.appended = 8 << 20 // 8 MiB of log: twice the base
	if cl.shouldStart(now, end, 4096+8192) {
		t.Error("started early for 8 MiB of log that added 8192 entries of 1 KiB")
	}
	if !cl.shouldStart(now, end, 4096) {
		t.Error("did not start for 8 MiB of log that updated entries")
	}
	cl.appended = 1 << 20
	if cl.shouldStart(now, end, 4096+1024-64) {
		t.Error("started early for 1 MiB of log with 64 of its 1024 entries updates (6%)")
	}
	if !cl.shouldStart(now, end, 4096-1024) {
		t.Error("did not start after a quarter of the entries were deleted")
	}
	// The second materialization: against the newest's bytes per entry.
	m := &materialization{next: end, serialized: 1 << 20, size: 16 << 20, entries: 16384}
	cl.runs = []*materialization{m}
	cl.appended = 1<<20 + 8<<20
	if cl.shouldStart(now, end, 16384+8192) {
		t.Error("a second started for log that added entries during the upload wait")
	}
	if !cl.shouldStart(now, end, 16384) {
		t.Error("no second started for 8 MiB of updates during the upload wait of a 16 MiB state")
	}
}

// TestMinIntervalBoundsEarlyMaterializations: a heavy log does not start a
// materialization within MinInterval of the previous start (a tiny busy
// state would be rewritten many times a second), the interval does, and
// MinInterval is capped at the interval.
func TestMinIntervalBoundsEarlyMaterializations(t *testing.T) {
	const end = 8
	now := time.Now()
	cl := &Operator{cfg: &Config{LogRatio: 0.25, MinInterval: 2 * time.Second, Materialize: time.Hour}, nextAt: now.Add(time.Hour),
		base: []checkpoint.StatePart{{Size: 4 << 20}}, baseSize: 4 << 20, appended: 8 << 20, lastStart: now.Add(-time.Second)}
	if cl.shouldStart(now, end, 0) {
		t.Fatal("a heavy log started a materialization 1 s after the last one (MinInterval 2 s)")
	}
	if !cl.shouldStart(now.Add(time.Second), end, 0) {
		t.Fatal("a heavy log did not start a materialization 2 s after the last one")
	}
	cl.nextAt = now
	if !cl.shouldStart(now, end, 0) {
		t.Fatal("the interval did not start a materialization within MinInterval")
	}
	cl.nextAt, cl.cfg.Materialize = now.Add(time.Hour), 500*time.Millisecond
	if !cl.shouldStart(now, end, 0) {
		t.Fatal("MinInterval was not capped at the interval (500 ms)")
	}
}

// TestWithDBKeyGroups: a restored Pebble part from before databases
// recorded their key groups is carried with its own recorded as its
// database's, without changing the restored manifest's part; a part that
// records them, and a heap part, are carried as they are.
func TestWithDBKeyGroups(t *testing.T) {
	old := &checkpoint.PebblePart{Files: []checkpoint.PebbleFile{{Name: "000005.sst"}}}
	narrowed := &checkpoint.PebblePart{KeyGroupStart: 0, KeyGroupEnd: 16}
	in := []checkpoint.StatePart{
		{KeyGroupStart: 4, KeyGroupEnd: 8, Pebble: old},
		{KeyGroupStart: 8, KeyGroupEnd: 12, Pebble: narrowed},
		{KeyGroupStart: 12, KeyGroupEnd: 16, Blob: "heap"},
	}
	out := withDBKeyGroups(in)
	if s, e := out[0].DBKeyGroups(); s != 4 || e != 8 || out[0].Pebble.KeyGroupEnd != 8 || len(out[0].Pebble.Files) != 1 {
		t.Fatalf("old part carried as %+v (%+v)", out[0], out[0].Pebble)
	}
	if old.KeyGroupEnd != 0 || in[0].Pebble != old {
		t.Fatal("the restored part was modified")
	}
	// Narrowed to a subtask's key groups, it still says what it holds.
	p := out[0]
	p.KeyGroupStart = 6
	if s, e := p.DBKeyGroups(); s != 4 || e != 8 {
		t.Fatalf("narrowed, the database's key groups are [%d, %d)", s, e)
	}
	if out[1].Pebble != narrowed || out[2].Pebble != nil {
		t.Fatalf("parts carried as %+v, %+v", out[1], out[2])
	}
}
