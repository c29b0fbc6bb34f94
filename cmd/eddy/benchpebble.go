package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/discard"
	"github.com/eddyflow/eddy/internal/splitmix"
	"github.com/eddyflow/eddy/state"
	"github.com/eddyflow/eddy/state/pebble"
	"github.com/prometheus/client_golang/prometheus"
)

// benchPebbleCmd runs `eddy bench pebble`: the capacity benchmark of the
// Pebble backend. One process fills --state-gb of incompressible values
// (one per key) into a keyed Value state on Pebble as fast as it can,
// printing every --report interval its throughput, resident memory and
// disk use; then updates random existing keys for --update and reports,
// per checkpoint, the bytes uploaded against the bytes the updates changed;
// then restores the last checkpoint at the same parallelism and at
// --rescale, reporting each restore's time and the bytes it read (the
// checkpoint's full size: a restore downloads every file of it).
func benchPebbleCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench pebble", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c capConfig
	fs.Float64Var(&c.stateGB, "state-gb", 1, "GiB of values to fill (keys = state-gb / value-bytes)")
	fs.IntVar(&c.valueBytes, "value-bytes", 1024, "bytes of each key's value (random, incompressible)")
	mem := fs.Int64("memory", pebble.DefaultMemory>>20, "pebble.Memory of the job, in MiB")
	uploadRate := fs.Int64("upload-rate", pebble.DefaultBackgroundUploadRate>>20, "pebble.BackgroundUploadRate of the job, in MiB/s: the pace of materializations' uploads (0: unpaced)")
	fs.IntVar(&c.par, "parallelism", 2, "parallelism of the job")
	fs.IntVar(&c.rescale, "rescale", 3, "parallelism of the rescaled restore (0: none)")
	fs.DurationVar(&c.interval, "interval", 10*time.Second, "checkpoint interval")
	fs.DurationVar(&c.report, "report", 10*time.Second, "reporting interval")
	fs.DurationVar(&c.update, "update", 60*time.Second, "time to update random existing keys after the fill (0: none)")
	fs.Float64Var(&c.rate, "update-rate", 5000, "updates per second in the update phase (0: as fast as possible)")
	fs.DurationVar(&c.changelog, "changelog", 0, "turn on the changelog backend on Pebble, materializing (a Pebble checkpoint) at most this often (0: off)")
	dir := fs.String("dir", "", "working directory: Pebble databases and the checkpoint store (default: a temporary one; removed after)")
	fs.DurationVar(&c.traceSlow, "trace-slow", 0, "in the update phase, keep a flight recording of the execution trace and write the last seconds of it when a checkpoint takes longer than this (at most 3, named slow-checkpoint-pebble-*.trace)")
	fs.BoolVar(&c.settle, "settle", true, "after the fill, run the job without records until Pebble's compactions have caught up with it (and, with the changelog, every subtask has completed two materializations since), so that the later phases restore a settled database, as a job running at its steady rate checkpoints one")
	fs.BoolVar(&c.keep, "keep", false, "keep --dir after the run, and skip the fill when --dir holds a finished fill of the same keys and value size (to measure the later phases again)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if c.stateGB <= 0 || c.valueBytes < 8 || c.par < 1 || *mem <= 0 || *uploadRate < 0 {
		fmt.Fprintln(stderr, "eddy bench pebble: --state-gb, --memory and --parallelism must be positive, --value-bytes at least 8, --upload-rate not negative")
		return 2
	}
	c.memory = *mem << 20
	c.uploadRate = *uploadRate << 20
	c.dir = *dir
	if c.dir == "" {
		d, err := os.MkdirTemp("", "eddy-bench-pebble-")
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		c.dir = d
	}
	if !c.keep {
		defer os.RemoveAll(c.dir)
	}
	if err := capRun(c, stdout); err != nil {
		fmt.Fprintf(stderr, "eddy bench pebble: %v\n", err)
		return 1
	}
	return 0
}

