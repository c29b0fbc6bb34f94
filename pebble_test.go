package eddy_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/connector/datagen"
	eddyfile "github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/state"
	"github.com/eddyflow/eddy/state/pebble"
)

// probeOut is one output line of stateProbe: what the key's states held
// after one of its records.
type probeOut struct {
	Driver string  `json:"driver" proto:"1"`
	N      int64   `json:"n" proto:"2"`
	Bucket int64   `json:"bucket" proto:"3"`
	Recent float64 `json:"recent" proto:"4"`
	Keys   int64   `json:"keys" proto:"5"`
}

// stateProbe uses every kind of state per driver: a count (Value), points
// per speed bucket (Map), the last speeds (List, added to and replaced)
// and a running sum of the bucket counts (Reducing).
type stateProbe struct {
	n      *state.Value[int64]
	bucket *state.Map[int32, int64]
	recent *state.List[float32]
	sum    *state.Reducing[int64]
}

func (f *stateProbe) Open(ctx *eddy.OpenContext) error {
	var err error
	if f.n, err = state.NewValue[int64](ctx.State, "n"); err != nil {
		return err
	}
	if f.bucket, err = state.NewMap[int32, int64](ctx.State, "buckets"); err != nil {
		return err
	}
	if f.recent, err = state.NewList[float32](ctx.State, "recent"); err != nil {
		return err
	}
	f.sum, err = state.NewReducing[int64](ctx.State, "sum", func(a, b int64) int64 { return a + b })
	return err
}

func (f *stateProbe) Process(ctx *eddy.Context[string, probeOut], p *datagen.GPSPoint) error {
	n, _ := f.n.Get()
	n++
	f.n.Update(n)
	b := int32(p.SpeedKmh) / 10
	c, _ := f.bucket.Get(b)
	c++
	if c%7 == 0 {
		f.bucket.Delete(b) // maps shrink, too
	} else {
		f.bucket.Put(b, c)
	}
	f.recent.Add(p.SpeedKmh)
	if xs := f.recent.Get(); len(xs) > 4 {
		f.recent.Update(xs[len(xs)-3:])
	}
	sum := 0.0
	for _, x := range f.recent.Get() {
		sum += float64(x)
	}
	f.sum.Add(c)
	s, _ := f.sum.Get()
	ctx.Emit(probeOut{Driver: p.DriverID, N: n, Bucket: c, Recent: float64(int64(sum * 100)), Keys: s + int64(f.bucket.Len())})
	return nil
}

// probeJob is the job the Pebble tests run: 60 000 GPS points of 400
// drivers through stateProbe, committed exactly once to out.
type probeJob struct {
	data, out string
	par       int
	pebbleDir string              // "": the heap backend
	pool      []pebble.PoolOption // more options of the Pebble pool
	// gate, when not 0, holds every split of the source once it reaches
	// this event index, so that the run cannot finish: a test cancels it
	// once blocked says every split waits.
	gate    int64
	blocked *atomic.Int64
	lift    *atomic.Bool // set: the gate is gone
	// settle is how many checkpoints complete after every split waits at
	// the gate before the run is cancelled (0: 2).
	settle int
	// fail, when set, makes the probe fail its next record once.
	fail *atomic.Bool
	// materialize, when not 0, turns the changelog state backend on,
	// materializing this often.
	materialize time.Duration
	// until, if set, must hold of the newest checkpoint too before the run
	// is cancelled (materializations take a while on a loaded machine);
	// at most 1000 checkpoints at the gate are waited for.
	until func(m *checkpoint.Manifest) bool
}

// failingProbe is stateProbe failing one record once fail is set.
type failingProbe struct {
	stateProbe
	fail *atomic.Bool
}

func (f *failingProbe) Process(ctx *eddy.Context[string, probeOut], p *datagen.GPSPoint) error {
	if f.fail.CompareAndSwap(true, false) {
		return errors.New("the probe fails once, as asked")
	}
	return f.stateProbe.Process(ctx, p)
}

