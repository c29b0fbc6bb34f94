package s3_test

import (
	"context"
	"fmt"
	"io"
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
	st := s.(*blobs3.Store)
	ctx := context.Background()
	out, err := st.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(st.Bucket()), Key: aws.String(st.Key(name))})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	b = damage(b)
	_, err = st.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(st.Bucket()), Key: aws.String(st.Key(name)),
		Body: &byteReader{b: b}, ContentLength: aws.Int64(int64(len(b)))})
	if err != nil {
		t.Fatal(err)
	}
}

type byteReader struct {
	b   []byte
	off int64
}

func (r *byteReader) Read(p []byte) (int, error) {
	if r.off >= int64(len(r.b)) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.off:])
	r.off += int64(n)
	return n, nil
}

func (r *byteReader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		r.off = off
	case io.SeekCurrent:
		r.off += off
	case io.SeekEnd:
		r.off = int64(len(r.b)) + off
	}
	return r.off, nil
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