// capConfig is the configuration of `eddy bench pebble`.
type capConfig struct {
	stateGB          float64
	valueBytes       int
	memory           int64
	uploadRate       int64 // bytes per second; 0: unpaced
	par, rescale     int
	interval, report time.Duration
	update           time.Duration
	rate             float64
	changelog        time.Duration // materialization interval with the changelog; 0: off
	dir              string
	keep             bool // keep dir; reuse a finished fill in it
	settle           bool // settle the fill's database before the later phases
	traceSlow        time.Duration
}

// settleAfterRestore is how long after its restore the update phase's
// checkpoints count as steady in the report.
const settleAfterRestore = 30 * time.Second

// fillMarker names the file in the working directory that says a fill
// finished, and of what; with --keep a later run skips such a fill.
const fillMarker = "fill-done"

func (c capConfig) fillID() string {
	return fmt.Sprintf("keys %d value-bytes %d\n", c.keys(), c.valueBytes)
}

func (c capConfig) keys() int64 { return int64(c.stateGB * (1 << 30) / float64(c.valueBytes)) }

func (c capConfig) options(par int, onCkpt func(eddy.CheckpointStats)) []eddy.Option {
	opts := []eddy.Option{eddy.Parallelism(par), eddy.JobName("bench-pebble"), eddy.LogOutput(io.Discard),
		eddy.Checkpoints(filepath.Join(c.dir, "data"), c.interval), eddy.CheckpointTimeout(30 * time.Minute),
		eddy.AllowChangedJob(), eddy.OnCheckpoint(onCkpt),
		eddy.StateBackend(eddy.Pebble(filepath.Join(c.dir, "pebble"), pebble.Memory(c.memory), pebble.BackgroundUploadRate(c.uploadRate)))}
	if c.changelog > 0 {
		opts = append(opts, eddy.Changelog(c.changelog))
	}
	return opts
}

// Settling: a fill as fast as Pebble takes it outruns its compactions, and
// its last checkpoint holds a database in debt (on 2026-12-05 at 8 GiB:
// L0 at 35 to 44 sublevels of 400 files and 4.8 GB of compaction debt per
// database). Every restore of it pays that debt first: for 100 s
// compactions rewrite 200 MB/s, the subtasks' reads pass over 40
// sublevels, and checkpoints wait for barriers behind slow records. A job
// at its steady rate checkpoints a settled database, so the update phase
// restores one: the settle phase restores the fill and runs the job
// without records until the debt is paid.
const (
	// settledFor is how long every database's compaction debt must stay
	// unchanged, with no records written, for the settle phase to
	// consider its compactions done (Pebble's estimate stays above zero
	// when no level needs a compaction: L0's files count).
	settledFor = 10 * time.Second
	// settleLimit is how long the settle phase waits for compactions
	// before it fails.
	settleLimit = 20 * time.Minute
)

