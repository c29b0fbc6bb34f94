package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/faulty"
	blobs3 "github.com/eddyflow/eddy/blob/s3"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/discard"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/state"
	"github.com/eddyflow/eddy/state/pebble"
	"github.com/prometheus/client_golang/prometheus"
)

// benchCmd runs `eddy bench checkpoint`: the changelog experiment of the
// seed (Flink 1.15's generic log-based incremental checkpoints) at this
// machine's scale, changelog off against on, in one run.
func benchCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "restore-once" {
		return restoreOnceCmd(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "pebble" {
		return benchPebbleCmd(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "group" {
		return benchGroupCmd(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "checkpoint" {
		fmt.Fprintln(stderr, "usage: eddy bench checkpoint [flags] | eddy bench pebble [flags] | eddy bench group [flags]")
		return 2
	}
	fs := flag.NewFlagSet("bench checkpoint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var base benchConfig
	base.settingFlags(fs)
	rate := fs.Float64("rate", 50_000, "events per second while measuring")
	dur := fs.Duration("duration", 20*time.Second, "measuring time per configuration")
	dir := fs.String("dir", "", "working directory (default: a temporary one, removed after)")
	which := fs.String("jobs", "value,window", "jobs to run: value, window")
	modes := fs.String("changelog", "off,on", "configurations to run: off, on (with --backend pebble, on makes a materialization a checkpoint of the databases)")
	backend := fs.String("backend", "heap", "state backend of every configuration: heap, or pebble (Pebble databases under --dir, incremental checkpoints)")
	recoveries := fs.Int("recoveries", 3, "restores to time per configuration, alternating between the configurations; round k restores the k-th of the measured run's last checkpoints (medians are reported, with the range of the per-round ratios)")
	recovery := fs.String("recovery", "cold", "cold: each restore in a new process, as after a crash; warm: in this process, after an untimed restore of the same state and a GC, as a failover inside a running process")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.StringVar(&base.restoreProfile, "restore-cpuprofile", "", "with --recovery cold: write a CPU profile of each restore to <this>-<job>-<changelog>-<checkpoint>.pprof")
	fs.DurationVar(&base.traceSlow, "trace-slow", 0, "keep a flight recording of the execution trace and write the last seconds of it when a measured checkpoint takes longer than this (go tool trace; -pprof=sync shows where goroutines blocked)")
	fs.StringVar(&base.traceOut, "trace-out", "slow-checkpoint", "with --trace-slow: file name prefix of the traces written (at most 3 per run)")
	storeURL := fs.String("store", "", "checkpoint store URL, e.g. s3://bucket/prefix?endpoint=http://127.0.0.1:7070&region=us-east-1 (default: a directory under --dir); each configuration writes under its own sub-prefix of eddy-bench-<time>-<pid>/, deleted at the end; --latency defaults to false for a store other than a local directory")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	latencySet := false
	fs.Visit(func(f *flag.Flag) {
		latencySet = latencySet || f.Name == "latency"
	})
	switch *backend {
	case "heap":
	case "pebble":
		base.pebble = true
	default:
		fmt.Fprintf(stderr, "eddy bench checkpoint: --backend %q: want heap or pebble\n", *backend)
		return 2
	}
	if *storeURL != "" && isRemote(*storeURL) && !latencySet {
		// A remote store has latency of its own.
		base.latency = false
	}
	if *recovery != "cold" && *recovery != "warm" {
		fmt.Fprintf(stderr, "eddy bench checkpoint: --recovery %q: want cold or warm\n", *recovery)
		return 2
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer stop()
	}
	work := *dir
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "eddy-bench-"); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer os.RemoveAll(work)
	}
	where := "directories under " + work
	var runStore string // where this run's configurations keep their checkpoints, in --store
	if *storeURL != "" {
		// Checked before anything runs: a wrong endpoint, bucket or
		// credentials is a usage error.
		if _, err := blob.Open(*storeURL); err != nil {
			fmt.Fprintf(stderr, "eddy bench checkpoint: --store: %v\n", err)
			return 2
		}
		// Runs and their configurations never see one another's
		// checkpoints: a configuration that found another's would
		// restore it instead of starting empty.
		runStore = storeAt(*storeURL, fmt.Sprintf("eddy-bench-%s-%d", time.Now().UTC().Format("20060102T150405"), os.Getpid()))
		where = runStore
		defer func() {
			if err := removeStore(runStore); err != nil {
				fmt.Fprintf(stderr, "eddy bench: deleting the checkpoints of this run in %s: %v\n", runStore, err)
			}
		}()
	}
	fmt.Fprintf(stdout, "eddy bench checkpoint: %d MiB pre-filled state, %.0f events/s, checkpoints every %v, %v per run, latency injected: %v (on reads too: %v), recoveries: %s, store: %s, state backend: %s\n",
		base.stateMB, *rate, base.interval, *dur, base.latency, base.readLatency, *recovery, where, *backend)
	var reqRows []string // the rows of the requests table
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "job\tchangelog\tcheckpoints\tp50\tp99\tp99.9\tmax\tsync p99\tstep stall (max)\tuploaded/ckpt (avg)\tfull size (avg)\tfull/state\trecovery (median)\trecovery/state (median of rounds)\t")
	for _, job := range []string{"value", "window"} {
		if !slices.Contains(strings.Split(*which, ","), job) {
			continue
		}
		// Bytes per state entry in a full snapshot, from the run without
		// the changelog: the state of job (a) grows by a key per event, so
		// the fair comparison for a checkpoint's full size is a snapshot of
		// the state it holds, not the other run's last checkpoint.
		var runs []benchResult
		var cls []bool
		for _, cl := range []bool{false, true} {
			if !slices.Contains(strings.Split(*modes, ","), map[bool]string{false: "off", true: "on"}[cl]) {
				continue
			}
			cfg := base
			cfg.job, cfg.changelog, cfg.rate, cfg.dur, cfg.warm = job, cl, *rate, *dur, *recovery == "warm"
			cfg.restores = *recoveries
			cfg.dir = filepath.Join(work, fmt.Sprintf("%s-%v", job, cl))
			if runStore != "" {
				cfg.storeURL = storeAt(runStore, fmt.Sprintf("%s-%v", job, cl))
			}
			fmt.Fprintf(stderr, "eddy bench: %s changelog=%v: pre-filling %d MiB of state, then measuring for %v\n", job, cl, cfg.stateMB, cfg.dur)
			r, err := benchRun(cfg, stderr)
			if err != nil {
				fmt.Fprintf(stderr, "eddy bench: %s changelog=%v: %v\n", job, cl, err)
				return 1
			}
			explainSlow(stderr, job, cl, r)
			runs, cls = append(runs, r), append(cls, cl)
		}
		// Recoveries alternate between the configurations. Round k
		// restores each run's k-th checkpoint from the last (cycling
		// through the last few): a crash comes at any moment, and with
		// the changelog how much log a checkpoint carries varies from one
		// checkpoint to the next.
		for k := range max(*recoveries, 1) {
			for i := range runs {
				fmt.Fprintf(stderr, "eddy bench: %s changelog=%v: recovery %d of %d\n", job, cls[i], k+1, max(*recoveries, 1))
				d, reqs, err := runs[i].restore(k)
				if err != nil {
					fmt.Fprintf(stderr, "eddy bench: %s changelog=%v: %v\n", job, cls[i], err)
					return 1
				}
				runs[i].recs = append(runs[i].recs, d)
				runs[i].recReqs = append(runs[i].recReqs, reqs)
			}
		}
		// Bytes per state entry in a full snapshot, and recovery time per
		// restored entry, from the run without the changelog: the state of
		// job (a) grows by a key per event, so the fair comparison for a
		// checkpoint's full size is a snapshot of the state it holds, and
		// for a recovery, restoring a snapshot of the same state.
		var perEntry float64
		var off *benchResult
		for i := range runs {
			r, cl := &runs[i], cls[i]
			if !cl && r.entries > 0 {
				perEntry = float64(r.full) / float64(r.entries)
			}
			if !cl {
				off = r
			}
			ratio, recRatio := "-", "-"
			if perEntry > 0 && r.entries > 0 {
				ratio = fmt.Sprintf("%.2fx", float64(r.full)/(perEntry*float64(r.entries)))
			}
			if cl && off != nil {
				// The median of the per-round ratios, per restored entry:
				// each round's two restores ran back to back.
				var paired []float64
				for k, d := range r.recs {
					paired = append(paired, r.perEntry(k, d)/off.perEntry(k, off.recs[k]))
				}
				slices.Sort(paired)
				recRatio = fmt.Sprintf("%.2fx (%.2f-%.2f)", paired[len(paired)/2], paired[0], paired[len(paired)-1])
			} else if !cl {
				recRatio = "1.00x"
			}
			stall := "-"
			if cl {
				stall = r.stall.Round(100 * time.Microsecond).String()
			}
			fmt.Fprintf(tw, "%s\t%v\t%d\t%v\t%v\t%v\t%v\t%v\t%s\t%s\t%s\t%s\t%v\t%s\t\n", job, cl, len(r.durs), r.p(0.5), r.p(0.99), r.p(0.999), r.p(1),
				pct(r.syncs, 0.99), stall,
				bytesString(r.uploaded), bytesString(r.full), ratio, pct(r.recs, 0.5).Round(time.Millisecond), recRatio)
			reqRows = append(reqRows, fmt.Sprintf("%s\t%v\t%s", job, cl, r.requestColumns()))
		}
	}
	tw.Flush()
	fmt.Fprintln(stdout, "\nstore requests (Put, Get, List, Delete calls at the store, hedges and failures included; per checkpoint and per minute of the measured run; log objects/ckpt: the changelog objects uploaded per checkpoint, of the PUTs, winning attempts only, and their average size; S3 HTTP PUT/ckpt: the PUT and POST requests an S3 store sent, each piece of a multipart upload one (- for other stores); per recovery: the requests made of the measured run's store by a restore and the first checkpoint after it, whose writes go to a local scratch directory; median of rounds)")
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "job\tchangelog\tPUT/ckpt\tGET/ckpt\tLIST/ckpt\tDELETE/ckpt\tlog objects/ckpt\tlog MiB/object\tS3 HTTP PUT/ckpt\tPUT/min\tGET/min\tLIST/min\tDELETE/min\tGET/recovery\tLIST/recovery\t")
	for _, row := range reqRows {
		fmt.Fprintln(tw, row+"\t")
	}
	tw.Flush()
	return 0
}

type benchConfig struct {
	job                        string
	changelog, latency, warm   bool
	pebble                     bool  // keyed state in Pebble databases under dir/pebble
	pebbleMemory               int64 // their pebble.Memory; 0: the default
	readLatency                bool  // latency on every operation, not only uploads
	stateMB, valueBytes        int
	rate                       float64
	dur, interval, materialize time.Duration
	logRatio                   float64
	hedgeP90                   float64       // the log's dstl.Options.HedgeAfterP90
	logFlush                   time.Duration // the log's dstl.Options.FlushInterval
	persistDelay               time.Duration // the log's dstl.Options.PersistDelay
	logFlushBytes              int           // the log's dstl.Options.FlushBytes
	logWriterFlushBytes        int           // the log's dstl.Options.WriterFlushBytes
	logMaxInFlight             int           // the log's dstl.Options.MaxInFlight
	logParts                   bool          // not the log's dstl.Options.NoParts
	dir                        string
	storeURL                   string // the configuration's checkpoint store; "" for dir/data
	restores                   int    // how many of the measured run's last checkpoints recoveries restore
	upto                       uint64 // restore-once: the checkpoint to restore (those after it are hidden)
	traceSlow                  time.Duration
	traceOut                   string
	restoreProfile             string // cold recoveries: CPU profiles of the restores, file name prefix
}

type benchResult struct {
	durs, syncs             []time.Duration
	uploaded, full, entries int64 // per measured checkpoint, averaged
	// The last checkpoints of the measured run, newest first: what the
	// recoveries restore.
	ckpts   []benchCkpt
	restore func(round int) (time.Duration, blob.Requests, error) // restores ckpts[round%len(ckpts)]
	recs    []time.Duration                                       // of each round
	recReqs []blob.Requests                                       // the requests of each round's restore
	// The store requests between the first and the last measured
	// checkpoint's completion, the checkpoints completed in between
	// (the last included), and the time between.
	reqs      blob.Requests
	logObjs   float64       // changelog objects written in the same period (eddy_dstl_objects_total)
	logBytes  float64       // their bytes (eddy_dstl_uploaded_bytes_total)
	s3        bool          // the store is S3: httpReqs counts its HTTP requests
	httpReqs  blob.Requests // the HTTP requests in the same period, multipart pieces included
	reqCkpts  int
	reqPeriod time.Duration
	slowest   []eddy.CheckpointStats // the measured run's slowest checkpoints, slowest first
	stall     time.Duration          // the longest materialization step during the measured checkpoints
}

// slowestKept is how many of a run's slowest checkpoints are explained.
const slowestKept = 3

// keepSlow adds s to the slowest checkpoints if it is one of them.
func (r *benchResult) keepSlow(s eddy.CheckpointStats) {
	i, _ := slices.BinarySearchFunc(r.slowest, s.Duration, func(a eddy.CheckpointStats, d time.Duration) int {
		return cmp.Compare(d, a.Duration) // descending
	})
	if i < slowestKept {
		r.slowest = slices.Insert(r.slowest, i, s)
		r.slowest = r.slowest[:min(len(r.slowest), slowestKept)]
	}
}

// explainSlow writes where the slowest checkpoints of a run spent their
// time: the subtask that acknowledged last and the manifest write.
func explainSlow(w io.Writer, job string, cl bool, r benchResult) {
	for _, s := range r.slowest {
		l := s.Last
		fmt.Fprintf(w, "eddy bench: %s changelog=%v: checkpoint %d took %v: last ack stage %d subtask %d (barrier after %v, sync %v, async %v), manifest %v\n",
			job, cl, s.ID, s.Duration.Round(time.Millisecond), l.Stage, l.Subtask, l.Barrier.Round(time.Millisecond),
			l.Sync.Round(time.Millisecond), l.Async.Round(time.Millisecond), s.ManifestWrite.Round(time.Millisecond))
	}
}

type benchCkpt struct {
	id      uint64
	entries int64 // keyed state entries it holds
}

// perEntry is recovery d of round k per state entry restored.
func (r *benchResult) perEntry(k int, d time.Duration) float64 {
	return float64(d) / float64(max(r.ckpts[k%len(r.ckpts)].entries, 1))
}

func (r benchResult) p(q float64) time.Duration { return pct(r.durs, q) }

// pct returns the q-quantile of ds.
func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	d := append([]time.Duration(nil), ds...)
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	i := int(q*float64(len(d)-1) + 0.5)
	return d[i].Round(time.Millisecond)
}

// blobValue is the pre-filled state: a payload per key.
type blobValue struct {
	Payload []byte `proto:"1"`
	Count   int64  `proto:"2"`
}

// fillFn writes one value per key: the pre-fill phase and the measured
// phase (a new key for every event) of job (a).
type fillFn struct {
	size int
	st   *state.Value[blobValue]
	buf  []byte
}

func (f *fillFn) Open(ctx *eddy.OpenContext) error {
	var err error
	f.st, err = state.NewValue[blobValue](ctx.State, "values")
	f.buf = make([]byte, f.size)
	return err
}

func (f *fillFn) Process(ctx *eddy.Context[int64, int64], k *int64) error {
	v, _ := f.st.Get()
	v.Count++
	if v.Payload == nil {
		v.Payload = f.buf
	}
	f.st.Update(v)
	return nil
}

// keySource emits keys [from, from+n) at a rate, spread over splits.
type keySource struct {
	name    string
	from, n int64
	rate    float64
	splits  int
}

func (s keySource) Name() string { return s.name }
func (s keySource) Splits() int  { return s.splits }
func (s keySource) OpenSplit(_ context.Context, split int, pos []byte) (eddy.SplitReader[int64], error) {
	r := &keyReader{s: s, next: s.from + int64(split), start: time.Now()}
	if len(pos) == 8 {
		var v int64
		for i := 0; i < 8; i++ {
			v |= int64(pos[i]) << (8 * i)
		}
		r.next = v
	}
	return r, nil
}

type keyReader struct {
	s     keySource
	next  int64
	start time.Time
	done  int64
}

func (r *keyReader) Next(k *int64) (eddy.ReadStatus, error) {
	if r.next >= r.s.from+r.s.n {
		return eddy.End, nil
	}
	if r.s.rate > 0 && r.done%64 == 0 {
		allowed := int64(time.Since(r.start).Seconds() * r.s.rate / float64(r.s.splits))
		if r.done > allowed {
			return eddy.Idle, nil
		}
	}
	*k = r.next
	r.next += int64(r.s.splits)
	r.done++
	return eddy.Record, nil
}

func (r *keyReader) Position() []byte {
	b := make([]byte, 8)
	for i := 0; i < 8; i++ {
		b[i] = byte(r.next >> (8 * i))
	}
	return b
}
func (r *keyReader) Close() error { return nil }

// benchRun pre-fills state (job a) or warms up windows (job b), then
// measures checkpoints for cfg.dur, then measures a restore.
func benchRun(cfg benchConfig, stderr io.Writer) (benchResult, error) {
	var res benchResult
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return res, err
	}
	var reqs blob.Counter
	store, s3, err := cfg.store(&reqs)
	if err != nil {
		return res, err
	}
	httpReqs := func() blob.Requests {
		if s3 == nil {
			return blob.Requests{}
		}
		return blob.Requests(s3.Stats())
	}
	res.s3 = s3 != nil
	// The requests are counted from the completion of the checkpoint
	// before the first measured one, if the measured job completed one
	// (with the changelog, the first checkpoints are not measured), else
	// from the first measured one's: not from the pre-fill's, which would
	// count the measured job's restore.
	var reqFrom, httpFrom blob.Requests
	var logFrom, logBytesFrom float64
	// The measured job's metrics: the changelog objects it uploads.
	reg := prometheus.NewRegistry()
	var fromAt time.Time
	var mu sync.Mutex
	measuring := false
	var ckpts []benchCkpt // the measured run's checkpoints
	var current *eddy.Env // the environment whose checkpoints count
	started := make(chan struct{})
	slow := cfg.slowTracer(stderr)
	defer slow.stop()
	opts := func(extra ...eddy.Option) []eddy.Option {
		o := append(cfg.options(store), eddy.OnCheckpoint(func(s eddy.CheckpointStats) {
			mu.Lock()
			defer mu.Unlock()
			// With the changelog, measure from the first completed
			// materialization of each subtask on: before it, checkpoints
			// still carry the pre-fill's log.
			if !measuring && current != nil && (!cfg.changelog || current.Stats().Materializations >= 2) {
				measuring = true
				close(started)
			}
			now, r := time.Now(), reqs.Requests()
			switch {
			case current == nil:
			case measuring && !fromAt.IsZero():
				res.reqs, res.reqPeriod = r.Sub(reqFrom), now.Sub(fromAt)
				res.logObjs = logObjects(reg) - logFrom
				res.logBytes = logBytes(reg) - logBytesFrom
				res.httpReqs = httpReqs().Sub(httpFrom)
				res.reqCkpts++
			default:
				reqFrom, fromAt, httpFrom = r, now, httpReqs()
				logFrom, logBytesFrom = logObjects(reg), logBytes(reg)
			}
			if measuring {
				slow.check(s)
				res.keepSlow(s)
				res.stall = max(res.stall, s.MaterializationStall)
				res.durs = append(res.durs, s.Duration)
				res.syncs = append(res.syncs, s.SyncDuration)
				res.uploaded += s.Bytes
				res.full += s.FullSize
				res.entries += s.StateEntries
			}
			if current != nil && !s.Final {
				ckpts = append(ckpts, benchCkpt{s.ID, s.StateEntries})
			}
		}), eddy.RetainCheckpoints(max(cfg.restores, 3)))
		return append(o, extra...)
	}
	switch cfg.job {
	case "value":
		// Pre-fill, as fast as possible, ending with a final checkpoint.
		env := eddy.New(opts()...)
		cfg.buildValue(env, keySource{name: "prefill", from: 0, n: cfg.keys(), splits: 8})
		if err := env.Run(context.Background()); err != nil {
			return res, fmt.Errorf("pre-fill: %w", err)
		}
	case "window":
		if err := cfg.prefillWindows(opts()); err != nil {
			return res, fmt.Errorf("pre-fill: %w", err)
		}
	}
	// Measure: new keys at the rate (a), or GPS points into sliding
	// windows (b), for cfg.dur from the first counted checkpoint.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-started:
			time.Sleep(cfg.dur)
		case <-time.After(cfg.dur + 5*time.Minute):
		}
		cancel()
	}()
	// The measured job takes over the pre-fill's keyed state under
	// another source: a changed job, on purpose.
	env := eddy.New(append(opts(), eddy.AllowChangedJob(), eddy.Metrics(reg))...)
	mu.Lock()
	current = env
	mu.Unlock()
	cfg.build(env, cfg.rate)
	if err := env.Run(ctx); err != nil && ctx.Err() == nil {
		return res, fmt.Errorf("measuring: %w", err)
	}
	mu.Lock()
	measuring, current = false, nil
	n := len(res.durs)
	mu.Unlock()
	if n > 0 {
		res.uploaded /= int64(n)
		res.full /= int64(n)
		res.entries /= int64(n)
	}
	// Recovery: restore one of the last checkpoints and stop right after.
	// The caller calls restore several times, alternating with the other
	// configuration's, so both see the same machine. A restore writes to
	// an overlay (cfg.restoreStore), so the checkpoints stay as the
	// measured run left them.
	if len(ckpts) == 0 {
		return res, errors.New("measuring: no checkpoint completed")
	}
	for i := len(ckpts) - 1; i >= 0 && len(res.ckpts) < max(cfg.restores, 1); i-- {
		res.ckpts = append(res.ckpts, ckpts[i])
	}
	res.restore = func(round int) (time.Duration, blob.Requests, error) {
		var d time.Duration
		var id uint64
		var reqs blob.Requests
		want := res.ckpts[round%len(res.ckpts)].id
		cfg := cfg
		cfg.upto = want
		if cfg.warm {
			// As a failover inside a running process finds it: the heap
			// already grown by a restore of this state (an untimed one),
			// whose garbage is collected.
			runtime.GC()
			if _, _, _, err = restoreOnce(cfg); err != nil {
				return 0, reqs, err
			}
			runtime.GC()
			d, id, reqs, err = restoreOnce(cfg)
		} else {
			d, id, reqs, err = restoreInChild(cfg)
		}
		if err == nil && id != want {
			err = fmt.Errorf("recovery restored checkpoint %d, not %d", id, want)
		}
		return d, reqs, err
	}
	return res, nil
}

