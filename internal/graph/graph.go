package graph

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/eddyflow/eddy/internal/errs"
)

// Node is one checkpointed thing of a job.
type Node struct {
	Kind  string // "source", "keyed operator", "window operator", "sink"
	ID    string // what checkpoints store it under
	How   string // how the id was chosen: "eddy.UID", "eddy.Named", or what it was derived from
	Type  string // its record types, for the job's fingerprint
	Place string // file:line of the user's code that declared it
}

func (n Node) String() string {
	return fmt.Sprintf("%s %q (%s, at %s)", n.Kind, n.ID, n.How, n.Place)
}

// DuplicateIDError says that two checkpointed things of a job have one id;
// errors.Is(err, eddy.ErrDuplicateID) holds.
type DuplicateIDError struct {
	ID            string
	First, Second Node
}

func (e *DuplicateIDError) Error() string {
	return fmt.Sprintf("eddy: two parts of the job have the id %q, so their checkpointed state would mix: %s and %s; give each its own eddy.UID (or eddy.Named)",
		e.ID, e.First, e.Second)
}

// Is makes errors.Is(err, errs.DuplicateID) and errs.Permanent hold.
func (e *DuplicateIDError) Is(target error) bool {
	return target == errs.DuplicateID || target == errs.Permanent
}

// Check returns a *DuplicateIDError for the first two nodes (in order)
// that share an id, or an error for an empty id.
func Check(nodes []Node) error {
	seen := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if n.ID == "" {
			return errs.Kind(errs.DuplicateID, fmt.Errorf("eddy: %s has an empty id", n), true)
		}
		if j, ok := seen[n.ID]; ok {
			return &DuplicateIDError{ID: n.ID, First: nodes[j], Second: n}
		}
		seen[n.ID] = i
	}
	return nil
}

// Place returns file:line of the innermost caller outside Eddy's root
// package and its internal packages: the user's line that declared a node.
func Place() string {
	var pcs [16]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !inRuntime(f.Function) {
			return fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line)
		}
		if !more {
			return "unknown place"
		}
	}
}

// inRuntime reports whether fn belongs to the packages a node is declared
// through: the root package, this one and the runtime (a generic
// function's name carries its type arguments after the package path, so
// the test is on the prefix). Other packages of Eddy, such as the demo job,
// are user code here.
func inRuntime(fn string) bool {
	const root = "github.com/eddyflow/eddy"
	return strings.HasPrefix(fn, root+".") || strings.HasPrefix(fn, root+"/internal/graph.") ||
		strings.HasPrefix(fn, root+"/internal/runtime.")
}

// Fingerprint describes what a job declared it depends on, one line each,
// sorted: its checkpointed parts (kind, id, record types) and the
// parameters it marked as its identity. Two runs of one job have the same
// fingerprint; a changed seed, a part added or retyped, another output
// directory change it.
func Fingerprint(nodes []Node, params map[string]string) string {
	var lines []string
	for _, n := range nodes {
		lines = append(lines, fmt.Sprintf("%s %q: %s", n.Kind, n.ID, n.Type))
	}
	for k, v := range params {
		lines = append(lines, fmt.Sprintf("parameter %s=%q", k, v))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// FingerprintDiff lists the lines of fingerprint a that b lacks ("-") and
// those of b that a lacks ("+").
func FingerprintDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ina, inb := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !inb[l] {
			out = append(out, "  - "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ina[l] {
			out = append(out, "  + "+l)
		}
	}
	return strings.Join(out, "\n")
}