// settle restores the last checkpoint of c's job and runs it without
// records until the compactions of every database have caught up (the
// debt unchanged for settledFor, L0 below pebble.L0CompactionThreshold) and, with the changelog, every subtask
// has completed two materializations since (the first may have begun
// before): then the job ends with a checkpoint of a settled database.
// Its uploads are unpaced: nothing measured runs.
func settle(c capConfig, w io.Writer, onCkpt func(eddy.CheckpointStats)) error {
	reg := prometheus.NewRegistry()
	c.uploadRate = 0
	var (
		mu          sync.Mutex
		env         *eddy.Env
		checked     time.Time
		reported    time.Time
		lastDebt    = -1.0
		steadySince time.Time
		settledAt   time.Time
		debt, l0    float64
		mats        int64
	)
	began := time.Now()
	var failure error
	hold := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if env == nil || time.Since(checked) < time.Second {
			return true
		}
		checked = time.Now()
		if settledAt.IsZero() {
			debt, l0 = metricSum(reg, "eddy_pebble_compaction_debt_bytes"), gaugeMax(reg, "eddy_pebble_l0_sublevels")
			open := len(seriesValues(reg, "eddy_pebble_l0_sublevels")) // databases restored and open
			if time.Since(reported) >= c.report {
				reported = time.Now()
				fmt.Fprintf(w, "settle: %v  databases open %d  debt %.0f MiB  L0 at most %v sublevels  materializations %d\n",
					time.Since(began).Round(time.Second), open, debt/(1<<20), l0, env.Stats().Materializations)
			}
			if open < c.par || debt != lastDebt || l0 >= pebble.L0CompactionThreshold {
				lastDebt, steadySince = debt, time.Now()
			}
			if open < c.par || time.Since(steadySince) < settledFor || l0 >= pebble.L0CompactionThreshold {
				if time.Since(began) > settleLimit {
					failure = fmt.Errorf("compactions have not caught up after %v: debt %.0f MiB, L0 %v sublevels", settleLimit, debt/(1<<20), l0)
					return false
				}
				return true
			}
			settledAt, mats = time.Now(), env.Stats().Materializations
			fmt.Fprintf(w, "settle: compactions caught up %v after the start (debt %.0f MiB, L0 at most %v sublevels)\n", settledAt.Sub(began).Round(time.Second), debt/(1<<20), l0)
		}
		return c.changelog > 0 && env.Stats().Materializations < mats+2*int64(c.par)
	}
	opts := append(c.options(c.par, onCkpt), eddy.Metrics(reg))
	e := eddy.New(opts...)
	buildCap(e, eddy.FromSource(e, idleSource{hold: hold}), c.valueBytes)
	mu.Lock()
	env = e
	mu.Unlock()
	fmt.Fprintf(w, "\nsettle: restoring the last checkpoint and running without records\n")
	if err := e.Run(context.Background()); err != nil {
		return err
	}
	if failure != nil {
		return failure
	}
	fmt.Fprintf(w, "settle done in %v: restored checkpoint %d in %v; %d materializations; debt %.0f MiB, L0 at most %v sublevels when settled\n",
		time.Since(began).Round(time.Second), e.Stats().RestoredFrom, e.Stats().Recovery.Round(time.Millisecond), e.Stats().Materializations, debt/(1<<20), l0)
	return nil
}

// idleSource is a source of no records that ends once hold returns false.
type idleSource struct{ hold func() bool }

func (idleSource) Name() string { return "settle" }
func (idleSource) Splits() int  { return 1 }
func (s idleSource) OpenSplit(context.Context, int, []byte) (eddy.SplitReader[int64], error) {
	return idleReader(s), nil
}

type idleReader idleSource

func (r idleReader) Next(*int64) (eddy.ReadStatus, error) {
	if r.hold() {
		return eddy.Idle, nil
	}
	return eddy.End, nil
}
func (idleReader) Position() []byte { return nil }
func (idleReader) Close() error     { return nil }

// capValue is the state of a key: its value bytes, random so that Pebble's
// block compression does not shrink them.
type capValue struct {
	Payload []byte `proto:"1"`
	Count   int64  `proto:"2"`
}

// capFn writes a value of size bytes for every key it sees, filled from
// the key and its count (so an update changes every byte).
type capFn struct {
	size int
	st   *state.Value[capValue]
}

func (f *capFn) Open(ctx *eddy.OpenContext) error {
	var err error
	f.st, err = state.NewValue[capValue](ctx.State, "values")
	return err
}

func (f *capFn) Process(ctx *eddy.Context[int64, int64], k *int64) error {
	v, _ := f.st.Get()
	v.Count++
	if len(v.Payload) != f.size {
		v.Payload = make([]byte, f.size)
	}
	fillRandom(v.Payload, uint64(*k)*splitmix.Golden+uint64(v.Count))
	f.st.Update(v)
	return nil
}

// fillRandom fills b with splitmix64 output seeded by seed.
func fillRandom(b []byte, seed uint64) {
	x := seed
	for i := 0; i < len(b); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], splitmix.Next(&x))
		copy(b[i:], w[:])
	}
}

// randomKeySource emits n keys drawn uniformly from [0, keys) at a rate
// (0: unthrottled), spread over splits.
type randomKeySource struct {
	keys, n int64
	rate    float64
	splits  int
}

