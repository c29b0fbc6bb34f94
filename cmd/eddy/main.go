package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "demo":
		return demo(args[1:], stdout, stderr)
	case "nexmark":
		return nexmarkCmd(args[1:], stdout, stderr)
	case "serde":
		return serdeDemo(args[1:], stdout, stderr)
	case "schema":
		return schemaCmd(args[1:], stdout, stderr)
	case "bench":
		return benchCmd(args[1:], stdout, stderr)
	case "checkpoints":
		return checkpointsCmd(args[1:], stdout, stderr)
	case "state":
		return stateCmd(args[1:], stdout, stderr)
	case "savepoint":
		return savepointCmd(args[1:], stdout, stderr)
	case "stop":
		return stopCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "eddy: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage: eddy <command> [flags]

commands:
  demo     run the main job: GPS points -> key by driver -> distance per driver -> exactly-once JSON lines
  nexmark  gen --events N --seed S [--rate R] --out FILE: the Nexmark benchmark's events as JSON lines
  serde    encode and decode sample order events and print sizes and speeds
  schema   print the .proto or schema of the demo types; check two saved schemas
  bench    bench checkpoint: checkpoint duration, size and recovery, changelog off vs on;
           bench pebble: capacity of the Pebble backend (peak RSS, throughput, disk, checkpoint and restore sizes);
           bench group: the Kafka demo as 1, 2 and 3 processes of a consumer group (throughput, handover and kill times)
  checkpoints  list|show ID|verify ID --data URL: inspect a checkpoint store (read-only)
  state    state dump --data URL --operator UID: decode an operator's keyed state with the stored schemas
  savepoint  --admin HOST:PORT: take a savepoint of a running job through its admin endpoint
  stop     --savepoint --admin HOST:PORT: take a savepoint of a running job, then stop it`)
}
