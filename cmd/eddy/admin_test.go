package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/internal/demojob"
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

// TestSavepointCommand: `eddy savepoint --admin` takes a savepoint of a
// running job (its marker lands in the checkpoint store); without a job
// there it fails with exit 1, and without --admin it is a usage error.
func TestSavepointCommand(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	env := demojob.Env(demojob.Config{Seed: 3, Events: 1_000_000, Drivers: 50, Rate: 20_000, Parallelism: 1,
		CheckpointInterval: 20 * time.Millisecond, Data: data, Out: filepath.Join(dir, "out")},
		eddy.Admin("127.0.0.1:0"), eddy.LogOutput(io.Discard))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-env.AdminListening():
	case err := <-done:
		t.Fatalf("the job ended before its admin endpoint was up: %v", err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"savepoint", "--admin", env.AdminAddr(), "--timeout", "30s"}, &stdout, &stderr); code != 0 {
		t.Fatalf("savepoint: exit %d, stderr %s", code, stderr.String())
	}
	m := regexp.MustCompile(`checkpoint (\d+)`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("savepoint printed no checkpoint id: %q", stdout.String())
	}
	id, _ := strconv.ParseUint(m[1], 10, 64)
	if _, err := os.Stat(filepath.Join(data, "savepoints", fmt.Sprintf("%020d", id))); err != nil {
		t.Fatalf("no savepoint marker for checkpoint %d: %v", id, err)
	}

	cancel()
	<-done
	done <- nil
	stderr.Reset()
	if code := run([]string{"savepoint", "--admin", env.AdminAddr()}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "is the job running") {
		t.Fatalf("savepoint of a stopped job: exit %d, stderr %s", code, stderr.String())
	}
	if code := run([]string{"savepoint"}, &stdout, &stderr); code != 2 {
		t.Fatalf("savepoint without --admin: exit %d", code)
	}
}

// TestStopWithSavepoint: `eddy stop --savepoint --admin` takes a savepoint
// of a running job and stops it (Run returns nil); run again, the job
// resumes and its committed output equals an uninterrupted run's.
func TestStopWithSavepoint(t *testing.T) {
	dir := t.TempDir()
	cfg := demojob.Config{Seed: 5, Events: 60_000, Drivers: 40, Rate: 20_000, Parallelism: 2,
		CheckpointInterval: 20 * time.Millisecond, Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out")}
	env := demojob.Env(cfg, eddy.Admin("127.0.0.1:0"), eddy.LogOutput(io.Discard))
	done := make(chan error, 1)
	go func() { done <- env.Run(context.Background()) }()
	select {
	case <-env.AdminListening():
	case err := <-done:
		t.Fatalf("the job ended before its admin endpoint was up: %v", err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"stop", "--admin", env.AdminAddr()}, &stdout, &stderr); code != 2 {
		t.Fatalf("stop without --savepoint: exit %d, want 2", code)
	}
	if code := run([]string{"stop", "--savepoint", "--admin", env.AdminAddr(), "--timeout", "30s"}, &stdout, &stderr); code != 0 {
		t.Fatalf("stop --savepoint: exit %d, stderr %s", code, stderr.String())
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after stop with savepoint = %v, want nil", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the job did not stop within a minute of its savepoint")
	}
	if st := env.Stats(); st.RecordsIn >= cfg.Events {
		t.Fatalf("the job read all %d events before it was stopped; the test proves nothing", st.RecordsIn)
	}
	partial := outputLines(t, cfg.Out)

	// Resumed without the rate limit, it finishes; an uninterrupted run of
	// the same job elsewhere is the reference.
	cfg.Rate = 0
	if err := demojob.Env(cfg, eddy.LogOutput(io.Discard)).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ref := cfg
	ref.Data, ref.Out = filepath.Join(dir, "ref-data"), filepath.Join(dir, "ref-out")
	if err := demojob.Env(ref, eddy.LogOutput(io.Discard)).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, want := outputLines(t, cfg.Out), outputLines(t, ref.Out)
	if len(got) <= len(partial) || !slices.Equal(got, want) {
		t.Fatalf("stopped and resumed: %d lines (%d before the resume), uninterrupted: %d; they differ", len(got), len(partial), len(want))
	}
}