func (s randomKeySource) Name() string { return "updates" }
func (s randomKeySource) Splits() int  { return s.splits }
func (s randomKeySource) OpenSplit(_ context.Context, split int, pos []byte) (eddy.SplitReader[int64], error) {
	r := &randomKeyReader{s: s, x: uint64(split) * 0x2545f4914f6cdd1d}
	if len(pos) == 8 {
		r.done = int64(binary.LittleEndian.Uint64(pos))
	}
	return r, nil
}

type randomKeyReader struct {
	s      randomKeySource
	x      uint64
	done   int64
	last   time.Time // of the last credit
	credit float64   // records the split may read now
}

// The updates' rate limit: credit is taken rateChunk records at a time and
// holds at most maxBurst of the rate.
const (
	rateChunk = 64
	maxBurst  = 200 * time.Millisecond
)

func (r *randomKeyReader) Next(k *int64) (eddy.ReadStatus, error) {
	if r.done >= r.s.n/int64(r.s.splits) {
		return eddy.End, nil
	}
	if r.s.rate > 0 && r.done%rateChunk == 0 {
		// A token bucket that holds at most maxBurst of credit: after a
		// pause (the restore: the source reads before the keyed subtasks
		// have restored, and waits for them), the updates go on at the
		// rate rather than make up for the pause in a burst at full speed,
		// as long as the restore, which grows with the state.
		now := time.Now()
		if r.last.IsZero() {
			r.last, r.credit = now, rateChunk
		}
		perSplit := r.s.rate / float64(r.s.splits)
		r.credit = min(r.credit+now.Sub(r.last).Seconds()*perSplit, max(rateChunk, perSplit*maxBurst.Seconds()))
		r.last = now
		if r.credit < rateChunk {
			return eddy.Idle, nil
		}
		r.credit -= rateChunk
	}
	r.x = r.x*6364136223846793005 + 1442695040888963407
	*k = int64((r.x >> 11) % uint64(r.s.keys))
	r.done++
	return eddy.Record, nil
}

func (r *randomKeyReader) Position() []byte {
	return binary.LittleEndian.AppendUint64(nil, uint64(r.done))
}
func (r *randomKeyReader) Close() error { return nil }

