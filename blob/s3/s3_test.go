package s3_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/blobtest"
	blobs3 "github.com/eddyflow/eddy/blob/s3"
	"github.com/eddyflow/eddy/blob/s3/s3test"
)

// testOpts make the tests' 20 MiB objects multipart uploads of 5 MiB
// parts, read with parallel ranged GETs.
var testOpts = []blobs3.Option{blobs3.MultipartAbove(8 << 20), blobs3.PartSize(5 << 20)}

var seq atomic.Int64

// corrupt rewrites an object's stored bytes with the SDK, bypassing the
// store.
func corrupt(t *testing.T, s blob.Store, name string, damage func([]byte) []byte) {
	s3test.Rewrite(t, s, name, damage)
}

func TestConformanceVersitygw(t *testing.T) {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "conformance")
	blobtest.Run(t, func(t *testing.T) blob.Store {
		return srv.Open(t, "conformance", fmt.Sprintf("run/%d", seq.Add(1)), testOpts...)
	}, blobtest.Corrupt(corrupt))
}

func headInput(bucket, key string) *s3.HeadObjectInput {
	return &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
}
