package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	_ "github.com/eddyflow/eddy/blob/file"
	_ "github.com/eddyflow/eddy/blob/s3"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/internal/inspect"
	"github.com/eddyflow/eddy/serde"
)

const checkpointsUsage = `usage: eddy checkpoints <list|show|verify> [ID] --data DIR|URL [--format text|json]
  list          every checkpoint: id, time, size, status, source positions
  show ID       one checkpoint: job, fingerprint, source positions per split,
                operators with their parts, log ranges and schemas, sink transactions
  verify ID     read every file the checkpoint lists and check it; exit 1 on any problem
ID is a checkpoint id or "latest" (for show, the newest usable checkpoint,
as a restore chooses it; for verify, the newest one). Nothing is written to
the store.`

// checkpointsCmd runs `eddy checkpoints list|show|verify`.
func checkpointsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, checkpointsUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	fs := flag.NewFlagSet("checkpoints "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, checkpointsUsage) }
	data := fs.String("data", "", "checkpoint store: a directory or a URL (file://, s3://)")
	format := fs.String("format", "text", "output format: text or json")
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return 2
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "eddy checkpoints %s: --format %q: want text or json\n", sub, *format)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "eddy checkpoints %s: %v\n", sub, err)
		return 1
	}
	switch sub {
	case "list":
		if len(pos) != 0 {
			fmt.Fprintf(stderr, "eddy checkpoints list: unexpected argument %q\n", pos[0])
			return 2
		}
	case "show", "verify":
		if len(pos) != 1 {
			fmt.Fprintf(stderr, "eddy checkpoints %s: want one checkpoint ID (or \"latest\")\n", sub)
			return 2
		}
	default:
		fmt.Fprintf(stderr, "eddy checkpoints: unknown subcommand %q\n%s\n", sub, checkpointsUsage)
		return 2
	}
	store, err := inspect.OpenStore(*data)
	if err != nil {
		return fail(err)
	}
	switch sub {
	case "list":
		list, err := inspect.List(ctx, store)
		if err != nil {
			return fail(err)
		}
		if *format == "json" {
			return writeJSON(stdout, stderr, list)
		}
		if len(list) == 0 {
			fmt.Fprintf(stdout, "no checkpoints in %s\n", *data)
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTIME\tSIZE\tSTATUS\tOPERATORS\tFILES\tSOURCES")
		for _, s := range list {
			status := s.Status
			if s.Changelog {
				status += " (changelog)"
			}
			when := "-"
			if !s.Time.IsZero() {
				when = s.Time.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%s\n", s.ID, when, inspect.FormatBytes(s.Size), status,
				s.Operators, s.Files, strings.Join(s.Sources, "; "))
		}
		tw.Flush()
		for _, s := range list {
			if s.Reason != "" {
				fmt.Fprintf(stdout, "checkpoint %d %s: %s\n", s.ID, s.Status, s.Reason)
			}
		}
		return 0
	case "show":
		m, skipped, err := inspect.FindCheckpoint(ctx, store, pos[0])
		noteSkipped(stderr, "eddy checkpoints show", skipped)
		if err != nil {
			return fail(err)
		}
		q, err := checkpoint.NewStorage(store, 0).Quarantined(ctx)
		if err != nil {
			return fail(err)
		}
		d := inspect.Show(ctx, store, m, q[m.ID])
		if *format == "json" {
			return writeJSON(stdout, stderr, d)
		}
		printDetails(stdout, d)
		return 0
	default: // verify
		// "latest" is the newest listed checkpoint, usable or not: verify
		// is how to find out what is wrong with it.
		n, err := inspect.ParseID(ctx, store, pos[0])
		if err != nil {
			return fail(err)
		}
		prog := newProgress(stderr, "verify")
		r, err := inspect.Verify(ctx, store, n, func(done, total int) { prog.update("%d/%d files", done, total) })
		prog.done()
		if err != nil {
			return fail(err)
		}
		if *format == "json" {
			if code := writeJSON(stdout, stderr, r); code != 0 {
				return code
			}
		} else {
			for _, p := range r.Problems {
				fmt.Fprintf(stdout, "FAIL %s\n", p)
			}
			verdict := "ok"
			if len(r.Problems) > 0 {
				verdict = fmt.Sprintf("%d problems", len(r.Problems))
			}
			fmt.Fprintf(stdout, "checkpoint %d: %s (%d files, %s; %d state parts, %d entries; %d log objects, %d changes)\n",
				r.ID, verdict, r.Files, inspect.FormatBytes(r.Bytes), r.Parts, r.Entries, r.LogObjects, r.Changes)
		}
		if len(r.Problems) > 0 {
			return 1
		}
		return 0
	}
}

// noteSkipped says on stderr which newer checkpoints "latest" passed over.
func noteSkipped(stderr io.Writer, cmd string, skipped []error) {
	for _, e := range skipped {
		fmt.Fprintf(stderr, "%s: note: %v\n", cmd, e)
	}
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func writeJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "eddy: writing JSON: %v\n", err)
		return 1
	}
	return 0
}