// capRun runs the phases of `eddy bench pebble`.
func capRun(c capConfig, w io.Writer) error {
	keys := c.keys()
	fmt.Fprintf(w, "eddy bench pebble: %.2f GiB in %d keys of %d-byte values, pebble.Memory %d MiB, materializations paced to %d MiB/s (0: unpaced), parallelism %d, checkpoints every %v, in %s\n",
		c.stateGB, keys, c.valueBytes, c.memory>>20, c.uploadRate>>20, c.par, c.interval, c.dir)

	// Fill.
	var mu sync.Mutex
	var ckpts []eddy.CheckpointStats
	fullSize := map[uint64]int64{} // of every checkpoint of every phase
	onCkpt := func(s eddy.CheckpointStats) {
		mu.Lock()
		ckpts = append(ckpts, s)
		fullSize[s.ID] = s.FullSize
		mu.Unlock()
	}
	marker := filepath.Join(c.dir, fillMarker)
	var fillPeak int64
	if b, err := os.ReadFile(marker); c.keep && err == nil && string(b) == c.fillID() {
		fmt.Fprintf(w, "\nfill: skipped, %s holds a finished fill (%s)\n", c.dir, fillMarker)
	} else {
		env := eddy.New(c.options(c.par, onCkpt)...)
		src := eddy.FromSource(env, keySource{name: "fill", from: 0, n: keys, splits: 8})
		buildCap(env, src, c.valueBytes)
		fmt.Fprintln(w, "\nfill: elapsed  records  records/s (interval)  RSS MiB  peak RSS MiB  local Pebble MiB  checkpoint store MiB  checkpoints")
		start := time.Now()
		rates, err := runReporting(env, c, w, start)
		if err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		fillTime := time.Since(start)
		fillPeak = peakRSS()
		fmt.Fprintf(w, "fill done: %d records in %v (%.0f records/s, %.1f MiB/s of values); interval rates min %.0f median %.0f max %.0f records/s; peak RSS %d MiB; checkpoint store %d MiB\n",
			keys, fillTime.Round(time.Millisecond), float64(keys)/fillTime.Seconds(), float64(keys)*float64(c.valueBytes)/fillTime.Seconds()/(1<<20),
			minOf(rates), medianOf(rates), maxOf(rates), fillPeak>>20, dirBytes(filepath.Join(c.dir, "data"))>>20)
		if c.keep {
			if err := os.WriteFile(marker, []byte(c.fillID()), 0o644); err != nil {
				return err
			}
		}
	}

	if c.settle {
		if err := settle(c, w, onCkpt); err != nil {
			return fmt.Errorf("settle: %w", err)
		}
	}

	// Updates: uploaded bytes per checkpoint against the bytes changed.
	if c.update > 0 {
		mu.Lock()
		ckpts = ckpts[:0]
		mu.Unlock()
		n := int64(c.rate * c.update.Seconds())
		if c.rate <= 0 {
			n = keys
		}
		tracer := benchConfig{traceSlow: c.traceSlow, traceOut: "slow-checkpoint", job: "pebble", changelog: c.changelog > 0}.slowTracer(w)
		env := eddy.New(c.options(c.par, func(s eddy.CheckpointStats) { onCkpt(s); tracer.check(s) })...)
		src := eddy.FromSource(env, randomKeySource{keys: keys, n: n, rate: c.rate, splits: 8})
		buildCap(env, src, c.valueBytes)
		fmt.Fprintln(w, "\nupdate: elapsed  records  records/s (interval)  RSS MiB  peak RSS MiB  local Pebble MiB  checkpoint store MiB  checkpoints")
		began := time.Now()
		_, err := runReporting(env, c, w, began)
		tracer.stop()
		if err != nil {
			return fmt.Errorf("update: %w", err)
		}
		fmt.Fprintf(w, "update restored checkpoint %d in %v\n", env.Stats().RestoredFrom, env.Stats().Recovery.Round(time.Millisecond))
		mu.Lock()
		fmt.Fprintln(w, "checkpoint  uploaded MiB  full MiB  (uploaded/full)  duration ms  sync ms  last ack: stage/subtask barrier/sync/async ms  manifest ms  materialization stall ms")
		var up, full int64
		var durs, steady []time.Duration
		// Steady: checkpoints triggered settleAfterRestore after the
		// restore ended, past the restore's aftermath (compactions of the
		// restored files, their writeback).
		settled := began.Add(env.Stats().Recovery + settleAfterRestore)
		for _, s := range ckpts {
			fmt.Fprintf(w, "%d  %.2f  %.1f  (%.4f)  %d  %d  %d/%d %d/%d/%d  %d  %d\n", s.ID, float64(s.Bytes)/(1<<20), float64(s.FullSize)/(1<<20), float64(s.Bytes)/float64(max(s.FullSize, 1)),
				s.Duration.Milliseconds(), s.SyncDuration.Milliseconds(), s.Last.Stage, s.Last.Subtask,
				s.Last.Barrier.Milliseconds(), s.Last.Sync.Milliseconds(), s.Last.Async.Milliseconds(), s.ManifestWrite.Milliseconds(),
				s.MaterializationStall.Milliseconds())
			up += s.Bytes
			full = s.FullSize
			if !s.Final {
				durs = append(durs, s.Duration)
				if s.Completed.Add(-s.Duration).After(settled) {
					steady = append(steady, s.Duration)
				}
			}
		}
		mu.Unlock()
		changed := n * int64(c.valueBytes)
		fmt.Fprintf(w, "update done: %d updates changed %.1f MiB of values; checkpoints uploaded %.1f MiB in all: uploaded/changed %.2f; full size of the last %.1f MiB\n",
			n, float64(changed)/(1<<20), float64(up)/(1<<20), float64(up)/float64(changed), float64(full)/(1<<20))
		fmt.Fprintf(w, "update checkpoint time (%d, the final one left out): p50 %v  p99 %v  p99.9 %v  max %v\n",
			len(durs), pct(durs, 0.5), pct(durs, 0.99), pct(durs, 0.999), pct(durs, 1))
		fmt.Fprintf(w, "update checkpoint time from %v after the restore (%d): p50 %v  p99 %v  p99.9 %v  max %v\n",
			settleAfterRestore, len(steady), pct(steady, 0.5), pct(steady, 0.99), pct(steady, 0.999), pct(steady, 1))
	}

	// Restores: the last checkpoint at the same parallelism and rescaled.
	for _, par := range []int{c.par, c.rescale} {
		if par < 1 {
			continue
		}
		mu.Lock()
		ckpts = ckpts[:0]
		mu.Unlock()
		env := eddy.New(c.options(par, onCkpt)...)
		src := eddy.FromSource(env, keySource{name: fmt.Sprintf("restore-%d", par), from: 0, n: 0, splits: 8})
		buildCap(env, src, c.valueBytes)
		t0 := time.Now()
		if err := env.Run(context.Background()); err != nil {
			return fmt.Errorf("restore at parallelism %d: %w", par, err)
		}
		st := env.Stats()
		mu.Lock()
		full := fullSize[st.RestoredFrom]
		mu.Unlock()
		fmt.Fprintf(w, "restore of checkpoint %d at parallelism %d (from %d): recovery %v (whole run %v), read %.1f MiB (the checkpoint's full size), %.0f MiB/s\n",
			st.RestoredFrom, par, c.par, st.Recovery.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), float64(full)/(1<<20), float64(full)/(1<<20)/st.Recovery.Seconds())
	}
	fmt.Fprintf(w, "peak RSS of the process: %d MiB (of the fill: %d MiB)\n", peakRSS()>>20, fillPeak>>20)
	return nil
}