// gatedSource is a source whose splits stop (Idle) at the event index
// gate, counting in blocked the splits that have reached it.
type gatedSource struct {
	eddy.Source[datagen.GPSPoint]
	gate    int64
	blocked *atomic.Int64
	lift    *atomic.Bool
}

func (g gatedSource) OpenSplit(ctx context.Context, split int, pos []byte) (eddy.SplitReader[datagen.GPSPoint], error) {
	r, err := g.Source.OpenSplit(ctx, split, pos)
	return &gatedReader{SplitReader: r, src: g}, err
}

type gatedReader struct {
	eddy.SplitReader[datagen.GPSPoint]
	src     gatedSource
	stopped bool
}

func (r *gatedReader) Next(rec *datagen.GPSPoint) (eddy.ReadStatus, error) {
	if pos, n := binary.Uvarint(r.Position()); n > 0 && int64(pos) >= r.src.gate && (r.src.lift == nil || !r.src.lift.Load()) {
		if !r.stopped {
			r.stopped = true
			r.src.blocked.Add(1)
		}
		return eddy.Idle, nil
	}
	return r.SplitReader.Next(rec)
}

func (j probeJob) env(opts ...eddy.Option) *eddy.Env {
	base := []eddy.Option{eddy.Parallelism(j.par), eddy.Checkpoints(j.data, 10*time.Millisecond), eddy.Restarts(0, 0), eddy.MaxParallelism(64)}
	if j.pebbleDir != "" {
		base = append(base, eddy.StateBackend(eddy.Pebble(j.pebbleDir, append([]pebble.PoolOption{pebble.Memory(64 << 20)}, j.pool...)...)))
	}
	if j.materialize > 0 {
		base = append(base, eddy.Changelog(j.materialize))
	}
	env := eddy.New(append(base, opts...)...)
	var src eddy.Source[datagen.GPSPoint] = datagen.GPS(datagen.Seed(9), datagen.Events(60_000), datagen.Drivers(400))
	if j.gate > 0 {
		src = gatedSource{Source: src, gate: j.gate, blocked: j.blocked, lift: j.lift}
	}
	pts := eddy.FromSource(env, src, eddy.Named("gps"))
	keyed := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
	var fn eddy.KeyedFunc[string, datagen.GPSPoint, probeOut] = &stateProbe{}
	if j.fail != nil {
		fn = &failingProbe{fail: j.fail}
	}
	out := eddy.Process[string, datagen.GPSPoint, probeOut](keyed, fn, eddy.Named("probe"))
	eddy.ToSink(out, eddyfile.JSONLines[probeOut](j.out), eddy.Named("out"))
	return env
}

// runUntil runs j up to event index gate of each split (0: to the end),
// cancelling it once every split waits at the gate and j.settle (default
// two) checkpoints completed since; it reports whether the job finished.
func (j probeJob) runUntil(t *testing.T, gate int64, opts ...eddy.Option) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j.gate, j.blocked = gate, new(atomic.Int64)
	splits := int64(datagen.GPS().Splits())
	n, settle := 0, max(j.settle, 2)
	err := j.env(append([]eddy.Option{eddy.LogOutput(&logBuf{}), eddy.OnCheckpoint(func(eddy.CheckpointStats) {
		if j.blocked.Load() < splits {
			return
		}
		if n++; n == settle || n > settle && n <= 1000 && j.until != nil {
			if n < 1000 && j.until != nil && !j.until(latestManifest(t, j.data)) {
				return
			}
			cancel()
		}
	})}, opts...)...).Run(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("parallelism %d: %v", j.par, err)
	}
	return err == nil
}

// probeReference is the output of the probe job run uninterrupted on the
// heap.
func probeReference(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	j := probeJob{data: filepath.Join(dir, "data"), out: filepath.Join(dir, "out"), par: 2}
	if !j.runUntil(t, 0) {
		t.Fatal("the reference run did not finish")
	}
	return readLines(t, j.out)
}

