package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob/faulty"
	"github.com/eddyflow/eddy/blob/s3/s3test"
)

// benchS3Env turns TestBenchCheckpointS3Proxy on; its value is the
// arguments of `eddy bench checkpoint` (split on spaces), to which the
// test adds --store.
const benchS3Env = "EDDY_BENCH_S3"

// TestBenchCheckpointS3Proxy is not a test but the harness of the
// checkpoint benchmark on a real S3 protocol: it starts versitygw and the
// fault proxy in front of it (latency p50 20 ms, p99 200 ms, p99.9 3 s,
// as the bench's injected latency; 0.5% of requests fail, half of them
// after the server did the work) and runs `eddy bench checkpoint
// --store s3://...` through it, printing the bench's report. Run it with
//
//	EDDY_BENCH_S3='--state-mb 1024 --duration 20s --materialize 10s --recoveries 3' \
//	  go test ./cmd/eddy -run '^TestBenchCheckpointS3Proxy$' -v -timeout 2h
//
// The same arguments with --latency and no --store measure the local
// store with injected latency, for the side-by-side comparison.
func TestBenchCheckpointS3Proxy(t *testing.T) {
	args := os.Getenv(benchS3Env)
	if args == "" {
		t.Skip(benchS3Env + " is not set: this is a benchmark harness, not a test")
	}
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "bench")
	s3Credentials(t, srv)
	p := s3test.NewFaultProxy(t, srv.Endpoint, s3test.FaultConfig{Seed: uint64(time.Now().UnixNano()),
		ErrorRate: 0.0025, ErrorAfterRate: 0.0025,
		Latency: faulty.LongTail(20*time.Millisecond, 200*time.Millisecond, 3*time.Second)})
	store := srv.Via(p).URL("bench", "runs") + "&stall_timeout=10s"
	var out, errb strings.Builder
	code := run(append(append([]string{"bench", "checkpoint"}, strings.Fields(args)...), "--store", store), &out, &errb)
	t.Logf("fault proxy: %+v", p.Stats())
	for op, ds := range p.ServerTimes() {
		t.Logf("server time of %s: %d requests, p50 %v, p99 %v, p99.9 %v, max %v", op, len(ds), pct(ds, 0.5), pct(ds, 0.99), pct(ds, 0.999), pct(ds, 1))
	}
	t.Log("\n" + out.String())
	t.Log("\n" + errb.String()) // progress, and where the slowest checkpoints spent their time
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}