// logBytes is the bytes of the changelog objects the job registered in
// reg has uploaded (eddy_dstl_uploaded_bytes_total), 0 without a
// changelog.
func logBytes(reg *prometheus.Registry) float64 {
	return metricSum(reg, "eddy_dstl_uploaded_bytes_total")
}

// logObjects is the number of changelog objects the job registered in
// reg has written (eddy_dstl_objects_total: a streamed object of several
// batches counts once), 0 without a changelog.
func logObjects(reg *prometheus.Registry) float64 {
	return metricSum(reg, "eddy_dstl_objects_total")
}

// metricSum is the sum of the counter or gauge name's series in reg, 0 if
// it has none.
func metricSum(reg *prometheus.Registry, name string) float64 {
	var n float64
	for _, v := range seriesValues(reg, name) {
		n += v
	}
	return n
}

// gaugeMax is the largest value of the gauge name's series in reg, 0 if it
// has none.
func gaugeMax(reg *prometheus.Registry, name string) float64 {
	var n float64
	for _, v := range seriesValues(reg, name) {
		n = max(n, v)
	}
	return n
}

// seriesValues returns the values of the counter or gauge name's series in
// reg.
func seriesValues(reg *prometheus.Registry, name string) []float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return nil
	}
	var vs []float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				vs = append(vs, c.GetValue())
			} else {
				vs = append(vs, m.GetGauge().GetValue())
			}
		}
	}
	return vs
}