func sameOutput(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("line %d: %s, want %s", i, got[i], want[i])
		}
	}
}

// TestPebbleCancelResumeRescale runs the probe job on Pebble, cancelled
// after a few checkpoints and resumed, at parallelism 2, then 3, then 1
// (and around again until it finishes): its output equals the heap's
// uninterrupted run, line for line.
func TestPebbleCancelResumeRescale(t *testing.T) {
	want := probeReference(t)
	dir := t.TempDir()
	j := probeJob{data: filepath.Join(dir, "data"), out: filepath.Join(dir, "out"), pebbleDir: filepath.Join(dir, "pebble")}
	for i, par := range []int{2, 3, 1} {
		j.par = par
		if i == 2 {
			// The retained checkpoints are the last three of five taken
			// while the source waits: nothing is written between them, so
			// they share their SSTs unless retention or the upload of
			// unchanged files is broken.
			j.settle = 5
		}
		if j.runUntil(t, int64(i+1)*15_000) {
			t.Fatalf("run %d finished though its source waits at a gate", i)
		}
	}
	checkPebbleRetention(t, j.data, true)
	j.par, j.settle = 2, 0
	if !j.runUntil(t, 0) {
		t.Fatal("the last run did not finish")
	}
	sameOutput(t, readLines(t, j.out), want)
	// Compactions may have rewritten every file between the final run's
	// checkpoints, so only what is kept and deleted is checked here.
	checkPebbleRetention(t, j.data, false)
}

// TestPebbleUninterrupted runs the probe job on Pebble without a
// cancellation: the output is the heap's.
func TestPebbleUninterrupted(t *testing.T) {
	want := probeReference(t)
	dir := t.TempDir()
	j := probeJob{data: filepath.Join(dir, "data"), out: filepath.Join(dir, "out"), pebbleDir: filepath.Join(dir, "pebble"), par: 3}
	if !j.runUntil(t, 0) {
		t.Fatal("did not finish")
	}
	sameOutput(t, readLines(t, j.out), want)
}

// checkPebbleRetention prunes the checkpoint storage data as the next
// run's first checkpoint would and checks what retention left: every
// Pebble object a retained manifest lists exists, SST
// objects are shared by several retained checkpoints, and no Pebble object
// of a checkpoint up to the newest is left that no retained manifest lists.
// SST sharing is checked when shared is set.
func checkPebbleRetention(t *testing.T, data string, shared bool) {
	t.Helper()
	ctx := context.Background()
	store, err := file.New(data)
	if err != nil {
		t.Fatal(err)
	}
	st := checkpoint.NewStorage(store, 3)
	ids, err := st.List(ctx)
	if err != nil || len(ids) == 0 {
		t.Fatalf("checkpoints %v: %v", ids, err)
	}
	// A job prunes after a checkpoint only if no prune is running, and a
	// stopped job leaves the rest to the next run's first prune: do it.
	newest, err := st.Load(ctx, ids[len(ids)-1])
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Prune(ctx, newest); err != nil {
		t.Fatal(err)
	}
	if ids, err = st.List(ctx); err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	kept := map[string]bool{} // objects of materializations in flight
	for _, id := range ids {
		m, err := st.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range m.Keep {
			kept[k] = true
		}
		for _, op := range m.Operators {
			for _, p := range op.Parts {
				if p.Pebble == nil {
					t.Fatalf("checkpoint %d operator %s: a part without Pebble files", id, op.Name)
				}
				seen := map[string]bool{} // a database carried by two subtasks counts once
				for _, f := range p.Pebble.Files {
					if seen[f.Object] {
						continue
					}
					seen[f.Object] = true
					listed[f.Object]++
					if !slices.Contains(m.Files, f.Object) {
						t.Fatalf("checkpoint %d: %s is not in Files", id, f.Object)
					}
				}
			}
		}
	}
	names, err := store.List(ctx, "checkpoints/")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
		// Objects of a newer id belong to a checkpoint still to come (a
		// materialization after the last one): the next prune decides.
		if id, err := strconv.ParseUint(strings.SplitN(strings.TrimPrefix(n, "checkpoints/"), "/", 2)[0], 10, 64); err == nil && id > ids[len(ids)-1] {
			continue
		}
		if strings.Contains(n, ".pebble/") && listed[n] == 0 && !kept[n] {
			t.Errorf("%s is left, though no retained checkpoint (%v) lists it", n, ids)
		}
	}
	sharedSSTs := 0
	for o, n := range listed {
		if !have[o] {
			t.Errorf("%s is listed by a retained checkpoint but gone", o)
		}
		if n > 1 && strings.HasSuffix(o, ".sst") {
			sharedSSTs++
		}
	}
	if shared && sharedSSTs == 0 && len(ids) > 1 {
		t.Errorf("no SST object is shared by the %d retained checkpoints", len(ids))
	}
}

