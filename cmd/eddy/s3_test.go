package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/s3/s3test"
	"github.com/eddyflow/eddy/internal/demojob"
)

func TestStoreAt(t *testing.T) {
	for _, c := range []struct{ url, sub, want string }{
		{"data", "kafka-job", filepath.Join("data", "kafka-job")},
		{"/abs/data/", "a/b", filepath.Join("/abs/data", "a", "b")},
		{"file://./data", "kafka-job", "file://./data/kafka-job"},
		{"s3://bucket", "x", "s3://bucket/x"},
		{"s3://bucket/demo/", "x", "s3://bucket/demo/x"},
		{"s3://bucket/demo?endpoint=http://127.0.0.1:7070&region=us-east-1", "run-1/value-true",
			"s3://bucket/demo/run-1/value-true?endpoint=http://127.0.0.1:7070&region=us-east-1"},
	} {
		if got := storeAt(c.url, c.sub); got != c.want {
			t.Errorf("storeAt(%q, %q) = %q, want %q", c.url, c.sub, got, c.want)
		}
	}
	for url, want := range map[string]bool{"data": false, "/a/b": false, "file:///a": false, "s3://b/p": true, "S3://b": true, "./x://y": false} {
		if got := isRemote(url); got != want {
			t.Errorf("isRemote(%q) = %v, want %v", url, got, want)
		}
	}
}

// s3Credentials makes srv's credentials the ones the AWS SDK finds in
// the environment, as a user's would be, with no shared config to find
// instead.
func s3Credentials(t *testing.T, srv *s3test.Server) {
	t.Setenv("AWS_ACCESS_KEY_ID", srv.Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.Secret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
}

// outputLines returns the lines of the demo's committed output under out
// (totals, windows, late points), sorted: which subtask wrote a line to
// which file may differ between runs, the lines may not.
func outputLines(t *testing.T, out string) []string {
	t.Helper()
	var lines []string
	for _, dir := range []string{out, filepath.Join(out, "windows"), filepath.Join(out, "late")} {
		files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")...)
		}
	}
	slices.Sort(lines)
	return lines
}

// TestDemoOnS3: the demo checkpoints to an S3 bucket given as --data. A run
// stopped after its second checkpoint and resumed by `eddy demo` commits
// exactly the lines of an uninterrupted run with a local directory; a
// rerun of the finished job commits nothing. The checkpoints are in the
// bucket under the URL's prefix, and nothing is written to a local
// directory named after the URL.
func TestDemoOnS3(t *testing.T) {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "demo")
	s3Credentials(t, srv)
	dir := t.TempDir()
	t.Chdir(dir)
	data := "s3://demo/runs/1?endpoint=" + srv.Endpoint + "&region=" + srv.Region
	c := demojob.Config{Seed: 11, Events: 6000, Drivers: 20, Parallelism: 2, CheckpointInterval: 20 * time.Millisecond,
		Rate: 20_000, EmitEvery: 10}
	args := func(data, out string) []string {
		return []string{"demo", "--seed", "11", "--events", "6000", "--drivers", "20", "--parallelism", "2",
			"--checkpoint-interval", "20ms", "--emit-every", "10", "--rate", "0", "--quiet",
			// Whether a point stamped late is late depends on the
			// watermarks emitted before it, that is on the rate: no late
			// points, so that a run at another rate is the reference.
			"--late-every", "0",
			"--data", data, "--out", out}
	}

	// The reference: one uninterrupted run on a local directory.
	var stdout, stderr bytes.Buffer
	if code := run(args(filepath.Join(dir, "ref-data"), filepath.Join(dir, "ref-out")), &stdout, &stderr); code != 0 {
		t.Fatalf("reference run exited %d: %s", code, stderr.String())
	}
	want := outputLines(t, filepath.Join(dir, "ref-out"))

	// A run on S3, stopped once its second checkpoint is complete.
	store, err := blob.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jc := c
	jc.Data, jc.Out = "", filepath.Join(dir, "out")
	env := demojob.Env(jc, eddy.CheckpointStore(store, c.CheckpointInterval), eddy.LogOutput(io.Discard),
		eddy.OnCheckpoint(func(s eddy.CheckpointStats) {
			if s.ID >= 2 {
				cancel()
			}
		}))
	if err := env.Run(ctx); err == nil {
		t.Fatal("the first run finished before its second checkpoint; make it slower")
	}

	// `eddy demo` resumes it from the bucket and finishes it.
	stdout.Reset()
	if code := run(args(data, filepath.Join(dir, "out")), &stdout, &stderr); code != 0 {
		t.Fatalf("resumed run exited %d: %s", code, stderr.String())
	}
	t.Log(stdout.String())
	summary := stdout.String()
	if !strings.Contains(summary, "resumed from checkpoint") {
		t.Fatalf("the second run did not resume:\n%s", summary)
	}
	for _, w := range []string{"store requests", "S3 HTTP requests", "per checkpoint:"} {
		if !strings.Contains(summary, w) {
			t.Errorf("summary lacks %q:\n%s", w, summary)
		}
	}
	got := outputLines(t, filepath.Join(dir, "out"))
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Errorf("first difference: %q, uninterrupted %q", got[i], want[i])
				break
			}
		}
		t.Fatalf("interrupted and resumed on S3: %d lines committed, uninterrupted: %d; they differ", len(got), len(want))
	}

	// A rerun of the finished job commits nothing.
	stdout.Reset()
	if code := run(args(data, filepath.Join(dir, "out")), &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "lines committed this run  0\n") {
		t.Fatalf("rerun of a finished job: exit %d, summary:\n%s", code, stdout.String())
	}
	if got := outputLines(t, filepath.Join(dir, "out")); !slices.Equal(got, want) {
		t.Fatal("the rerun committed output again")
	}

	// The checkpoint tools read the bucket, and write nothing to it.
	objects := func() []string {
		out, err := srv.Client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("demo")})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key)+"@"+aws.ToString(o.ETag))
		}
		return keys
	}
	before := objects()
	for _, cmd := range [][]string{{"checkpoints", "list", "--data", data}, {"checkpoints", "verify", "latest", "--data", data},
		{"state", "dump", "--data", data, "--operator", "distance"}} {
		stdout.Reset()
		stderr.Reset()
		if code := run(cmd, &stdout, &stderr); code != 0 || stdout.Len() == 0 {
			t.Fatalf("eddy %s on S3: exit %d, stdout %q, stderr %s", strings.Join(cmd[:2], " "), code, stdout.String(), stderr.String())
		}
	}
	if after := objects(); !slices.Equal(before, after) {
		t.Fatalf("the checkpoint tools changed the bucket:\nbefore %q\nafter  %q", before, after)
	}

	// The checkpoints are in the bucket, under the prefix.
	list, err := srv.Client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("demo"), Prefix: aws.String("runs/1/checkpoints/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Contents) == 0 {
		t.Fatal("no checkpoint objects under runs/1/checkpoints/ in bucket demo")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if name := e.Name(); name != "ref-data" && name != "ref-out" && name != "out" {
			t.Errorf("the S3 demo left %s in the working directory", name)
		}
	}
}

