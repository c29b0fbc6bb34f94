package demojob

import (
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob/faulty"
	"github.com/eddyflow/eddy/blob/s3/s3test"
)

// s3Data starts versitygw (skipping the test without it, failing it on CI),
// creates a bucket, puts the server's credentials in the environment the
// helper processes inherit, and returns the URL of a job prefix in it.
func s3Data(t *testing.T, _ string) string {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "eddy-crash")
	t.Setenv("AWS_ACCESS_KEY_ID", srv.Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.Secret)
	q := url.Values{"endpoint": {srv.Endpoint}, "region": {srv.Region}}
	return "s3://eddy-crash/demo?" + q.Encode()
}

// s3FaultData is s3Data with the job's requests going through a fault
// proxy: 1% of requests fail (half before the server saw them, half
// after it did the work), 0.2% reset the connection, 0.1% stall, and
// latency has a long tail (p50 2 ms, p99 200 ms, p99.9 3 s).
func s3FaultData(t *testing.T, _ string) string {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "eddy-crash")
	t.Setenv("AWS_ACCESS_KEY_ID", srv.Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.Secret)
	p := s3test.NewFaultProxy(t, srv.Endpoint, s3test.FaultConfig{Seed: testSeed(t, "EDDY_FAULT_SEED"),
		ErrorRate: 0.005, ErrorAfterRate: 0.005, ResetRate: 0.002, StallRate: 0.001,
		Latency: faulty.LongTail(2*time.Millisecond, 200*time.Millisecond, 3*time.Second)})
	t.Cleanup(func() { t.Logf("fault proxy: %+v", p.Stats()) })
	// A stalled response fails after a second, not the default 30 s. The
	// open's probe (four requests, each meeting the faults and the 3 s
	// tail) gets 30 s, not the default 5 s, which a loaded machine and two
	// tail latencies in a row exceeded.
	url := srv.Via(p).URL("eddy-crash", "demo") + "&stall_timeout=1s&open_timeout=30s"
	storesMu.Lock()
	direct[url] = srv.URL("eddy-crash", "demo")
	storesMu.Unlock()
	return url
}

// TestCrashResumeS3Faults is the crash test on S3 with the fault proxy
// in front of the server.
func TestCrashResumeS3Faults(t *testing.T) {
	skipShort(t)
	crashResume(t, false, s3FaultData, 500*time.Millisecond)
}

// TestCrashResumeChangelogS3Faults is the changelog crash test on S3
// with the fault proxy in front of the server, and with a small log
// threshold, so that every checkpoint interval's log is several batches
// streamed into one object.
func TestCrashResumeChangelogS3Faults(t *testing.T) {
	skipShort(t)
	crashResumeOn(t, changelogBatchesState, s3FaultData, 500*time.Millisecond)
}

// TestCrashResumeS3 is the crash test with the checkpoints on a real S3
// server: random SIGKILLs, restarts at other parallelisms, and the
// committed output equal to an uninterrupted run's.
func TestCrashResumeS3(t *testing.T) { crashResume(t, false, s3Data, 0) }

// TestCrashResumeChangelogS3 is the changelog crash test with the
// checkpoints and the DSTL on a real S3 server.
func TestCrashResumeChangelogS3(t *testing.T) {
	skipShort(t)
	crashResume(t, true, s3Data, 0)
}

// skipShort skips the longer S3 crash tests in -short mode (CI's race
// detector pass), which runs TestCrashResumeS3 and the two-process test.
func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the crash tests on S3 with the changelog and through the fault proxy run without -short")
	}
}

// TestSecondProcessFencesFirstS3: on an object store, which cannot be
// locked, a second OS process of the job claims the storage and the first
// stops at its next checkpoint, naming the second and committing nothing
// more; the second runs the job to its end, and the committed output is
// exactly an uninterrupted run's: nothing lost, nothing twice.
func TestSecondProcessFencesFirstS3(t *testing.T) {
	dir := t.TempDir()
	c := Config{Seed: 9, Events: 40_000, Drivers: 200, Parallelism: 2, Rate: 10_000, CheckpointInterval: 20 * time.Millisecond,
		Data: s3Data(t, dir), Out: filepath.Join(dir, "out")}
	_, waitFirst := startHelper(t, c)
	deadline := time.Now().Add(time.Minute)
	for len(manifestIDs(c.Data)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first process wrote no checkpoint in a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.Rate = 0
	second, waitSecond := startHelper(t, c)
	err, out := waitFirst()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("first process: %v, want exit 1 (fenced); output:\n%s", err, out)
	}
	if want := fmt.Sprintf("pid %d", second.Process.Pid); !strings.Contains(out, "taken over by") || !strings.Contains(out, want) {
		t.Fatalf("the first process's error does not say the second (%s) took over:\n%s", want, out)
	}
	if err, out := waitSecond(); err != nil {
		t.Fatalf("second process: %v\n%s", err, out)
	}
	sameLines(t, committed(t, c.Out), expected(c))
	noPending(t, c.Out)
}