// TestHeapCheckpointResumesOnPebble cancels the probe job on the heap and
// resumes it on Pebble (whose databases load the heap snapshot parts):
// the output is the uninterrupted run's. The other way round, a
// checkpoint with Pebble files refuses to restore into the heap, with
// ErrIncompatibleState and a message saying why.
func TestHeapCheckpointResumesOnPebble(t *testing.T) {
	want := probeReference(t)
	dir := t.TempDir()
	j := probeJob{data: filepath.Join(dir, "data"), out: filepath.Join(dir, "out"), par: 2}
	if j.runUntil(t, 20_000) {
		t.Fatal("the heap run finished before it was cancelled")
	}
	j.pebbleDir, j.par = filepath.Join(dir, "pebble"), 3
	if j.runUntil(t, 40_000) {
		t.Fatal("the Pebble run finished before it was cancelled")
	}
	// Now the newest checkpoint holds Pebble files: the heap refuses it.
	heap := j
	heap.pebbleDir = ""
	err := heap.env(eddy.LogOutput(&logBuf{})).Run(context.Background())
	if !errors.Is(err, eddy.ErrIncompatibleState) || !strings.Contains(err.Error(), "Pebble") {
		t.Fatalf("heap restore of a Pebble checkpoint: %v", err)
	}
	if !j.runUntil(t, 0) {
		t.Fatal("did not finish")
	}
	sameOutput(t, readLines(t, j.out), want)
}

// TestPebbleMetrics scrapes a Pebble job's metrics while it runs: each
// keyed subtask's database reports its health under its operator and
// subtask, the shared block cache its lookups, and client_golang's linter
// finds nothing to fault.
func TestPebbleMetrics(t *testing.T) {
	dir := t.TempDir()
	j := probeJob{data: filepath.Join(dir, "data"), out: filepath.Join(dir, "out"), pebbleDir: filepath.Join(dir, "pebble"), par: 3,
		gate: 30_000, blocked: new(atomic.Int64)}
	reg := prometheus.NewPedanticRegistry()
	scraped := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	env := j.env(eddy.LogOutput(&logBuf{}), eddy.Metrics(reg), eddy.OnCheckpoint(func(eddy.CheckpointStats) {
		if n++; n != 3 {
			return
		}
		defer cancel()
		mfs, err := reg.Gather()
		if err != nil {
			scraped <- err
			return
		}
		series := map[string]int{}
		for _, mf := range mfs {
			series[mf.GetName()] = len(mf.GetMetric())
			if mf.GetName() == "eddy_pebble_disk_bytes" {
				for _, m := range mf.GetMetric() {
					if m.GetGauge().GetValue() <= 0 {
						scraped <- fmt.Errorf("a database on no disk: %v", m)
						return
					}
				}
			}
		}
		for _, name := range []string{"eddy_pebble_l0_sublevels", "eddy_pebble_l0_files", "eddy_pebble_compaction_debt_bytes", "eddy_pebble_disk_bytes", "eddy_pebble_memtable_bytes"} {
			if series[name] != 3 {
				scraped <- fmt.Errorf("%s: %d series, want one per keyed subtask (3)", name, series[name])
				return
			}
		}
		if series["eddy_pebble_block_cache_lookups_total"] != 2 {
			scraped <- fmt.Errorf("block cache lookups: %d series", series["eddy_pebble_block_cache_lookups_total"])
			return
		}
		problems, err := testutil.GatherAndLint(reg, "eddy_pebble_l0_sublevels", "eddy_pebble_disk_bytes", "eddy_pebble_block_cache_lookups_total")
		if err == nil && len(problems) > 0 {
			err = fmt.Errorf("lint: %v", problems)
		}
		scraped <- err
	}))
	if err := env.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	select {
	case err := <-scraped:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("the job ended before its third checkpoint, though its source waits at a gate")
	}
}

