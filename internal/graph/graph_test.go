package graph

import (
	"errors"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/internal/errs"
)

func TestCheck(t *testing.T) {
	a := Node{Kind: "source", ID: "gps", How: "eddy.Named", Place: "main.go:10"}
	b := Node{Kind: "keyed operator", ID: "count", How: "eddy.UID", Place: "main.go:12"}
	c := Node{Kind: "sink", ID: "gps", How: "the sink's Name", Place: "main.go:14"}
	if err := Check([]Node{a, b}); err != nil {
		t.Fatal(err)
	}
	err := Check([]Node{a, b, c})
	var de *DuplicateIDError
	if !errors.As(err, &de) || de.First != a || de.Second != c {
		t.Fatalf("Check = %v", err)
	}
	if !errors.Is(err, errs.DuplicateID) || !errs.IsPermanent(err) {
		t.Fatalf("kinds of %v", err)
	}
	for _, want := range []string{`"gps"`, "main.go:10", "main.go:14", "eddy.UID"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %s", err, want)
		}
	}
	if err := Check([]Node{{Kind: "sink"}}); !errors.Is(err, errs.DuplicateID) {
		t.Fatalf("empty id: %v", err)
	}
}

func TestPlace(t *testing.T) {
	// This test is in package graph, which is internal: Place skips it
	// and names the testing package's caller.
	if p := Place(); strings.HasPrefix(p, "graph_test.go") {
		t.Fatalf("Place = %s inside the runtime", p)
	}
	if !inRuntime("github.com/eddyflow/eddy.FromSource[...]") || !inRuntime("github.com/eddyflow/eddy/internal/graph.Place") ||
		inRuntime("github.com/eddyflow/eddy/internal_test.Foo") || inRuntime("main.main") || inRuntime("github.com/eddyflow/eddy/internal/demojob.Build") || inRuntime("github.com/eddyflow/eddy/connector/file.JSONLines") {
		t.Fatal("inRuntime")
	}
}
