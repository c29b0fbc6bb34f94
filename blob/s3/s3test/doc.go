// Package s3test owns what tests of S3 storage need around the store: a
// real S3 server (versitygw over a temporary directory, started and
// stopped by the test) and a fault proxy that makes a healthy server look
// like a bad day on a real object store.
//
// Versitygw finds the versitygw binary on PATH, else in $EDDY_TOOLS/bin,
// else in the eddy-tools/bin directory next to the Go build cache
// ($(dirname $(go env GOCACHE))/eddy-tools/bin), where .ci/run installs it
// with
//
//	GOBIN=$(dirname $(go env GOCACHE))/eddy-tools/bin go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
//
// Without the binary a test skips, or fails if the environment variable
// CI is "true", so that CI cannot pass by skipping. The server listens on
// 127.0.0.1 only, with its own credentials, and is stopped at t.Cleanup.
//
// NewFaultProxy puts a reverse proxy on a free port of 127.0.0.1 in front
// of an endpoint and makes a healthy server look like a bad day on a real
// object store. Each request it does not bypass (FaultConfig.Filter) is
// delayed by a sample of FaultConfig.Latency (e.g. faulty.LongTail) and
// meets at most one fault, at its rate:
//
//   - ErrorRate: answered with 500 InternalError or 503 SlowDown (S3 XML
//     error bodies, which the AWS SDK retries) before it is forwarded;
//   - ErrorAfterRate: forwarded, and the response replaced by such an error,
//     so the client sees a failure although the server did the work;
//   - ResetRate: forwarded, and the connection reset (RST) after the headers
//     and half the body, or before any response when there is no body;
//   - StallRate: forwarded, and the response stopped after the headers and
//     half the body (before the headers when there is no body) until the
//     client gives up or the proxy is closed.
//
// The fate of the n-th request of each HTTP method is drawn from a
// generator seeded with FaultConfig.Seed, so a single-goroutine test meets
// the same faults in every run; with concurrent requests, who gets which
// fate depends on the order they arrive. FaultProxy.Stats counts what was
// injected, per kind. The proxy keeps the Host header, so clients sign
// requests with the server's credentials as if they reached it directly;
// it is closed at t.Cleanup, which releases stalled responses and waits
// for every request in flight.
//
//	srv := s3test.Versitygw(t)
//	p := s3test.NewFaultProxy(t, srv.Endpoint, s3test.FaultConfig{Seed: 1, ErrorRate: 0.05})
//	store := srv.Via(p).Open(t, "bucket", "prefix")
//
// A child process (say "eddy demo --data <URL>") reaches the server
// through the proxy, which runs in the test process, with the URL of
// srv.Via(p).URL(bucket, prefix) and the environment srv.Env() (the
// server's credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).
package s3test
