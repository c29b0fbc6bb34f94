package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/serde"
)

// demoTypes are the event types of the demo job, by the names the schema
// commands accept.
var demoTypes = map[string]func() (serde.Schema, error){
	"order": serde.SchemaOf[datagen.OrderCreatedEvent],
	"gps":   serde.SchemaOf[datagen.GPSPoint],
}

// schemaCmd runs `eddy schema proto|show|check`.
func schemaCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, `usage: eddy schema <proto|show|check> ...
  proto                      print the .proto of the demo's event types
  show [--type T] [--binary] print the schema of a demo type (order, gps) as JSON, or binary
  check [--key] OLD NEW      compare two saved schemas (JSON or binary); exit 1 when incompatible`)
		return 2
	}
	switch args[0] {
	case "proto":
		text, err := serde.ProtoFile("eddy.demo.v1", datagen.OrderCreatedEvent{}, datagen.GPSPoint{})
		if err != nil {
			fmt.Fprintf(stderr, "eddy schema proto: %v\n", err)
			return 1
		}
		fmt.Fprint(stdout, text)
		return 0
	case "show":
		fs := flag.NewFlagSet("schema show", flag.ContinueOnError)
		fs.SetOutput(stderr)
		typ := fs.String("type", "order", "demo type: order or gps")
		binary := fs.Bool("binary", false, "write the binary form instead of JSON")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		of, ok := demoTypes[*typ]
		if !ok {
			fmt.Fprintf(stderr, "eddy schema show: unknown type %q (want order or gps)\n", *typ)
			return 2
		}
		s, err := of()
		if err != nil {
			fmt.Fprintf(stderr, "eddy schema show: %v\n", err)
			return 1
		}
		if *binary {
			b, err := s.MarshalBinary()
			if err != nil {
				fmt.Fprintf(stderr, "eddy schema show: %v\n", err)
				return 1
			}
			stdout.Write(b)
			return 0
		}
		fmt.Fprintln(stdout, s.JSON())
		return 0
	case "check":
		fs := flag.NewFlagSet("schema check", flag.ContinueOnError)
		fs.SetOutput(stderr)
		key := fs.Bool("key", false, "the schemas are of a state key: any encoding change is incompatible")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		if fs.NArg() != 2 {
			fmt.Fprintln(stderr, "usage: eddy schema check [--key] OLD NEW")
			return 2
		}
		old, err := readSchema(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "eddy schema check: %v\n", err)
			return 1
		}
		cur, err := readSchema(fs.Arg(1))
		if err != nil {
			fmt.Fprintf(stderr, "eddy schema check: %v\n", err)
			return 1
		}
		check := serde.Check
		if *key {
			check = serde.CheckKey
		}
		c := check(old, cur)
		fmt.Fprintln(stdout, c.String())
		if c.Verdict == serde.Incompatible {
			return 1
		}
		return 0
	}
	fmt.Fprintf(stderr, "eddy schema: unknown subcommand %q\n", args[0])
	return 2
}

func readSchema(path string) (serde.Schema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return serde.Schema{}, err
	}
	s, err := serde.ParseSchema(b)
	if err != nil {
		return serde.Schema{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
