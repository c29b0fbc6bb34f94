package demojob

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startHelper starts the demo job in a subprocess, as runHelper does, and
// returns it running; wait returns its exit error and output.
func startHelper(t *testing.T, c Config) (cmd *exec.Cmd, wait func() (error, string)) {
	t.Helper()
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(os.Args[0], "-test.run=^TestHelperDemoProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(raw))
	var out bytes.Buffer
	cmd.Stderr, cmd.Stdout = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, func() (error, string) {
		select {
		case err := <-exited:
			return err, out.String()
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			return errors.New("hung"), out.String()
		}
	}
}

// TestSecondProcessRefused: a second OS process of the job on the same
// checkpoint directory is refused at start, naming the process that holds
// it, and writes nothing; once the first is killed, the second runs, and
// the committed output is exactly an uninterrupted run's.
func TestSecondProcessRefused(t *testing.T) {
	dir := t.TempDir()
	c := Config{Seed: 9, Events: 40_000, Drivers: 200, Parallelism: 2, Rate: 20_000, CheckpointInterval: 20 * time.Millisecond,
		Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out")}
	first, waitFirst := startHelper(t, c)
	deadline := time.Now().Add(time.Minute)
	for len(manifestIDs(c.Data)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first process wrote no checkpoint in a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := committedLines(t, c.Out)

	_, waitSecond := startHelper(t, c)
	err, out := waitSecond()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("second process: %v, want exit 1; output:\n%s", err, out)
	}
	if want := fmt.Sprintf("pid %d", first.Process.Pid); !strings.Contains(out, "is in use by") || !strings.Contains(out, want) {
		t.Fatalf("second process's error does not name the holder (%s):\n%s", want, out)
	}
	if got := committedLines(t, c.Out); len(got) < len(before) {
		t.Fatal("the refused process removed committed output")
	}

	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFirst()
	c.Rate = 0
	_, waitThird := startHelper(t, c)
	if err, out := waitThird(); err != nil {
		t.Fatalf("after the holder died: %v\n%s", err, out)
	}
	sameLines(t, committed(t, c.Out), expected(c))
	noPending(t, c.Out)
}
