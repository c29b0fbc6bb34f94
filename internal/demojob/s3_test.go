package demojob

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/faulty"
	"github.com/eddyflow/eddy/blob/s3/s3test"
	"github.com/eddyflow/eddy/checkpoint"
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

// TestKillBetweenLastPartAndCompletion: with the log streamed into one
// multipart upload per checkpoint interval (dstl.Options.Parts), a
// checkpoint commits once its log's last part is up, and the log completes
// the upload afterwards. A process SIGKILLed in between leaves a committed
// manifest naming an object no listing shows yet. The proxy holds every
// completion request (none reaches the server), the test kills the
// process once such a manifest is in the store, and the next process,
// restoring from that checkpoint or a newer one, completes the upload: the
// committed output is exactly an uninterrupted run's.
func TestKillBetweenLastPartAndCompletion(t *testing.T) {
	skipShort(t)
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "eddy-crash")
	t.Setenv("AWS_ACCESS_KEY_ID", srv.Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.Secret)
	// CompleteMultipartUpload is a POST naming an uploadId (a create is a
	// POST naming "uploads", an abort a DELETE).
	isCompletion := func(r *http.Request) bool {
		return r.Method == http.MethodPost && r.URL.Query().Has("uploadId")
	}
	p := s3test.NewFaultProxy(t, srv.Endpoint, s3test.FaultConfig{Latency: faulty.Fixed(time.Hour), Filter: isCompletion})
	direct, err := blob.Open(srv.URL("eddy-crash", "demo"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Checkpoints every 3 s of 200,000 events/s: an interval logs about
	// 3 MiB per second of events (less if the machine is slower), well
	// over S3's 5 MiB least part size. Its batches are sealed at 1 MiB
	// (a stream ends after 64 batches, so they must add up to a part well
	// before that): they go up as parts once 5 MiB are pending, and the
	// barrier's batch as the last one.
	c := Config{Seed: 17, Events: 3_000_000, Drivers: 20_000, Parallelism: 2, Rate: 200_000, EmitEvery: 50,
		CheckpointInterval: 3 * time.Second, Changelog: true, Materialize: time.Minute, LogFlushBytes: 1 << 20,
		Data: srv.Via(p).URL("eddy-crash", "demo"), Out: filepath.Join(dir, "out")}
	cmd, wait := startHelper(t, c)
	exited := make(chan struct{})
	var exitErr error
	var out string
	go func() { exitErr, out = wait(); close(exited) }()

	st := checkpoint.NewStorage(direct, 100)
	ctx := context.Background()
	loaded := map[uint64]bool{}
	var pending checkpoint.LogUpload
	var pendingID uint64
	var maxLog int64 // the most log bytes one checkpoint lists (since the materialization)
	deadline := time.Now().Add(2 * time.Minute)
poll:
	for pending.Object == "" {
		select {
		case <-exited:
			t.Fatalf("the job ended (%v) before a checkpoint with a pending log upload (%d checkpoints, at most %d bytes of log in one):\n%s",
				exitErr, len(loaded), maxLog, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint with a pending log upload in two minutes")
		}
		ids, _ := st.List(ctx)
		for _, id := range ids {
			if loaded[id] {
				continue
			}
			loaded[id] = true
			m, err := st.Load(ctx, id)
			if err != nil {
				t.Fatalf("checkpoint %d: %v", id, err)
			}
			var logged int64
			for _, op := range m.Operators {
				for _, l := range op.Changelog {
					logged += l.Size
				}
			}
			maxLog = max(maxLog, logged)
			for _, op := range m.Operators {
				for _, l := range op.Changelog {
					if len(l.Uploads) > 0 {
						pending, pendingID = l.Uploads[0], id
						break poll
					}
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	var ee *exec.ExitError
	if !errors.As(exitErr, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("the first process ended by itself (%v) before the kill:\n%s", exitErr, out)
	}
	t.Logf("killed with checkpoint %d committed and its log object %s (%d parts, %d bytes) not completed",
		pendingID, pending.Object, pending.Parts, pending.Size)
	if _, err := direct.Get(ctx, pending.Object); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("log object %s before the restore: %v, want not found (its completion went through)", pending.Object, err)
	}
	if pending.Parts < 2 {
		t.Fatalf("the pending upload has %d parts: the test wants an early part and the barrier's last one", pending.Parts)
	}

	// The next run, straight to the server and at full speed, restores
	// from the newest checkpoint; every checkpoint of the first run has
	// its log's completions pending.
	c.Data, c.Rate = srv.URL("eddy-crash", "demo"), 0
	_, waitSecond := startHelper(t, c)
	err, out2 := waitSecond()
	if err != nil {
		t.Fatalf("second process: %v\n%s", err, out2)
	}
	m := restoredFrom.FindStringSubmatch(out2)
	if m == nil {
		t.Fatalf("the second process did not restore a checkpoint:\n%s", out2)
	}
	if id, _ := strconv.ParseUint(m[1], 10, 64); id < pendingID {
		t.Fatalf("the second process restored checkpoint %d, older than %d, whose log upload was pending:\n%s", id, pendingID, out2)
	}
	t.Logf("the second process logged: %s", m[0])
	sameLines(t, committed(t, c.Out), expected(c))
	noPending(t, c.Out)
}

// restoredFrom matches the log line of a restore and its checkpoint id.
var restoredFrom = regexp.MustCompile(`restoring from checkpoint.*checkpoint=(\d+)`)