func printDetails(w io.Writer, d *inspect.Details) {
	fmt.Fprintf(w, "checkpoint  %d\n", d.ID)
	if !d.Time.IsZero() {
		fmt.Fprintf(w, "time        %s\n", d.Time.Format(time.RFC3339Nano))
	}
	fmt.Fprintf(w, "job         %s\n", d.Job)
	fmt.Fprintf(w, "size        %s (%d bytes of state parts and logs)\n", inspect.FormatBytes(d.Size), d.Size)
	fmt.Fprintf(w, "status      %s\n", d.Status)
	if d.Reason != "" {
		fmt.Fprintf(w, "reason      %s\n", d.Reason)
	}
	fmt.Fprintf(w, "files       %d\n", len(d.Files))
	if d.Fingerprint != "" {
		fmt.Fprintln(w, "fingerprint")
		for _, l := range strings.Split(strings.TrimRight(d.Fingerprint, "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	fmt.Fprintln(w, "\nsources")
	if len(d.Sources) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, s := range d.Sources {
		fmt.Fprintf(w, "  %s\n", s.Name)
		for _, sp := range s.Splits {
			state := "position " + sp.Position
			if sp.Position == "" {
				state = "at the start"
			}
			if sp.Done {
				state = "done"
			}
			fmt.Fprintf(w, "    split %d: %s\n", sp.Split, state)
		}
	}
	fmt.Fprintln(w, "\noperators")
	if len(d.Operators) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, op := range d.Operators {
		fmt.Fprintf(w, "  %s  (%d key groups, parallelism %d)\n", op.Name, op.MaxParallelism, op.Parallelism)
		for _, p := range op.Parts {
			crc := ""
			if p.CRC != 0 {
				crc = fmt.Sprintf(", crc32c %08x", p.CRC)
			}
			fmt.Fprintf(w, "    part    subtask %d  key groups [%d, %d)  %s  %s%s\n", p.Subtask, p.KeyGroupStart, p.KeyGroupEnd,
				orNone(p.Blob), inspect.FormatBytes(p.Size), crc)
			if p.Pebble != nil {
				var size int64
				for _, f := range p.Pebble.Files {
					size += f.Size
				}
				of := ""
				if db0, db1 := p.Pebble.KeyGroupStart, p.Pebble.KeyGroupEnd; db1 > 0 && (db0 != p.KeyGroupStart || db1 != p.KeyGroupEnd) {
					of = fmt.Sprintf(" of a database of key groups [%d, %d), restored from for these only", db0, db1)
				}
				fmt.Fprintf(w, "            Pebble checkpoint%s: %d files, %s (the part's blob is its state header)\n", of, len(p.Pebble.Files), inspect.FormatBytes(size))
			}
		}
		for _, l := range op.Changelog {
			fmt.Fprintf(w, "    log     subtask %d  key groups [%d, %d)  writer %s  changes (%d, %d]  %d objects  %s\n",
				l.Subtask, l.KeyGroupStart, l.KeyGroupEnd, l.Writer, l.After, l.Upto, len(l.Objects), inspect.FormatBytes(l.Size))
		}
		for _, wm := range op.Watermarks {
			fmt.Fprintf(w, "    watermark key groups [%d, %d)  %s\n", wm.KeyGroupStart, wm.KeyGroupEnd, formatNanos(wm.Nanos))
		}
		if op.SchemaError != "" {
			fmt.Fprintf(w, "    schemas: cannot read: %s\n", op.SchemaError)
		}
		if op.KeySchema != nil {
			fmt.Fprintf(w, "    key schema (from %s):\n", op.SchemasFrom)
			printSchema(w, *op.KeySchema, "      ")
		}
		for _, s := range op.States {
			fmt.Fprintf(w, "    state %q (%s)\n", s.Name, s.Kind)
			if s.ValueSchema != nil {
				printSchema(w, *s.ValueSchema, "      ")
			}
		}
	}
	fmt.Fprintln(w, "\nsinks")
	if len(d.Sinks) == 0 {
		fmt.Fprintln(w, "  (none with pending transactions)")
	}
	for _, s := range d.Sinks {
		fmt.Fprintf(w, "  %s  %d transactions\n", s.Name, len(s.Txns))
		for _, t := range s.Txns {
			fmt.Fprintf(w, "    %s\n", t)
		}
	}
}

func printSchema(w io.Writer, s serde.Schema, indent string) {
	for _, l := range strings.Split(strings.TrimRight(inspect.SchemaText(s), "\n"), "\n") {
		fmt.Fprintf(w, "%s%s\n", indent, l)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(no blob)"
	}
	return s
}

func formatNanos(n int64) string {
	if n == 1<<63-1 {
		return "end of input"
	}
	return time.Unix(0, n).UTC().Format(time.RFC3339Nano)
}

// progress prints a line on stderr at most once a second while work is
// long, and nothing for work that ends quickly.
type progress struct {
	w     io.Writer
	what  string
	start time.Time
	last  time.Time
	shown bool
}

func newProgress(w io.Writer, what string) *progress {
	now := time.Now()
	return &progress{w: w, what: what, start: now, last: now}
}

func (p *progress) update(format string, args ...any) {
	now := time.Now()
	if now.Sub(p.last) < time.Second {
		return
	}
	p.last, p.shown = now, true
	fmt.Fprintf(p.w, "%s: %s (%s)\n", p.what, fmt.Sprintf(format, args...), now.Sub(p.start).Round(time.Second))
}

func (p *progress) done() {
	if p.shown {
		fmt.Fprintf(p.w, "%s: done in %s\n", p.what, time.Since(p.start).Round(time.Millisecond))
	}
}