// options are the settings the runs of cfg share.
func (cfg benchConfig) options(store blob.Store) []eddy.Option {
	o := []eddy.Option{eddy.Parallelism(2), eddy.CheckpointStore(store, cfg.interval), eddy.LogOutput(io.Discard),
		eddy.CheckpointTimeout(5 * time.Minute)}
	if cfg.pebble {
		var po []pebble.PoolOption
		if cfg.pebbleMemory > 0 {
			po = append(po, pebble.Memory(cfg.pebbleMemory))
		}
		o = append(o, eddy.StateBackend(eddy.Pebble(filepath.Join(cfg.dir, "pebble"), po...)))
	}
	if cfg.changelog {
		o = append(o, eddy.Changelog(cfg.materialize, eddy.MaterializeAtLogRatio(cfg.logRatio),
			eddy.LogOptions(dstl.Options{HedgeAfterP90: cfg.hedgeP90, FlushInterval: cfg.logFlush, PersistDelay: cfg.persistDelay,
				FlushBytes: cfg.logFlushBytes, WriterFlushBytes: cfg.logWriterFlushBytes, MaxInFlight: cfg.logMaxInFlight, NoParts: !cfg.logParts})))
	}
	return o
}

// dataURL is where cfg's checkpoints are: its store URL, or the
// directory data under its working directory.
func (cfg benchConfig) dataURL() string {
	if cfg.storeURL != "" {
		return cfg.storeURL
	}
	return filepath.Join(cfg.dir, "data")
}

