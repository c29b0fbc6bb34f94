package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/internal/demojob"
)

// demo runs the ride-sharing job: generated GPS points → key by driver →
// running distance and point count per driver in keyed state, and
// per-driver 10-second event-time windows → exactly-once JSON lines under
// --out. Rerun with the same --data after a kill and it
// resumes from its last checkpoint.
func demo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := demojob.Config{}
	fs.Uint64Var(&c.Seed, "seed", 7, "seed of the generated GPS points")
	fs.Int64Var(&c.Events, "events", 2_000_000, "number of GPS points (bounded run)")
	fs.IntVar(&c.Drivers, "drivers", 1000, "number of distinct drivers (keys)")
	fs.StringVar(&c.Data, "data", "./eddy-data", "checkpoint storage: a directory, or a store URL such as file:///var/lib/eddy or s3://bucket/prefix?endpoint=http://127.0.0.1:7070&region=us-east-1 (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
	fs.StringVar(&c.Out, "out", "./out", "output directory (committed part-*.jsonl files)")
	fs.DurationVar(&c.CheckpointInterval, "checkpoint-interval", 200*time.Millisecond, "time between checkpoints (10ms or more)")
	fs.IntVar(&c.Parallelism, "parallelism", runtime.NumCPU(), "subtasks per operator")
	fs.Float64Var(&c.Rate, "rate", 100_000, "events per second (0: as fast as possible)")
	fs.Int64Var(&c.EmitEvery, "emit-every", 100, "write a driver's totals after every n-th of its points")
	fs.Int64Var(&c.LateEvery, "late-every", 500, "stamp every n-th point of a driver an hour late (0: none)")
	quiet := fs.Bool("quiet", false, "no live progress line")
	restoreID := fs.Uint64("restore", 0, "restore this checkpoint (a savepoint, say) instead of the newest; what newer checkpoints committed is rolled back")
	allowDup := fs.Bool("allow-duplicates-on-fallback", false, "when the newest checkpoints are unusable and a sink that cannot roll back (Kafka) committed after the one restored, resume anyway: that output is written again")
	kafkaBrokers := fs.String("kafka", "", "run from and to Kafka topics on these brokers (host:port,...)")
	group := fs.Bool("group", false, "with --kafka: be one of several processes of the job, started with the same --kafka and --data (an s3:// store to span machines): they share its tasks, one per input partition, over a Kafka consumer group, and move them when a process stops, dies or joins; runs until Ctrl-C")
	var g groupFlags
	fs.StringVar(&g.instance, "instance", "", "with --group: a stable name of this process (static group membership): restarted with the same name within the session timeout, it gets its tasks back")
	fs.DurationVar(&g.session, "session-timeout", 0, "with --group: how long the group waits for a silent process before it moves its tasks (default 45s; the brokers bound it, 6s to 30m by default)")
	fs.BoolVar(&g.untilEnd, "until-end", false, "with --group: each task stops once it has read its partition up to the end offset at its first start (for benchmarks); the process stays in the group until stopped")
	fs.BoolVar(&c.Changelog, "changelog", false, "use the changelog state backend (durable short-term log + background materialization)")
	fs.DurationVar(&c.Materialize, "materialize", 10*time.Second, "with --changelog: time between materializations")
	stateKind := fs.String("state", "heap", "where keyed state lives: heap (memory) or pebble (Pebble databases on local disk, incremental checkpoints)")
	fs.StringVar(&c.PebbleDir, "state-dir", "./eddy-state", "with --state pebble: the local directory of the databases")
	fs.Int64Var(&c.PebbleMemory, "state-memory", 0, "with --state pebble: bytes of block cache and memtables of all databases (0: the default, 256 MiB)")
	admin := fs.String("admin", "", "serve /metrics, the admin API and a web page on this loopback host:port (port 0: any free port); with --group, /metrics of the process's tasks")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch *stateKind {
	case "heap":
		c.PebbleDir, c.PebbleMemory = "", 0
	case "pebble":
		if c.PebbleDir == "" {
			fmt.Fprintln(stderr, "eddy demo: --state pebble needs a --state-dir")
			return 2
		}
	default:
		fmt.Fprintf(stderr, "eddy demo: --state %q: choose heap or pebble\n", *stateKind)
		return 2
	}
	if c.Events < 1 || c.Drivers < 1 || c.Parallelism < 1 {
		fmt.Fprintln(stderr, "eddy demo: --events, --drivers and --parallelism must be at least 1")
		return 2
	}
	if c.Data == "" {
		// Without a checkpoint directory the job could not resume, and
		// a rerun would commit its output again.
		fmt.Fprintln(stderr, "eddy demo: --data must name a checkpoint directory or store URL")
		return 2
	}
	// The store is opened here, not by the job, so that a wrong URL,
	// endpoint, bucket or credentials is a usage error reported before
	// anything runs (blob/s3 probes the bucket at open), and so that its
	// requests are counted.
	var reqs blob.Counter
	var store countedStore
	if *kafkaBrokers == "" {
		var err error
		if store, err = openCounted(c.Data, &reqs); err != nil {
			fmt.Fprintf(stderr, "eddy demo: --data: %v\n", err)
			return 2
		}
	} else if _, err := blob.Open(c.Data); err != nil {
		// The Kafka demo keeps two jobs' checkpoints under --data.
		fmt.Fprintf(stderr, "eddy demo: --data: %v\n", err)
		return 2
	}
	committedBefore := committedLines(c.Out)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := []eddy.Option{eddy.LogOutput(stderr)}
	if *allowDup {
		opts = append(opts, eddy.AllowDuplicatesOnFallback())
	}
	if *restoreID != 0 {
		opts = append(opts, eddy.RestoreCheckpoint(*restoreID))
	}
	if *admin != "" && !*group {
		opts = append(opts, eddy.Admin(*admin))
	}
	if *group {
		switch {
		case *kafkaBrokers == "":
			fmt.Fprintln(stderr, "eddy demo: --group needs --kafka")
			return 2
		case *restoreID != 0:
			// Each task is a job of its own, with its own checkpoints.
			fmt.Fprintln(stderr, "eddy demo: --restore does not work with --group")
			return 2
		}
		g.admin = *admin
		err := kafkaDemoGroup(ctx, c, splitBrokers(*kafkaBrokers), g, stdout, opts...)
		if err != nil && !(ctx.Err() != nil && errors.Is(err, context.Canceled)) {
			fmt.Fprintf(stderr, "eddy demo: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, "eddy demo --group: handed the tasks over and left the group")
		return 0
	}
	var env *eddy.Env
	if *kafkaBrokers != "" {
		var err error
		if env, store, err = kafkaDemoEnv(ctx, c, splitBrokers(*kafkaBrokers), stdout, &reqs, opts...); err != nil {
			fmt.Fprintf(stderr, "eddy demo: %v\n", err)
			return 1
		}
	} else {
		jc := c
		jc.Data = "" // the store is given open instead
		env = demojob.Env(jc, append(opts, eddy.CheckpointStore(store, c.CheckpointInterval))...)
	}
	fmt.Fprintf(stdout, "eddy demo: %d GPS points from %d drivers (seed %d), parallelism %d, checkpoints every %v to %s, output in %s\n",
		c.Events, c.Drivers, c.Seed, c.Parallelism, c.CheckpointInterval, c.Data, c.Out)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- env.Run(ctx) }()
	if *admin != "" {
		printAdminURL(env, done, stdout)
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last eddy.Stats
	lastAt := start
	var err error
loop:
	for {
		select {
		case err = <-done:
			break loop
		case now := <-tick.C:
			if *quiet {
				continue
			}
			if rp := env.RestoreProgress(); !rp.Done && rp.Checkpoint != 0 {
				fmt.Fprintf(stdout, "\r  restoring checkpoint %d: %d of %d subtasks restored   ", rp.Checkpoint, rp.Restored, rp.Subtasks)
				continue
			}
			s := env.Stats()
			rate := float64(s.RecordsIn-last.RecordsIn) / now.Sub(lastAt).Seconds()
			last, lastAt = s, now
			fmt.Fprintf(stdout, "\r  %10d events  %9.0f ev/s  state %7d keys  checkpoints %5d (last %v, %s)  restarts %d   ",
				s.RecordsIn, rate, s.StateEntries, s.Checkpoints, s.LastCheckpoint.Round(time.Millisecond), bytesString(s.LastBytes), s.Restarts)
		}
	}
	if !*quiet {
		fmt.Fprintln(stdout)
	}
	s := env.Stats()
	elapsed := time.Since(start)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "summary\t")
	if s.RestoredFrom != 0 {
		fmt.Fprintf(tw, "  resumed from checkpoint\t%d\n", s.RestoredFrom)
	}
	fmt.Fprintf(tw, "  events read this run\t%d\n", s.RecordsIn)
	fmt.Fprintf(tw, "  lines written this run\t%d\n", s.RecordsOut)
	fmt.Fprintf(tw, "  lines committed this run\t%d\n", committedLines(c.Out)-committedBefore)
	fmt.Fprintf(tw, "  elapsed\t%v\n", elapsed.Round(time.Millisecond))
	fmt.Fprintf(tw, "  throughput\t%.0f events/s\n", float64(s.RecordsIn)/elapsed.Seconds())
	fmt.Fprintf(tw, "  checkpoints completed\t%d\n", s.Checkpoints)
	fmt.Fprintf(tw, "  last checkpoint\t%v, %s\n", s.LastCheckpoint.Round(time.Microsecond), bytesString(s.LastBytes))
	fmt.Fprintf(tw, "  state entries\t%d\n", s.StateEntries)
	fmt.Fprintf(tw, "  last checkpoint uploaded\t%s (full size %s)\n", bytesString(s.LastUploaded), bytesString(s.LastFullSize))
	if c.Changelog {
		fmt.Fprintf(tw, "  materializations\t%d (last %v)\n", s.Materializations, s.LastMaterialization.Round(time.Millisecond))
	}
	if s.RestoredFrom != 0 {
		fmt.Fprintf(tw, "  recovery time\t%v\n", s.Recovery.Round(time.Millisecond))
	}
	requestSummary(tw, store, s.Checkpoints)
	fmt.Fprintf(tw, "  late points this run\t%d\n", s.LateRecords)
	fmt.Fprintf(tw, "  restarts\t%d\n", s.Restarts)
	tw.Flush()
	if err != nil {
		if ctx.Err() != nil {
			// Stopped by SIGINT or SIGTERM, and only then.
			fmt.Fprintf(stdout, "stopped; run the same command again to resume from the last checkpoint\n")
			return 130
		}
		fmt.Fprintf(stderr, "eddy demo: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "done: running totals in %s/*.jsonl, 10-second windows in %s/windows/*.jsonl, late points in %s/late/*.jsonl\n", c.Out, c.Out, c.Out)
	return 0
}

func bytesString(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// committedLines counts the lines of the demo's committed output files
// under out (totals, windows, late points); a directory that does not exist
// yet has none.
func committedLines(out string) int64 {
	var n int64
	for _, dir := range []string{out, filepath.Join(out, "windows"), filepath.Join(out, "late")} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err == nil {
				n += int64(bytes.Count(data, []byte{'\n'}))
			}
		}
	}
	return n
}
