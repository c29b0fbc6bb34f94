package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/eddyflow/eddy/internal/cputime"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/nexmark"
	"github.com/eddyflow/eddy/internal/nexmarkq"
)

// nexmarkRun runs Nexmark queries, one job after the other, on the events
// `eddy nexmark gen` writes for the same --events, --seed and --rate. With
// --out, query qN's result goes to DIR/qN/ exactly once (checkpoints in
// DIR/.checkpoints/qN, so a rerun after a kill resumes); without it, the
// results are discarded and each query's events/s and CPU per event are the
// point.
func nexmarkRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nexmark run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	queries := fs.String("query", "all", "queries to run, comma-separated (q0,...,q12), or all")
	events := fs.Int64("events", 0, "number of events (at least 1)")
	seed := fs.Uint64("seed", nexmark.DefaultSeed, "seed of the events' content")
	rate := fs.Float64("rate", nexmark.DefaultRate, "events per second of event time, as for gen (it does not slow the run)")
	par := fs.Int("parallelism", 1, "parallelism of every operator (and number of source splits)")
	interval := fs.Duration("checkpoint-interval", time.Second, "time between checkpoints; 0: none (only without --out)")
	out := fs.String("out", "", "write each query's result as JSON lines into DIR/<query>/; without it results are discarded")
	paced := fs.Bool("paced", false, "emit the events at --rate per second of wall-clock time too (a long run to watch or to kill), instead of as fast as the job takes them")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "eddy nexmark run: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	qs, err := nexmarkq.Lookup(*queries)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "eddy nexmark run: --query: %v\n", err)
		return 2
	case *events < 1:
		fmt.Fprintln(stderr, "eddy nexmark run: --events (at least 1) is required")
		return 2
	case *par < 1:
		fmt.Fprintln(stderr, "eddy nexmark run: --parallelism must be at least 1")
		return 2
	case *out != "" && *interval <= 0:
		fmt.Fprintln(stderr, "eddy nexmark run: --out needs checkpoints (--checkpoint-interval > 0): they commit the output")
		return 2
	}
	srcOpts := []nexmark.Option{nexmark.Seed(*seed), nexmark.Events(*events), nexmark.Rate(*rate), nexmark.Splits(*par)}
	if *paced {
		srcOpts = append(srcOpts, nexmark.Paced())
	}
	src, err := nexmark.New(srcOpts...)
	if err != nil {
		fmt.Fprintf(stderr, "eddy nexmark run: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintf(stdout, "nexmark: %d events, seed %d, rate %s/s, parallelism %d, checkpoints every %v\n",
		*events, *seed, strconv.FormatFloat(*rate, 'f', -1, 64), *par, *interval)
	fmt.Fprintf(stdout, "%-5s %14s %14s %10s\n", "query", "events/s", "CPU-ns/event", "time")
	for _, q := range qs {
		r, err := runNexmarkQuery(ctx, q, src, *par, *interval, *out, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "eddy nexmark run: %s: %v\n", q.Name, err)
			return 1
		}
		fmt.Fprintf(stdout, "%-5s %14.0f %14.0f %10v\n", q.Name, float64(*events)/r.elapsed.Seconds(),
			float64(r.cpu.Nanoseconds())/float64(*events), r.elapsed.Round(time.Millisecond))
	}
	if *out != "" {
		fmt.Fprintf(stdout, "results in %s/<query>/\n", *out)
	}
	return 0
}

// queryRun is what one query's run cost.
type queryRun struct {
	elapsed, cpu time.Duration
}

// runNexmarkQuery runs one query to the end of the events. Checkpoints go
// to out/.checkpoints/<query>, or to a temporary directory without out.
func runNexmarkQuery(ctx context.Context, q nexmarkq.Query, src *nexmark.Source, par int, interval time.Duration, out string, stderr io.Writer) (queryRun, error) {
	opts := []eddy.Option{eddy.Parallelism(par), eddy.JobName("nexmark-" + q.Name), eddy.LogOutput(stderr)}
	dir := ""
	if out != "" {
		dir = nexmarkq.Dir(out, q.Name)
	}
	if interval > 0 {
		data := ""
		if out != "" {
			data = filepath.Join(out, ".checkpoints", q.Name)
			if err := os.MkdirAll(data, 0o755); err != nil {
				return queryRun{}, err
			}
		} else {
			tmp, err := os.MkdirTemp("", "eddy-nexmark-"+q.Name+"-")
			if err != nil {
				return queryRun{}, err
			}
			defer os.RemoveAll(tmp)
			data = tmp
		}
		abs, err := filepath.Abs(data)
		if err != nil {
			return queryRun{}, err
		}
		opts = append(opts, eddy.Checkpoints("file://"+abs, interval))
	}
	env := eddy.New(opts...)
	q.Build(env, src, dir)
	start, cpu := time.Now(), cputime.Process()
	err := env.Run(ctx)
	return queryRun{elapsed: time.Since(start), cpu: cputime.Process() - cpu}, err
}