// TestPebbleDirDeletedRestores deletes the local databases of a running
// Pebble job: the job fails with the Pebble directory named, restarts from
// its last checkpoint into fresh databases, and its output is still the
// uninterrupted run's.
func TestPebbleDirDeletedRestores(t *testing.T) {
	want := probeReference(t)
	dir := t.TempDir()
	logs := &logBuf{}
	j := probeJob{data: filepath.Join(dir, "data"), out: filepath.Join(dir, "out"), pebbleDir: filepath.Join(dir, "pebble"), par: 2,
		gate: 30_000, blocked: new(atomic.Int64), lift: new(atomic.Bool)}
	splits := int64(datagen.GPS().Splits())
	n := 0
	var deleted []string
	env := j.env(eddy.LogOutput(logs), eddy.Restarts(2, 0), eddy.OnCheckpoint(func(eddy.CheckpointStats) {
		if j.lift.Load() || j.blocked.Load() < splits {
			return
		}
		if n++; n < 2 {
			return
		}
		// Every database of the attempt (and the local checkpoints kept
		// next to them), while the source waits; then the records flow
		// again.
		all, _ := filepath.Glob(filepath.Join(j.pebbleDir, "run-*", "*", "probe-*"))
		for _, d := range all {
			os.RemoveAll(d)
			if !strings.Contains(filepath.Base(d), ".checkpoint-") {
				deleted = append(deleted, d)
			}
		}
		j.lift.Store(true)
	}))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 2 {
		t.Fatalf("deleted %v, want the 2 databases of the probe operator", deleted)
	}
	if st := env.Stats(); st.Restarts < 1 {
		t.Fatalf("no restart after the databases were deleted: %+v", st)
	}
	if !strings.Contains(logs.String(), "pebble: state directory") {
		t.Fatalf("the failure does not name the state directory:\n%s", logs.String())
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "job failed") {
			t.Log(l)
		}
	}
	sameOutput(t, readLines(t, j.out), want)
}

