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
// NewFaultProxy puts a reverse proxy on 127.0.0.1 in front of a server:
// it delays requests (a long-tailed latency), answers some with 500
// InternalError or 503 SlowDown (before or after the server did the work),
// resets connections and stalls response bodies, deciding each with a
// seeded generator.
package s3test
