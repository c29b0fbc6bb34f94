package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/eddyflow/eddy/internal/inspect"
	"github.com/eddyflow/eddy/serde"
)

const stateUsage = `usage: eddy state dump --data DIR|URL --operator UID [--state NAME] [--key K] [--checkpoint ID] [--format text|json]
  Decodes the keyed state of an operator in a checkpoint with the schemas
  stored in it (no job code): every key of every state, or one state, or
  one key (a string key as is, an integer key in decimal). The checkpoint
  is the newest usable one unless --checkpoint says otherwise. With the
  changelog backend the log is replayed onto the materialized parts.
  --format json writes one JSON object per line:
    {"state":..., "kind":..., "key_group":..., "key":..., "value":...}
  Nothing is written to the store.`

// stateCmd runs `eddy state dump`.
func stateCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "dump" {
		fmt.Fprintln(stderr, stateUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return 0
		}
		return 2
	}
	fs := flag.NewFlagSet("state dump", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, stateUsage) }
	data := fs.String("data", "", "checkpoint store: a directory or a URL (file://, s3://)")
	operator := fs.String("operator", "", "the operator's id (see eddy checkpoints show)")
	stateName := fs.String("state", "", "one state by name (default: all)")
	key := fs.String("key", "", "one key (default: all)")
	ckpt := fs.String("checkpoint", "latest", "checkpoint id, or latest")
	format := fs.String("format", "text", "output format: text or json (one object per line)")
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return 2
	}
	switch {
	case len(pos) > 0:
		fmt.Fprintf(stderr, "eddy state dump: unexpected argument %q\n", pos[0])
		return 2
	case *operator == "":
		fmt.Fprintln(stderr, "eddy state dump: --operator is required (eddy checkpoints show lists the operators)")
		return 2
	case *format != "text" && *format != "json":
		fmt.Fprintf(stderr, "eddy state dump: --format %q: want text or json\n", *format)
		return 2
	}
	keySet := false
	fs.Visit(func(f *flag.Flag) { keySet = keySet || f.Name == "key" })
	fail := func(err error) int {
		fmt.Fprintf(stderr, "eddy state dump: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	store, err := inspect.OpenStore(*data)
	if err != nil {
		return fail(err)
	}
	m, skipped, err := inspect.FindCheckpoint(ctx, store, *ckpt)
	noteSkipped(stderr, "eddy state dump", skipped)
	if err != nil {
		return fail(err)
	}
	opts := inspect.DumpOptions{Operator: *operator, State: *stateName}
	if keySet {
		opts.Key = key
	}
	prog := newProgress(stderr, "state dump")
	opts.Progress = func(pd, parts, ld, logs int) {
		prog.update("checkpoint %d: %d/%d state parts, %d/%d log ranges", m.ID, pd, parts, ld, logs)
	}
	w := bufio.NewWriter(stdout)
	n := 0
	var buf []byte
	err = inspect.Dump(ctx, store, m, opts, func(e inspect.Entry) error {
		n++
		buf = buf[:0]
		if *format == "json" {
			buf = append(buf, `{"state":`...)
			buf = serde.AppendDynamicJSON(buf, e.State)
			buf = append(buf, `,"kind":`...)
			buf = serde.AppendDynamicJSON(buf, e.Kind)
			buf = fmt.Appendf(buf, `,"key_group":%d,"key":`, e.KeyGroup)
			buf = serde.AppendDynamicJSON(buf, e.Key)
			buf = append(buf, `,"value":`...)
			buf = serde.AppendDynamicJSON(buf, e.Value)
			buf = append(buf, "}\n"...)
		} else {
			buf = fmt.Appendf(buf, "%s\tkg %d\t", e.State, e.KeyGroup)
			buf = serde.AppendDynamicJSON(buf, e.Key)
			buf = append(buf, '\t')
			buf = serde.AppendDynamicJSON(buf, e.Value)
			buf = append(buf, '\n')
		}
		_, err := w.Write(buf)
		return err
	})
	prog.done()
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fail(fmt.Errorf("checkpoint %d: %w", m.ID, err))
	}
	if keySet && n == 0 {
		return fail(fmt.Errorf("checkpoint %d: key %q: %w: operator %q holds no state for it", m.ID, *key, inspect.ErrUnknown, *operator))
	}
	if *format == "text" && !keySet {
		fmt.Fprintf(stderr, "checkpoint %d, operator %q: %d entries\n", m.ID, *operator, n)
	}
	return 0
}
