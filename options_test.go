package eddy_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOptionsAreTyped: an option passed where it means nothing does not
// compile (testdata/badoption passes WithParallelism to Reduce).
func TestOptionsAreTyped(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the compiler")
	}
	out, err := exec.Command("go", "build", "-o", t.TempDir()+"/bad", "./testdata/badoption").CombinedOutput()
	if err == nil {
		t.Fatal("testdata/badoption compiled: WithParallelism is accepted by Reduce")
	}
	if !strings.Contains(string(out), "OperatorOption") {
		t.Fatalf("the compiler failed for another reason:\n%s", out)
	}
}