// store opens cfg's checkpoint storage, counting its operations in reqs,
// with object-store latency injected on uploads when cfg.latency is set,
// and on every operation with cfg.readLatency. The count is taken below
// the injected latency, of what reaches the store: a hedged request
// counts twice, as it is billed.
//
// For an S3 store it also returns the S3 store below, which counts HTTP
// requests: a multipart upload is several.
func (cfg benchConfig) store(reqs *blob.Counter) (blob.Store, *blobs3.Store, error) {
	inner, err := blob.Open(cfg.dataURL())
	if err != nil {
		return nil, nil, err
	}
	s3, _ := inner.(*blobs3.Store)
	return cfg.withLatency(blob.Count(inner, reqs)), s3, nil
}

// restoreStore is cfg's storage for a timed restore: the measured run's
// objects (in its directory or store URL) under an overlay that takes the
// restore's writes and deletes in a local scratch directory, emptied
// first, so the stored checkpoints stay as the measured run left them;
// with cfg.upto, the checkpoints after it are hidden. The operations on
// the measured run's store are counted in reqs; the scratch directory's
// are not (a restore's own first checkpoint is not what is measured).
func (cfg benchConfig) restoreStore(reqs *blob.Counter) (blob.Store, error) {
	raw, err := blob.Open(cfg.dataURL())
	if err != nil {
		return nil, err
	}
	base := blob.Count(raw, reqs)
	scratch := filepath.Join(cfg.dir, "restore-scratch")
	if err := os.RemoveAll(scratch); err != nil {
		return nil, err
	}
	top, err := blob.Open(scratch)
	if err != nil {
		return nil, err
	}
	o := newOverlay(base, top)
	if cfg.upto > 0 {
		// Checkpoints after upto are hidden by their manifests, so a
		// restore starts from upto. (Listed uncounted: a real
		// recovery does not do this.)
		st := checkpoint.NewStorage(raw, 1)
		ids, err := st.List(context.Background())
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if id > cfg.upto {
				o.hidden[st.ManifestName(id)] = true
			}
		}
	}
	return cfg.withLatency(o), nil
}

