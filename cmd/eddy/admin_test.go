package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDemoAdminFlag: --admin prints the admin page's URL with the port
// actually bound, and a non-loopback address fails the demo (exit 1)
// naming the option that would allow it.
func TestDemoAdminFlag(t *testing.T) {
	dir := t.TempDir()
	args := []string{"demo", "--events", "2000", "--drivers", "10", "--rate", "0", "--quiet", "--parallelism", "1",
		"--data", filepath.Join(dir, "data"), "--out", filepath.Join(dir, "out"), "--admin", "127.0.0.1:0"}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("demo exited %d: %s", code, stderr.String())
	}
	if !regexp.MustCompile(`admin page at http://127\.0\.0\.1:[1-9][0-9]*/`).MatchString(stdout.String()) {
		t.Fatalf("no admin URL in the output:\n%s", stdout.String())
	}
	stdout.Reset()
	stderr.Reset()
	args[len(args)-1] = "0.0.0.0:0"
	args[len(args)-5] = filepath.Join(dir, "data2")
	if code := run(args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "AdminAllowRemote") {
		t.Fatalf("--admin 0.0.0.0:0: exit %d, stderr %s", code, stderr.String())
	}
}