func buildCap(env *eddy.Env, src *eddy.Stream[int64], size int) {
	ks := eddy.KeyBy(src, func(k *int64) int64 { return *k })
	out := eddy.Process[int64, int64, int64](ks, &capFn{size: size}, eddy.Named("values"))
	eddy.ToSink(out, discard.Sink[int64]())
}

// runReporting runs env, printing a line every c.report interval, and
// returns the records/s of each full interval.
func runReporting(env *eddy.Env, c capConfig, w io.Writer, start time.Time) ([]float64, error) {
	done := make(chan error, 1)
	go func() { done <- env.Run(context.Background()) }()
	tick := time.NewTicker(c.report)
	defer tick.Stop()
	var rates []float64
	last, lastAt := int64(0), start
	line := func() {
		st := env.Stats()
		now := time.Now()
		r := float64(st.RecordsIn-last) / now.Sub(lastAt).Seconds()
		fmt.Fprintf(w, "%v  %d  %.0f  %d  %d  %d  %d  %d\n", now.Sub(start).Round(time.Second), st.RecordsIn, r,
			rss()>>20, peakRSS()>>20, dirBytes(filepath.Join(c.dir, "pebble"))>>20, dirBytes(filepath.Join(c.dir, "data"))>>20, st.Checkpoints)
		rates = append(rates, r)
		last, lastAt = st.RecordsIn, now
	}
	for {
		select {
		case err := <-done:
			return rates, err
		case <-tick.C:
			line()
		}
	}
}

// rss and peakRSS return VmRSS and VmHWM of /proc/self/status in bytes
// (0 where there is none).
func rss() int64     { return procStatus("VmRSS:") }
func peakRSS() int64 { return procStatus("VmHWM:") }

func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(field)); ok {
			fs := bytes.Fields(rest)
			if len(fs) > 0 {
				kb, _ := strconv.ParseInt(string(fs[0]), 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// dirBytes returns the disk space of the files under dir, counting a file
// with several hard links (a Pebble checkpoint's) once.
func dirBytes(dir string) int64 {
	seen := map[uint64]bool{}
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
			n += st.Blocks * 512
			return nil
		}
		n += fi.Size()
		return nil
	})
	return n
}

func minOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