func (cfg benchConfig) withLatency(s blob.Store) blob.Store {
	if !cfg.latency {
		return s
	}
	return faulty.New(s, faulty.Options{Latency: faulty.ObjectStore(), PutOnly: !cfg.readLatency, Seed: 1})
}

// keys is the number of keys job (a) pre-fills.
func (cfg benchConfig) keys() int64 { return int64(cfg.stateMB) << 20 / int64(cfg.valueBytes) }

// buildValue adds job (a), reading keys from src, to env.
func (cfg benchConfig) buildValue(env *eddy.Env, src eddy.Source[int64]) {
	ks := eddy.KeyBy(eddy.FromSource(env, src), func(k *int64) int64 { return *k })
	out := eddy.Process[int64, int64, int64](ks, &fillFn{size: cfg.valueBytes}, eddy.Named("fill"))
	eddy.ToSink(out, discard.Sink[int64]())
}

// build adds cfg's measured job to env: new keys at rate (a), or GPS
// points into sliding windows (b).
func (cfg benchConfig) build(env *eddy.Env, rate float64) {
	switch cfg.job {
	case "value":
		cfg.buildValue(env, keySource{name: "new-keys", from: cfg.keys(), n: 1 << 40, rate: rate, splits: 8})
	case "window":
		buildWindows(env, datagen.GPS(append(cfg.gpsOptions(), datagen.Rate(rate))...))
	}
}