// TestPebbleManifestFullRestores fails one write of a MANIFEST of a
// running Pebble job's databases with ENOSPC, as a full disk does. Pebble
// holds that fatal (its own logger would end the process): the job's
// attempt fails instead, naming the database's directory, the MANIFEST and
// the full disk; it restarts from its last checkpoint into new databases
// (the failed one is not used again, though the disk has room again at
// once), and its output is the uninterrupted run's.
func TestPebbleManifestFullRestores(t *testing.T) {
	want := probeReference(t)
	dir := t.TempDir()
	var armed atomic.Bool
	var failed atomic.Value // the path whose write failed
	inject := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasPrefix(filepath.Base(op.Path), "MANIFEST") &&
			!strings.Contains(op.Path, ".checkpoint-") && armed.CompareAndSwap(true, false) {
			failed.Store(op.Path)
			return syscall.ENOSPC
		}
		return nil
	})
	logs := &logBuf{}
	j := probeJob{data: filepath.Join(dir, "data"), out: filepath.Join(dir, "out"), pebbleDir: filepath.Join(dir, "pebble"), par: 2,
		gate: 30_000, blocked: new(atomic.Int64), lift: new(atomic.Bool),
		pool: []pebble.PoolOption{pebble.WrapFS(func(fs vfs.FS) vfs.FS { return errorfs.Wrap(fs, inject) })}}
	splits := int64(datagen.GPS().Splits())
	n := 0
	env := j.env(eddy.LogOutput(logs), eddy.Restarts(2, 0), eddy.OnCheckpoint(func(eddy.CheckpointStats) {
		if j.lift.Load() || j.blocked.Load() < splits {
			return
		}
		if n++; n < 2 {
			return
		}
		// The next flush's MANIFEST write fails; then the records flow
		// again.
		armed.Store(true)
		j.lift.Store(true)
	}))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	path, _ := failed.Load().(string)
	if path == "" {
		t.Fatal("no MANIFEST write failed")
	}
	st := env.Stats()
	if st.Restarts < 1 || st.RestoredFrom == 0 {
		t.Fatalf("no restart from a checkpoint after the MANIFEST write failed: %+v", st)
	}
	var failure string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "job failed") {
			failure = l
			break
		}
	}
	if !strings.Contains(failure, "pebble: state directory "+filepath.Dir(path)) || !strings.Contains(failure, "MANIFEST") ||
		!strings.Contains(failure, "no space left on device") {
		t.Fatalf("the failure does not name the directory %s, the MANIFEST and the full disk:\n%s", filepath.Dir(path), failure)
	}
	t.Log(failure)
	sameOutput(t, readLines(t, j.out), want)
}

// TestPebbleChangelogCancelResumeRescale runs the probe job on Pebble
// with the changelog state backend, cancelled after a few checkpoints and
// resumed at parallelism 2, then 3, then 1, then 2 to the end: its output
// equals the heap's uninterrupted run, line for line. Materializing every
// 30 ms (checkpoints every 10 ms), most checkpoints carry a materialization
// and the log since it, some a database restored at another parallelism
// and not yet materialized again; retention keeps every object a retained
// checkpoint lists and deletes the others.
func TestPebbleChangelogCancelResumeRescale(t *testing.T) {
	want := probeReference(t)
	dir := t.TempDir()
	j := probeJob{data: filepath.Join(dir, "data"), out: filepath.Join(dir, "out"), pebbleDir: filepath.Join(dir, "pebble"),
		materialize: 30 * time.Millisecond}
	logs := 0
	for i, par := range []int{2, 3, 1} {
		j.par = par
		if i == 2 {
			j.settle = 5 // see TestPebbleCancelResumeRescale
		}
		if j.runUntil(t, int64(i+1)*15_000) {
			t.Fatalf("run %d finished though its source waits at a gate", i)
		}
		logs += changelogParts(t, j.data)
	}
	if logs == 0 {
		t.Fatal("no checkpoint carried a log: the changelog is not on")
	}
	checkPebbleRetention(t, j.data, true)
	j.par, j.settle = 2, 0
	if !j.runUntil(t, 0) {
		t.Fatal("the last run did not finish")
	}
	sameOutput(t, readLines(t, j.out), want)
	checkPebbleRetention(t, j.data, false)
}

// changelogParts returns the log ranges of the newest checkpoint in data.
func changelogParts(t *testing.T, data string) int {
	t.Helper()
	store, err := file.New(data)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := checkpoint.NewStorage(store, 3).Latest(context.Background())
	if err != nil || m == nil {
		t.Fatalf("latest checkpoint %v: %v", m, err)
	}
	n := 0
	for _, op := range m.Operators {
		n += len(op.Changelog)
	}
	return n
}

// heldPebbleStore holds every upload of a Pebble file until the run is
// cancelled: no materialization of a changelog job on Pebble completes.
type heldPebbleStore struct{ blob.Store }

