package taskchain

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob"
	_ "github.com/eddyflow/eddy/blob/file" // the schemes a claimant process opens
	_ "github.com/eddyflow/eddy/blob/s3"
)

// helperEnv holds the store URL of a claimant process started by
// testProcesses; TestHelperClaimant does nothing without it.
const helperEnv = "TASKCHAIN_HELPER_STORE"

// TestHelperClaimant is a claimant process of testProcesses, not a test:
// it opens the store of $TASKCHAIN_HELPER_STORE and, on each line of its
// standard input, does the next step and prints its outcome:
// "claim" → "claimed <epoch>", then "commit" → "committed <seq>" or
// "fenced <newer epoch> <holder>" or "error <message>".
func TestHelperClaimant(t *testing.T) {
	url := os.Getenv(helperEnv)
	if url == "" {
		t.Skip("a helper process of testProcesses")
	}
	fail := func(err error) {
		fmt.Printf("error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(0)
	}
	ctx := context.Background()
	s, err := blob.Open(url)
	if err != nil {
		fail(err)
	}
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "claim" {
		fail(fmt.Errorf("want claim, got %q", in.Text()))
	}
	c, err := Open(ctx, s, "t")
	if err != nil {
		fail(err)
	}
	owner := ProcessOwner("claimant")
	if _, err := c.Claim(ctx, owner); err != nil {
		fail(err)
	}
	fmt.Printf("claimed %d\n", c.Epoch())
	if !in.Scan() || in.Text() != "commit" {
		fail(fmt.Errorf("want commit, got %q", in.Text()))
	}
	r, err := c.Commit(ctx, []byte(owner))
	var fe *FencedError
	switch {
	case errors.As(err, &fe):
		fmt.Printf("fenced %d %s\n", fe.Newer, fe.Holder)
	case err != nil:
		fail(err)
	default:
		fmt.Printf("committed %d\n", r.Seq)
	}
	os.Exit(0)
}

// 16 OS processes claim one task at once through the store (link(2) on
// files, If-None-Match on S3): each gets an epoch of its own, and of
// their commits after all claimed only the newest owner's lands.
func testProcesses(t *testing.T, e env) {
	if testing.Short() {
		t.Skip("starts 16 processes")
	}
	s := e.fresh(t)
	url, environ := e.locate(s)
	const n = 16
	type proc struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Scanner
	}
	procs := make([]proc, n)
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperClaimant$", "-test.count=1")
		cmd.Env = append(append(os.Environ(), environ...), helperEnv+"="+url)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		procs[i] = proc{cmd, in, bufio.NewScanner(out)}
	}
	// each sends step to every process and returns their answers.
	each := func(step string) []string {
		for _, p := range procs {
			if _, err := io.WriteString(p.in, step+"\n"); err != nil {
				t.Fatal(err)
			}
		}
		answers := make([]string, n)
		for i, p := range procs {
			if !p.out.Scan() {
				t.Fatalf("process %d said nothing after %s: %v", i, step, p.out.Err())
			}
			answers[i] = p.out.Text()
			if strings.HasPrefix(answers[i], "error ") {
				t.Fatalf("process %d: %s", i, answers[i])
			}
		}
		return answers
	}
	claimed := each("claim")
	committed := each("commit")
	for _, p := range procs {
		p.in.Close()
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("process %d: %v", p.cmd.Process.Pid, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("process %d did not exit", p.cmd.Process.Pid)
		}
	}
	checkClaimed(t, s, n, func(i int) (uint64, error) {
		epoch, err := strconv.ParseUint(strings.TrimPrefix(claimed[i], "claimed "), 10, 64)
		if err != nil {
			t.Fatalf("process %d: %q", i, claimed[i])
		}
		var newer uint64
		var holder string
		if _, err := fmt.Sscanf(committed[i], "fenced %d", &newer); err == nil {
			holder = strings.SplitN(committed[i], " ", 3)[2]
			return epoch, &FencedError{Newer: newer, Holder: holder}
		}
		if !strings.HasPrefix(committed[i], "committed ") {
			t.Fatalf("process %d: %q", i, committed[i])
		}
		return epoch, nil
	})
}
