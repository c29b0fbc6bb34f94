package align

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the command files in testdata/ against an Aligner.
// Each file is one scenario; `new` starts a fresh Aligner. Run with
// -rewrite to regenerate the expected output, then read the diff.
func TestDataDriven(t *testing.T) {
	paths, err := filepath.Glob("testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		// testdata/fuzz holds the fuzz corpus, not commands.
		if fi, err := os.Stat(path); err != nil || fi.IsDir() {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			var a *Aligner
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				if a == nil && d.Cmd != "new" {
					d.Fatalf(t, "%s before new", d.Cmd)
				}
				return runCommand(t, d, &a)
			})
		})
	}
}

// runCommand executes one directive on *a and describes what the Aligner
// returned.
func runCommand(t *testing.T, d *datadriven.TestData, a **Aligner) string {
	in := func() int {
		var i int
		d.ScanArgs(t, "in", &i)
		return i
	}
	switch d.Cmd {
	case "new":
		var n int
		d.ScanArgs(t, "inputs", &n)
		floor := int64(math.MinInt64)
		if arg, ok := d.Arg("floor"); ok {
			floor = parseTime(t, d, arg.SingleVal(t))
		}
		*a = New(n, floor)
		return describeState(*a)
	case "barrier":
		i := in()
		var id uint64
		d.ScanArgs(t, "id", &id)
		done, err := (*a).Barrier(i, id, d.HasArg("final"))
		switch {
		case err != nil:
			return "error: " + err.Error()
		case done:
			id, final := (*a).Checkpoint()
			return fmt.Sprintf("complete id=%d final=%t", id, final)
		case (*a).Blocked(i):
			id, _ := (*a).Checkpoint()
			return fmt.Sprintf("held id=%d blocked=%s", id, blockedList(*a))
		default:
			return "ignored"
		}
	case "release":
		(*a).Release()
		return describeState(*a)
	case "checkpoint":
		id, final := (*a).Checkpoint()
		return fmt.Sprintf("id=%d final=%t", id, final)
	case "watermark":
		i := in()
		var wm string
		d.ScanArgs(t, "wm", &wm)
		return describeEvent((*a).Watermark(i, parseTime(t, d, wm)))
	case "idle":
		return describeEvent((*a).Idle(in(), true))
	case "active":
		return describeEvent((*a).Idle(in(), false))
	case "eod":
		ev, all := (*a).EndOfData(in())
		if all {
			return "all-ended " + describeEvent(ev)
		}
		return "ok " + describeEvent(ev)
	case "terminate":
		ev, complete, err := (*a).Terminate(in())
		if err != nil {
			return "error: " + err.Error()
		}
		out := fmt.Sprintf("ok live=%d %s", (*a).Live(), describeEvent(ev))
		if complete {
			id, final := (*a).Checkpoint()
			out += fmt.Sprintf(" complete id=%d final=%t", id, final)
		}
		return out
	case "advanced":
		var wm string
		d.ScanArgs(t, "wm", &wm)
		(*a).Advanced(parseTime(t, d, wm))
		return describeState(*a)
	case "state":
		return describeState(*a)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// parseTime reads an event time: an integer, -inf or +inf.
func parseTime(t *testing.T, d *datadriven.TestData, s string) int64 {
	switch s {
	case "-inf":
		return math.MinInt64
	case "+inf", "inf":
		return math.MaxInt64
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "event time %q: %v", s, err)
	}
	return v
}

func formatTime(v int64) string {
	switch v {
	case math.MinInt64:
		return "-inf"
	case math.MaxInt64:
		return "+inf"
	}
	return strconv.FormatInt(v, 10)
}

func describeEvent(ev Event) string {
	var parts []string
	if ev.Active {
		parts = append(parts, "active")
	}
	if ev.Advance {
		parts = append(parts, "advance "+formatTime(ev.Watermark))
	}
	if ev.Idle {
		parts = append(parts, "idle")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "\n")
}

func blockedList(a *Aligner) string {
	var ins []string
	for i := range a.n {
		if a.Blocked(i) {
			ins = append(ins, strconv.Itoa(i))
		}
	}
	return "[" + strings.Join(ins, " ") + "]"
}

func describeState(a *Aligner) string {
	return fmt.Sprintf("blocked=%s live=%d watermark=%s abandoned=%d",
		blockedList(a), a.Live(), formatTime(a.watermark), a.Abandoned)
}