func (s heldPebbleStore) Put(ctx context.Context, name string, data []byte) error {
	if strings.Contains(name, ".pebble/") {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Store.Put(ctx, name, data)
}

// materialized reports whether every key group of every operator of m is
// in a Pebble part.
func materialized(m *checkpoint.Manifest) bool {
	for _, op := range m.Operators {
		n := uint32(0)
		for _, p := range op.Parts {
			if p.Pebble != nil {
				n += p.KeyGroupEnd - p.KeyGroupStart
			}
		}
		if n != op.MaxParallelism {
			return false
		}
	}
	return len(m.Operators) > 0
}

// latestManifest returns the newest checkpoint in data.
func latestManifest(t *testing.T, data string) *checkpoint.Manifest {
	t.Helper()
	store, err := file.New(data)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := checkpoint.NewStorage(store, 3).Latest(context.Background())
	if err != nil || m == nil {
		t.Fatalf("latest checkpoint %v: %v", m, err)
	}
	return m
}

// TestPebbleChangelogRescaleBeforeMaterialization resumes a Pebble
// changelog checkpoint at parallelism 3, then 1, with every upload of a
// Pebble file held: no materialization completes, so every checkpoint of
// those runs lists the databases they were restored from, each narrowed
// to a subtask's key groups but with the key groups its files hold, the
// logs since, and the objects of the materialization in flight to keep.
// The run at parallelism 1 restores such narrowed parts; the last run, at
// parallelism 2 without held uploads, too. The output is the heap's.
func TestPebbleChangelogRescaleBeforeMaterialization(t *testing.T) {
	want := probeReference(t)
	dir := t.TempDir()
	j := probeJob{data: filepath.Join(dir, "data"), out: filepath.Join(dir, "out"), pebbleDir: filepath.Join(dir, "pebble"),
		materialize: 20 * time.Millisecond, par: 2, until: materialized}
	if j.runUntil(t, 15_000) {
		t.Fatal("the first run finished though its source waits at a gate")
	}
	if m := latestManifest(t, j.data); !materialized(m) {
		t.Fatalf("checkpoint %d lists no materialization of every subtask after 1000 checkpoints at the gate", m.ID)
	}
	// Until the newest checkpoint keeps the objects of a materialization
	// in flight: it names them once its database checkpoint is taken.
	j.until = func(m *checkpoint.Manifest) bool { return len(m.Keep) > 0 }
	store, err := file.New(j.data)
	if err != nil {
		t.Fatal(err)
	}
	for i, par := range []int{3, 1} {
		j.par = par
		if j.runUntil(t, int64(i+2)*15_000, eddy.CheckpointStore(heldPebbleStore{store}, 10*time.Millisecond)) {
			t.Fatalf("run %d finished though its source waits at a gate", i)
		}
		m := latestManifest(t, j.data)
		narrowed := 0
		for _, op := range m.Operators {
			for _, p := range op.Parts {
				if p.Pebble == nil {
					t.Fatalf("checkpoint %d: part %+v has no Pebble files", m.ID, p)
				}
				if db0, db1 := p.DBKeyGroups(); db0 < p.KeyGroupStart || db1 > p.KeyGroupEnd {
					narrowed++
				}
			}
			if len(op.Changelog) == 0 {
				t.Fatalf("checkpoint %d carries no log", m.ID)
			}
		}
		if narrowed == 0 || len(m.Keep) == 0 {
			t.Fatalf("parallelism %d: checkpoint %d lists %d narrowed databases and keeps %d objects, want some of each", par, m.ID, narrowed, len(m.Keep))
		}
	}
	checkPebbleRetention(t, j.data, false)
	j.par, j.until = 2, nil
	if !j.runUntil(t, 0) {
		t.Fatal("the last run did not finish")
	}
	sameOutput(t, readLines(t, j.out), want)
	checkPebbleRetention(t, j.data, false)
}

// TestHeapChangelogResumesOnPebbleChangelog cancels the probe job on the
// heap with the changelog and resumes it on Pebble with the changelog, at
// another parallelism, before and after its first materialization there:
// the heap's materialized parts and log are loaded into the databases,
// and a checkpoint taken before every subtask materialized (heap parts
// next to Pebble parts) restores too. The output is the uninterrupted
// run's. A Pebble checkpoint refuses to resume on the heap, changelog or
// not, with ErrIncompatibleState.
func TestHeapChangelogResumesOnPebbleChangelog(t *testing.T) {
	want := probeReference(t)
	dir := t.TempDir()
	j := probeJob{data: filepath.Join(dir, "data"), out: filepath.Join(dir, "out"), par: 2, materialize: 20 * time.Millisecond}
	if j.runUntil(t, 15_000) {
		t.Fatal("the heap run finished before it was cancelled")
	}
	// On Pebble, the subtasks' first materializations (at once, on a
	// restored base) race the checkpoints: some checkpoints mix heap
	// and Pebble parts.
	j.pebbleDir, j.par, j.until = filepath.Join(dir, "pebble"), 3, materialized
	if j.runUntil(t, 30_000) {
		t.Fatal("the Pebble run finished before it was cancelled")
	}
	if !materialized(latestManifest(t, j.data)) {
		t.Fatal("the newest checkpoint of the Pebble run lists no Pebble part of every subtask after 1000 checkpoints at the gate")
	}
	j.until = nil
	heap := j
	heap.pebbleDir = ""
	err := heap.env(eddy.LogOutput(&logBuf{})).Run(context.Background())
	if !errors.Is(err, eddy.ErrIncompatibleState) || !strings.Contains(err.Error(), "Pebble") {
		t.Fatalf("heap restore of a Pebble checkpoint: %v", err)
	}
	j.par = 1
	if !j.runUntil(t, 0) {
		t.Fatal("did not finish")
	}
	sameOutput(t, readLines(t, j.out), want)
}

// TestPebbleLocalRecovery fails the probe job on Pebble once, after
// checkpoints: the restart restores its databases from the files the
// failed attempt left on local disk (its databases and newest local
// checkpoints) instead of downloading them, and the output is the
// uninterrupted run's.
func TestPebbleLocalRecovery(t *testing.T) {
	want := probeReference(t)
	dir := t.TempDir()
	j := probeJob{data: filepath.Join(dir, "data"), out: filepath.Join(dir, "out"), pebbleDir: filepath.Join(dir, "pebble"), par: 2,
		gate: 30_000, blocked: new(atomic.Int64), lift: new(atomic.Bool), fail: new(atomic.Bool)}
	splits := int64(datagen.GPS().Splits())
	n := 0
	env := j.env(eddy.LogOutput(&logBuf{}), eddy.Restarts(1, 0), eddy.OnCheckpoint(func(eddy.CheckpointStats) {
		if j.lift.Load() || j.blocked.Load() < splits {
			return
		}
		if n++; n < 2 {
			return
		}
		j.fail.Store(true)
		j.lift.Store(true)
	}))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := env.Stats()
	if st.Restarts != 1 || st.RestoredFrom == 0 {
		t.Fatalf("stats %+v: want one restart from a checkpoint", st)
	}
	// The SSTs come from local disk; only the small mutable files
	// (MANIFEST, OPTIONS) are downloaded.
	if st.RestoredLocalBytes == 0 || st.RestoredDownloadedBytes > st.RestoredLocalBytes {
		t.Fatalf("restored %d bytes from local copies and downloaded %d: want most from local copies", st.RestoredLocalBytes, st.RestoredDownloadedBytes)
	}
	t.Logf("restore after the failure: %d bytes local, %d downloaded", st.RestoredLocalBytes, st.RestoredDownloadedBytes)
	sameOutput(t, readLines(t, j.out), want)
	// The copies kept for the restart are gone once the job ended.
	if left, _ := filepath.Glob(filepath.Join(j.pebbleDir, "*", "*")); len(left) != 0 {
		t.Fatalf("left under the Pebble directory: %v", left)
	}
}