// TestDemoBadStoreFailsFast: a missing bucket, an endpoint nobody listens
// on and a wrong secret each stop the demo before it runs, with exit code 2
// and blob/s3's error naming endpoint, bucket and prefix, never the
// secret.
func TestDemoBadStoreFailsFast(t *testing.T) {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "demo")
	s3Credentials(t, srv)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	const wrong = "W-R-O-N-G-secret-4d2e"
	for _, c := range []struct {
		name, endpoint, bucket, secret, want string
	}{
		{"MissingBucket", srv.Endpoint, "nobucket", srv.Secret, `bucket "nobucket" does not exist`},
		{"Unreachable", closed, "demo", srv.Secret, "is the endpoint right"},
		{"WrongSecret", srv.Endpoint, "demo", wrong, "credentials were refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("AWS_SECRET_ACCESS_KEY", c.secret)
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			start := time.Now()
			code := run([]string{"demo", "--events", "1000", "--quiet", "--out", filepath.Join(dir, "out"),
				"--data", "s3://" + c.bucket + "/jobs/7?endpoint=" + c.endpoint + "&region=us-east-1"}, &stdout, &stderr)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the demo took %v to fail", d)
			}
			if code != 2 {
				t.Errorf("exit %d, want 2 (bad configuration); stderr: %s", code, stderr.String())
			}
			msg := stderr.String()
			for _, w := range []string{"eddy demo: --data", c.endpoint, c.bucket, "jobs/7", c.want} {
				if !strings.Contains(msg, w) {
					t.Errorf("stderr lacks %q: %s", w, msg)
				}
			}
			if all := stdout.String() + msg; strings.Contains(all, c.secret) || strings.Contains(all, srv.Secret) {
				t.Errorf("the output quotes a secret:\n%s", all)
			}
			if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
				t.Errorf("the demo created its output directory before failing (%v)", err)
			}
		})
	}
}

// TestBenchCheckpointOnS3 runs a tiny bench checkpoint against versitygw:
// both configurations report checkpoints, a cold recovery from the bucket
// and their store requests, with no latency injected by default, and the
// run leaves no object in the bucket.
func TestBenchCheckpointOnS3(t *testing.T) {
	if testing.Short() {
		t.Skip("runs jobs for seconds")
	}
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "bench")
	s3Credentials(t, srv)
	var out, errb bytes.Buffer
	store := "s3://bench/runs?endpoint=" + srv.Endpoint + "&region=" + srv.Region
	code := run([]string{"bench", "checkpoint", "--jobs", "value", "--state-mb", "2", "--duration", "500ms",
		"--recoveries", "1", "--dir", t.TempDir(), "--store", store}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "latency injected: false") || !strings.Contains(out.String(), "store: s3://bench/runs/eddy-bench-") {
		t.Errorf("header does not say the latency is off and where the checkpoints go:\n%s", out.String())
	}
	rows, reqs := benchTables(out.String(), "value")
	if len(rows) != 2 || rows[0][2] == "0" || rows[1][2] == "0" {
		t.Fatalf("want a row without and one with the changelog, each with checkpoints:\n%s", out.String())
	}
	wantRequestRows(t, rows, reqs, true, out.String())
	list, err := srv.Client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("bench")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list.Contents {
		t.Errorf("the bench left %s in the bucket", aws.ToString(o.Key))
	}

	// A store that does not open is a usage error, before anything runs.
	errb.Reset()
	code = run([]string{"bench", "checkpoint", "--store", "s3://nobucket/x?endpoint=" + srv.Endpoint}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), `bucket "nobucket" does not exist`) {
		t.Fatalf("missing bucket: exit %d, stderr %s", code, errb.String())
	}
}
