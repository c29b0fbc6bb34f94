package s3test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/eddyflow/eddy/blob"
	blobs3 "github.com/eddyflow/eddy/blob/s3"
)

// Rewrite replaces the stored bytes of object name of s (a *blob/s3.Store)
// with what damage makes of them, through the SDK and past the store: the
// object's trailer and checksum are left as damage leaves them, as a
// damaged or truncated object would be.
func Rewrite(t testing.TB, s blob.Store, name string, damage func([]byte) []byte) {
	t.Helper()
	st := s.(*blobs3.Store)
	ctx := context.Background()
	key := aws.String(st.Key(name))
	out, err := st.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(st.Bucket()), Key: key})
	if err != nil {
		t.Fatalf("s3test: rewrite %s: %v", name, err)
	}
	b, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil {
		t.Fatalf("s3test: rewrite %s: %v", name, err)
	}
	b = damage(b)
	_, err = st.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(st.Bucket()), Key: key,
		Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b)))})
	if err != nil {
		t.Fatalf("s3test: rewrite %s: %v", name, err)
	}
}
