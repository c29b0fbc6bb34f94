package demojob

import (
	"net/url"
	"testing"

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

// TestCrashResumeS3 is the crash test with the checkpoints on a real S3
// server: random SIGKILLs, restarts at other parallelisms, and the
// committed output equal to an uninterrupted run's.
func TestCrashResumeS3(t *testing.T) { crashResume(t, false, s3Data) }

// TestCrashResumeChangelogS3 is the changelog crash test with the
// checkpoints and the DSTL on a real S3 server.
func TestCrashResumeChangelogS3(t *testing.T) { crashResume(t, true, s3Data) }