// restoreOnce restores the last checkpoint of cfg's job from its restore
// store, stops at the first checkpoint after it, and returns the recovery
// time, the id of the checkpoint restored and the requests made of the
// measured run's store until then.
func restoreOnce(cfg benchConfig) (time.Duration, uint64, blob.Requests, error) {
	var reqs blob.Counter
	store, err := cfg.restoreStore(&reqs)
	if err != nil {
		return 0, 0, blob.Requests{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := eddy.New(append(cfg.options(store), eddy.OnCheckpoint(func(eddy.CheckpointStats) { cancel() }))...)
	cfg.build(env, 1)
	stop := time.AfterFunc(2*time.Minute, cancel)
	defer stop.Stop()
	if err := env.Run(ctx); err != nil && ctx.Err() == nil {
		return 0, 0, blob.Requests{}, fmt.Errorf("recovery run: %w", err)
	}
	st := env.Stats()
	if st.RestoredFrom == 0 {
		return 0, 0, blob.Requests{}, errors.New("recovery run: no checkpoint restored")
	}
	return st.Recovery, st.RestoredFrom, reqs.Requests(), nil
}

// settingFlags registers on fs, into cfg, the settings that bench
// checkpoint and restore-once share.
func (cfg *benchConfig) settingFlags(fs *flag.FlagSet) {
	fs.IntVar(&cfg.stateMB, "state-mb", 1024, "value state to pre-fill before measuring, in MiB")
	fs.IntVar(&cfg.valueBytes, "value-bytes", 1024, "bytes per pre-filled value")
	fs.DurationVar(&cfg.interval, "interval", 10*time.Millisecond, "checkpoint interval")
	fs.DurationVar(&cfg.materialize, "materialize", 10*time.Second, "changelog materialization interval")
	fs.Int64Var(&cfg.pebbleMemory, "pebble-memory", 0, "with the Pebble backend: bytes of block cache and memtables of all databases (pebble.Memory; 0: its default)")
	fs.BoolVar(&cfg.latency, "latency", true, "inject object-store latency (p50 20 ms, p99 200 ms, p99.9 3 s) on uploads")
	fs.BoolVar(&cfg.readLatency, "read-latency", false, "with --latency, inject it on reads, lists and deletes too")
	fs.Float64Var(&cfg.logRatio, "log-ratio", 0.25, "changelog: materialize early once the log exceeds this share of the materialized state (eddy.MaterializeAtLogRatio)")
	fs.DurationVar(&cfg.logFlush, "log-flush", dstl.DefaultFlushInterval, "changelog: upload the log's current batch once its first change is this old (dstl.Options.FlushInterval; 0, the default: no timer, a batch ends at a barrier or at --log-flush-bytes)")
	fs.DurationVar(&cfg.persistDelay, "persist-delay", dstl.DefaultPersistDelay, "changelog: how long a subtask's barrier waits for the other subtasks' before the log's batch is uploaded (dstl.Options.PersistDelay; negative: upload at every barrier)")
	fs.IntVar(&cfg.logFlushBytes, "log-flush-bytes", dstl.DefaultFlushBytes, "changelog: upload the log's current batch early, before the next barrier, once it holds this many bytes (dstl.Options.FlushBytes)")
	fs.IntVar(&cfg.logWriterFlushBytes, "log-writer-flush-bytes", dstl.DefaultWriterFlushBytes, "changelog: upload the log's current batch early once one subtask's changes in it reach this many bytes (dstl.Options.WriterFlushBytes)")
	fs.IntVar(&cfg.logMaxInFlight, "log-max-in-flight", dstl.DefaultMaxInFlight, "changelog: bytes of the log queued or uploading beyond which state changes wait (dstl.Options.MaxInFlight)")
	fs.BoolVar(&cfg.logParts, "log-parts", true, "changelog: stream a checkpoint interval's log batches into one multipart upload on S3; false: one object per batch (dstl.Options.NoParts)")
	fs.Float64Var(&cfg.hedgeP90, "hedge-p90", dstl.DefaultHedgeAfterP90, "changelog: hedge a log upload after this many times the recent p90 (dstl.Options.HedgeAfterP90; negative: after the 1 s UploadTimeout only)")
}

// onceFlags registers on fs, into cfg, the flags of bench restore-once.
func (cfg *benchConfig) onceFlags(fs *flag.FlagSet) {
	fs.StringVar(&cfg.job, "job", "value", "job: value or window")
	fs.BoolVar(&cfg.changelog, "changelog", false, "the changelog is on")
	fs.BoolVar(&cfg.pebble, "pebble", false, "keyed state in Pebble databases under --dir")
	fs.StringVar(&cfg.dir, "dir", "", "the configuration's working directory")
	fs.StringVar(&cfg.storeURL, "store", "", "the configuration's checkpoint store URL (default: the directory data under --dir)")
	fs.StringVar(&cfg.restoreProfile, "cpuprofile", "", "write a CPU profile of the restore to <this>-<job>-<changelog>-<checkpoint>.pprof")
	fs.Uint64Var(&cfg.upto, "checkpoint", 0, "the checkpoint to restore (default: the latest)")
	cfg.settingFlags(fs)
}

// restoreFlags are the settings of cfg a restore needs, as flags of
// `eddy bench restore-once`.
func (cfg benchConfig) restoreFlags() []string {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	var c benchConfig
	c.onceFlags(fs) // the flags point into c, which then takes cfg's values
	c = cfg
	var args []string
	fs.VisitAll(func(f *flag.Flag) { args = append(args, "--"+f.Name+"="+f.Value.String()) })
	return args
}

// restoreInChild runs one restore in a new process of this program, as a
// recovery after a crash does: nothing of the state is in memory or in the
// process's heap yet.
func restoreInChild(cfg benchConfig) (time.Duration, uint64, blob.Requests, error) {
	var reqs blob.Requests
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, reqs, err
	}
	var out, errOut strings.Builder
	cmd := exec.Command(exe, append([]string{"bench", "restore-once"}, cfg.restoreFlags()...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return 0, 0, reqs, fmt.Errorf("restore in a new process: %v: %s", err, strings.TrimSpace(errOut.String()))
	}
	d, id, reqs, err := parseRestoreOnce(out.String())
	if err != nil {
		return 0, 0, reqs, fmt.Errorf("restore in a new process: %w", err)
	}
	return d, id, reqs, nil
}

// formatRestoreOnce is what bench restore-once prints: the recovery time,
// the checkpoint restored, and the Put, Get, List and Delete requests.
func formatRestoreOnce(d time.Duration, id uint64, r blob.Requests) string {
	return fmt.Sprintf("%v %d %d %d %d %d", d, id, r.Put, r.Get, r.List, r.Delete)
}

// parseRestoreOnce reads what formatRestoreOnce wrote.
func parseRestoreOnce(out string) (time.Duration, uint64, blob.Requests, error) {
	var r blob.Requests
	f := strings.Fields(out)
	if len(f) != 6 {
		return 0, 0, r, fmt.Errorf("printed %q, want a duration, a checkpoint id and four request counts", out)
	}
	d, err := time.ParseDuration(f[0])
	if err != nil {
		return 0, 0, r, fmt.Errorf("printed %q: recovery time: %v", out, err)
	}
	id, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, 0, r, fmt.Errorf("printed %q: checkpoint id: %v", out, err)
	}
	for i, p := range []*int64{&r.Put, &r.Get, &r.List, &r.Delete} {
		if *p, err = strconv.ParseInt(f[2+i], 10, 64); err != nil {
			return 0, 0, r, fmt.Errorf("printed %q: request count %d: %v", out, i+1, err)
		}
	}
	return d, id, r, nil
}

// restoreOnceCmd is `eddy bench restore-once`, which bench checkpoint runs
// in a new process for each cold recovery: it restores the last checkpoint
// of the configuration its flags give and prints the recovery time and the
// id of the checkpoint it restored.
func restoreOnceCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench restore-once", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg benchConfig
	cfg.onceFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.dir == "" || cfg.valueBytes <= 0 {
		fmt.Fprintln(stderr, "eddy bench restore-once: --dir and a positive --value-bytes are required")
		return 2
	}
	if cfg.restoreProfile != "" {
		stop, err := startCPUProfile(fmt.Sprintf("%s-%s-%v-%d.pprof", cfg.restoreProfile, cfg.job, cfg.changelog, cfg.upto))
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer stop()
	}
	d, id, reqs, err := restoreOnce(cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintln(stdout, formatRestoreOnce(d, id, reqs))
	return 0
}

// The window job (b) holds about --state-mb of window state, as job (a)
// holds that much value state: the number of drivers is chosen for it.
// Each driver reports once per windowReport (10 s) of event time, so each
// of its points falls in 6 windows (1 minute sliding by 10 s), opening
// one and updating five, and each window entry is written 6 times before
// its window fires and deletes it. At a fixed event rate, a larger state
// means more drivers, so event time advances more slowly: windowReport /
// drivers per event, at 50k events/s and 1 GiB about 0.11 s per second
// (a slide's windows fire every 90 s or so, all drivers' at once), at
// 256 MiB 0.45 s per second (every 22 s).
const (
	windowReport = 10 * time.Second
	// windowBytesPerDriver is the bytes of a full snapshot of the window
	// state per driver at the steady state, measured: 6 to 7 open
	// windows per driver, each an entry of the driver's map.
	windowBytesPerDriver = 240
	minWindowDrivers     = 10_000
)

// drivers is the number of drivers of the window job (b): about
// --state-mb of window state.
func (cfg benchConfig) drivers() int {
	return max(minWindowDrivers, int(int64(cfg.stateMB)<<20/windowBytesPerDriver))
}

// gpsOptions are the options of the window job's source, but its rate.
func (cfg benchConfig) gpsOptions() []datagen.Option {
	n := cfg.drivers()
	return []datagen.Option{datagen.Drivers(n), datagen.Spacing(windowReport / time.Duration(n))}
}

// prefillWindows fills the window job's state, as fast as possible, with
// a window's length and a slide of event time, so that every driver's
// windows are open as in the steady state, and stops with a savepoint
// (not at the end of the input, whose watermark would fire and delete
// every window). The measured run resumes the source where it stopped.
func (cfg benchConfig) prefillWindows(opts []eddy.Option) error {
	n := int64(cfg.drivers())
	src := &pausingSource[datagen.GPSPoint]{Source: datagen.GPS(cfg.gpsOptions()...), at: n * int64(time.Minute+10*time.Second) / int64(windowReport),
		paused: make(chan struct{})}
	env := eddy.New(opts...)
	buildWindows(env, src)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() {
		select {
		case <-src.paused:
			_, err := env.StopWithSavepoint(ctx)
			stopped <- err
		case <-ctx.Done():
			stopped <- nil
		}
	}()
	err := env.Run(ctx)
	if err == nil {
		err = <-stopped
	}
	return err
}

// pausingSource is a datagen source whose splits pause (read Idle) from
// the global index at on: a bounded run that does not end its input.
// paused is closed once all splits have.
type pausingSource[T any] struct {
	eddy.Source[T]
	at      int64
	mu      sync.Mutex
	done    int
	paused  chan struct{}
	counted map[int]bool
}

func (s *pausingSource[T]) OpenSplit(ctx context.Context, split int, pos []byte) (eddy.SplitReader[T], error) {
	r, err := s.Source.OpenSplit(ctx, split, pos)
	if err != nil {
		return nil, err
	}
	return &pausingReader[T]{SplitReader: r, s: s, split: split}, nil
}

type pausingReader[T any] struct {
	eddy.SplitReader[T]
	s     *pausingSource[T]
	split int
}

func (r *pausingReader[T]) Next(rec *T) (eddy.ReadStatus, error) {
	if i, n := binary.Uvarint(r.Position()); n > 0 && int64(i) >= r.s.at {
		r.s.mu.Lock()
		if !r.s.counted[r.split] {
			if r.s.counted == nil {
				r.s.counted = map[int]bool{}
			}
			r.s.counted[r.split] = true
			if r.s.done++; r.s.done == r.s.Splits() {
				close(r.s.paused)
			}
		}
		r.s.mu.Unlock()
		return eddy.Idle, nil
	}
	return r.SplitReader.Next(rec)
}

// buildWindows adds job (b) to env: GPS points from src into 1-minute
// sliding windows with a 10-second slide, a count per driver and window.
func buildWindows(env *eddy.Env, src eddy.Source[datagen.GPSPoint]) {
	pts := eddy.FromSource(env, src, eddy.Watermarks(func(p *datagen.GPSPoint) time.Time { return p.Timestamp }, time.Second))
	ks := eddy.KeyBy(pts, func(p *datagen.GPSPoint) string { return p.DriverID })
	w := eddy.AggregateWindows(ks, eddy.Sliding(time.Minute, 10*time.Second), eddy.Aggregator[string, datagen.GPSPoint, int64, int64]{
		Add:    func(n int64, _ *datagen.GPSPoint) int64 { return n + 1 },
		Result: func(_ string, _ eddy.Window, n int64) int64 { return n },
	}, eddy.WindowOp(eddy.Named("windows")))
	eddy.ToSink(w.Results, discard.Sink[int64]())
}

// requestColumns are the cells of r's row in the requests table: per
// checkpoint and per minute of the measured run, then per recovery.
func (r *benchResult) requestColumns() string {
	var cells []string
	if r.reqCkpts > 0 && r.reqPeriod > 0 {
		n, mins := float64(r.reqCkpts), r.reqPeriod.Minutes()
		for _, v := range []int64{r.reqs.Put, r.reqs.Get, r.reqs.List, r.reqs.Delete} {
			cells = append(cells, fmt.Sprintf("%.1f", float64(v)/n))
		}
		cells = append(cells, fmt.Sprintf("%.1f", r.logObjs/n))
		if r.logObjs > 0 {
			cells = append(cells, fmt.Sprintf("%.1f", r.logBytes/r.logObjs/(1<<20)))
		} else {
			cells = append(cells, "-")
		}
		if r.s3 {
			cells = append(cells, fmt.Sprintf("%.1f", float64(r.httpReqs.Put)/n))
		} else {
			cells = append(cells, "-")
		}
		for _, v := range []int64{r.reqs.Put, r.reqs.Get, r.reqs.List, r.reqs.Delete} {
			cells = append(cells, fmt.Sprintf("%.0f", float64(v)/mins))
		}
	} else {
		// Fewer than two measured checkpoints: no interval to divide by.
		for range 11 {
			cells = append(cells, "-")
		}
	}
	median := func(get func(blob.Requests) int64) string {
		if len(r.recReqs) == 0 {
			return "-"
		}
		vs := make([]int64, len(r.recReqs))
		for i, q := range r.recReqs {
			vs[i] = get(q)
		}
		slices.Sort(vs)
		return strconv.FormatInt(vs[len(vs)/2], 10)
	}
	cells = append(cells, median(func(q blob.Requests) int64 { return q.Get }), median(func(q blob.Requests) int64 { return q.List }))
	return strings.Join(cells, "\t")
}

// removeStore deletes every object of the store url names.
func removeStore(url string) error {
	s, err := blob.Open(url)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return deleteAll(ctx, s)
}

// startCPUProfile writes a CPU profile of the process to path until the
// returned function is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
