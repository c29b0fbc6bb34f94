package s3_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/blobtest"
	blobs3 "github.com/eddyflow/eddy/blob/s3"
)

// gofakes3 is an in-process S3 server: the conformance suite runs on it
// without a binary. It honours If-None-Match on PutObject but ignores it
// on CompleteMultipartUpload (v1.2.0), so here every object, the 20 MiB
// ones included, is uploaded with one PUT; multipart conditional creates
// are checked against versitygw.
func TestConformanceGofakes3(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("conformance"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	blobtest.Run(t, func(t *testing.T) blob.Store {
		s, err := blobs3.New(context.Background(), "conformance", fmt.Sprintf("run/%d", seq.Add(1)),
			blobs3.Endpoint(srv.URL), blobs3.Region("us-east-1"),
			blobs3.Credentials(credentials.NewStaticCredentialsProvider("key", "secret", "")),
			blobs3.MultipartAbove(1<<30), blobs3.PartSize(5<<20))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, blobtest.Corrupt(corrupt))
}
