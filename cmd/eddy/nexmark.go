package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/connector/nexmark"
)

// nexmarkCmd runs `eddy nexmark <subcommand>`.
func nexmarkCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "gen":
			return nexmarkGen(args[1:], stdout, stderr)
		case "run":
			return nexmarkRun(args[1:], stdout, stderr)
		case "help", "-h", "--help":
			nexmarkUsage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "eddy nexmark: unknown subcommand %q\n", args[0])
	}
	nexmarkUsage(stderr)
	return 2
}

func nexmarkUsage(w io.Writer) {
	fmt.Fprintln(w, `usage: eddy nexmark <subcommand> [flags]

subcommands:
  gen  --events N --seed S [--rate R] --out FILE: write the Nexmark events as JSON lines
  run  --query q0,...|all --events N --seed S [--rate R] [--parallelism P]
       [--checkpoint-interval D] [--out DIR] [--paced]: run Nexmark queries on those events;
       with --out, query qN's result goes to DIR/qN/ as JSON lines, else the
       results are discarded and events/s and CPU-ns per event are printed;
       --paced emits the events at --rate per second of wall-clock time`)
}

// nexmarkGen writes events 0 to N-1 of the Nexmark generator as JSON lines
// in Flink's nested row shape. The file depends only on --events, --seed
// and --rate; --splits reads the events through that many splits, which
// changes nothing but lets a test show that.
func nexmarkGen(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nexmark gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	events := fs.Int64("events", 0, "number of events to write (at least 1)")
	seed := fs.Uint64("seed", nexmark.DefaultSeed, "seed of the events' content")
	rate := fs.Float64("rate", nexmark.DefaultRate, "events per second of event time: event i happens at 2015-07-15T00:00:00Z + i/rate s (truncated to ms); it does not slow the writing")
	out := fs.String("out", "", "output file (written whole, then renamed into place), or - for standard output")
	splits := fs.Int("splits", 1, "read the events through this many splits (the output is the same for any)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "eddy nexmark gen: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *events < 1 || *out == "" {
		fmt.Fprintln(stderr, "eddy nexmark gen: --events (at least 1) and --out are required")
		return 2
	}
	src, err := nexmark.New(nexmark.Seed(*seed), nexmark.Events(*events), nexmark.Rate(*rate), nexmark.Splits(*splits))
	if err != nil {
		fmt.Fprintf(stderr, "eddy nexmark gen: %v\n", err)
		return 2
	}
	report := stdout
	if *out == "-" {
		report = stderr // stdout holds the events
	}
	start := time.Now()
	n, err := writeNexmark(*out, stdout, src)
	if err != nil {
		fmt.Fprintf(stderr, "eddy nexmark gen: %v\n", err)
		return 1
	}
	elapsed := time.Since(start)
	fmt.Fprintf(report, "eddy nexmark gen: %d events (seed %d, rate %s/s), %s to %s in %v (%.0f events/s)\n",
		*events, *seed, strconv.FormatFloat(*rate, 'f', -1, 64), bytesString(n), *out, elapsed.Round(time.Millisecond), float64(*events)/elapsed.Seconds())
	return 0
}

// writeNexmark writes all events of src to path ("-": stdout) and returns
// the number of bytes. A file appears only once complete.
func writeNexmark(path string, stdout io.Writer, src *nexmark.Source) (int64, error) {
	if path == "-" {
		return writeEvents(stdout, src)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, err
	}
	n, err := writeEvents(f, src)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return 0, err
	}
	return n, nil
}

// writeEvents writes the events of src as JSON lines in index order: event
// i comes from split i % splits, so reading the splits round-robin gives
// the order.
func writeEvents(w io.Writer, src *nexmark.Source) (int64, error) {
	readers := make([]connector.SplitReader[nexmark.Event], src.Splits())
	for s := range readers {
		r, err := src.OpenSplit(context.Background(), s, nil)
		if err != nil {
			return 0, err
		}
		defer r.Close()
		readers[s] = r
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var e nexmark.Event
	var line []byte
	var n int64
	for i := range src.Len() {
		st, err := readers[i%int64(len(readers))].Next(&e)
		if err != nil {
			return n, err
		}
		if st != connector.Record {
			return n, fmt.Errorf("split %d: status %d at event %d of %d", i%int64(len(readers)), st, i, src.Len())
		}
		line = append(e.AppendJSON(line[:0]), '\n')
		if _, err := bw.Write(line); err != nil {
			return n, err
		}
		n += int64(len(line))
	}
	for s, r := range readers {
		if st, err := r.Next(&e); err != nil || st != connector.End {
			return n, errors.Join(fmt.Errorf("split %d did not end after %d events (status %d)", s, src.Len(), st), err)
		}
	}
	return n, bw.Flush()
}
