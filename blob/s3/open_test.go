package s3_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/eddyflow/eddy/blob"
	blobs3 "github.com/eddyflow/eddy/blob/s3"
	"github.com/eddyflow/eddy/blob/s3/s3test"
)

// secret is a recognisable secret that no error may quote.
const secret = "S3CR3T-do-not-print-7f3a9c"

// wantOpenError checks that err names endpoint, bucket and prefix, says
// what, and does not quote the secret.
func wantOpenError(t *testing.T, err error, endpoint, bucket, prefix string, what ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("open succeeded")
	}
	msg := err.Error()
	for _, s := range append([]string{endpoint, bucket, prefix}, what...) {
		if !strings.Contains(msg, s) {
			t.Errorf("open error %q does not mention %q", msg, s)
		}
	}
	if strings.Contains(msg, secret) {
		t.Errorf("open error quotes the secret: %q", msg)
	}
}

func TestOpenErrors(t *testing.T) {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "exists")
	ctx := context.Background()
	open := func(endpoint, bucket, access, sec string, extra ...blobs3.Option) error {
		_, err := blobs3.New(ctx, bucket, "job/7", append([]blobs3.Option{
			blobs3.Endpoint(endpoint), blobs3.Region("us-east-1"),
			blobs3.Credentials(credentials.NewStaticCredentialsProvider(access, sec, "")),
			blobs3.OpenTimeout(2 * time.Second),
		}, extra...)...)
		return err
	}
	t.Run("WrongSecret", func(t *testing.T) {
		err := open(srv.Endpoint, "exists", srv.Access, secret)
		wantOpenError(t, err, srv.Endpoint, "exists", "job/7", "credentials were refused", "SignatureDoesNotMatch")
	})
	t.Run("UnknownAccessKey", func(t *testing.T) {
		err := open(srv.Endpoint, "exists", "no-such-key", secret)
		wantOpenError(t, err, srv.Endpoint, "exists", "job/7", "credentials were refused")
	})
	t.Run("MissingBucket", func(t *testing.T) {
		err := open(srv.Endpoint, "missing", srv.Access, srv.Secret)
		wantOpenError(t, err, srv.Endpoint, "missing", "job/7", `bucket "missing" does not exist`)
	})
	t.Run("Unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		endpoint := "http://" + l.Addr().String()
		l.Close() // nothing listens there now
		start := time.Now()
		err = open(endpoint, "exists", srv.Access, secret)
		wantOpenError(t, err, endpoint, "exists", "job/7", "is the endpoint right")
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("open of an unreachable endpoint took %v", d)
		}
	})
	t.Run("Silent", func(t *testing.T) {
		// A server that accepts connections and never answers.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
			}
		}()
		endpoint := "http://" + l.Addr().String()
		start := time.Now()
		err = open(endpoint, "exists", srv.Access, secret, blobs3.OpenTimeout(300*time.Millisecond))
		wantOpenError(t, err, endpoint, "exists", "job/7", "no answer within 300ms")
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("open of a silent endpoint took %v", d)
		}
	})
	t.Run("AccessDenied", func(t *testing.T) {
		deny := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`))
		}))
		defer deny.Close()
		err := open(deny.URL, "exists", srv.Access, secret)
		wantOpenError(t, err, deny.URL, "exists", "job/7", "access denied", "s3:ListBucket")
	})
	// denyOne forwards to the server but answers requests with method
	// with a 403 with code, as a server does for credentials lacking one
	// permission, or refusing this machine's clock.
	denyOne := func(t *testing.T, method, code string) string {
		target, err := url.Parse(srv.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(target)
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == method {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusForbidden)
				fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>refused</Message></Error>`, code)
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(front.Close)
		return front.URL
	}
	t.Run("DeleteDenied", func(t *testing.T) {
		endpoint := denyOne(t, http.MethodDelete, "AccessDenied")
		err := open(endpoint, "exists", srv.Access, srv.Secret)
		wantOpenError(t, err, endpoint, "exists", "job/7", "DeleteObject", "access denied", "s3:DeleteObject")
		// Its probe object could not be deleted; it is no blob (List
		// does not show it), and the test removes it.
		st := srv.Open(t, "exists", "job/7")
		if names, err := st.List(ctx, ""); err != nil || len(names) != 0 {
			t.Fatalf("List after a probe that could not delete = %q, %v; want nothing", names, err)
		}
		out, err := srv.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("exists")})
		if err != nil || len(out.Contents) != 1 || !strings.Contains(aws.ToString(out.Contents[0].Key), ".eddy-probe-") {
			t.Fatalf("bucket after a probe that could not delete: %v, %v; want its probe object", out, err)
		}
		srv.Client().DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("exists"), Key: out.Contents[0].Key})
		// A store opened to read only needs no delete.
		if err := open(endpoint, "exists", srv.Access, srv.Secret, blobs3.ReadOnly()); err != nil {
			t.Fatalf("read-only open where only deletes are denied: %v", err)
		}
	})
	t.Run("PutDenied", func(t *testing.T) {
		endpoint := denyOne(t, http.MethodPut, "AccessDenied")
		err := open(endpoint, "exists", srv.Access, srv.Secret)
		wantOpenError(t, err, endpoint, "exists", "job/7", "PutObject", "s3:PutObject")
	})
	t.Run("ClockSkew", func(t *testing.T) {
		endpoint := denyOne(t, http.MethodGet, "RequestTimeTooSkewed")
		err := open(endpoint, "exists", srv.Access, secret)
		wantOpenError(t, err, endpoint, "exists", "job/7", "clock", "RequestTimeTooSkewed")
	})
	// The probe leaves nothing behind.
	st := srv.Open(t, "exists", "job/7")
	if names, err := st.List(ctx, ""); err != nil || len(names) != 0 {
		t.Fatalf("after the probes, List = %q, %v; want nothing", names, err)
	}
	out, err := srv.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("exists")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		t.Errorf("object %q left in the bucket", aws.ToString(o.Key))
	}
}

// blob.Open takes the credentials from the standard environment
// variables and the endpoint from the URL.
func TestOpenURL(t *testing.T) {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "url")
	t.Setenv("AWS_ACCESS_KEY_ID", srv.Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.Secret)
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	s, err := blob.Open("s3://url/some/prefix?endpoint=" + srv.Endpoint + "&region=us-east-1&multipart_above=6000000&part_size=5242880")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "a/b", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "a/b"); err != nil || string(got) != "hello" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	// The object is where the URL says.
	if _, err := s.(*blobs3.Store).Client().HeadObject(ctx, headInput("url", "some/prefix/a/b")); err != nil {
		t.Fatalf("no object some/prefix/a/b in bucket url: %v", err)
	}
	// With a wrong secret in the environment, Open fails without quoting it.
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	_, err = blob.Open("s3://url/some/prefix?endpoint=" + srv.Endpoint)
	wantOpenError(t, err, srv.Endpoint, "url", "some/prefix", "credentials were refused")
}

func TestOpenURLErrors(t *testing.T) {
	for url, want := range map[string]string{
		"s3://":                         "missing path",
		"s3:///prefix":                  "no bucket",
		"s3://b/p?colour=blue":          `unknown parameter "colour"`,
		"s3://b/p?part_size=-1":         "positive number of bytes",
		"s3://b/p?open_timeout=soon":    "positive duration",
		"s3://b/p?path_style=maybe":     "path_style",
		"s3://b/p?concurrency=0":        "positive integer",
		"s3://b/p?stall_timeout=0s":     "positive duration",
		"s3://b/p?multipart_above=1e99": "positive number of bytes",
	} {
		_, err := blob.Open(url)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", url, err, want)
		}
	}
}

// Stats counts the requests of each operation, multipart parts and
// ranged reads included.
func TestStats(t *testing.T) {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "stats")
	s := srv.Open(t, "stats", "p", testOpts...)
	ctx := context.Background()
	step := func(what string, f func() error, want blobs3.Requests) {
		t.Helper()
		before := s.Stats()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := s.Stats().Sub(before); got != want {
			t.Errorf("%s: requests %+v, want %+v", what, got, want)
		}
	}
	big := make([]byte, 20<<20) // 20 MiB + trailer: 5 parts of 5 MiB
	step("small put", func() error { return s.Put(ctx, "x", []byte("x")) }, blobs3.Requests{Put: 1})
	step("small get", func() error { _, err := s.Get(ctx, "x"); return err }, blobs3.Requests{Get: 1})
	step("list", func() error { _, err := s.List(ctx, ""); return err }, blobs3.Requests{List: 1})
	step("delete", func() error { return s.Delete(ctx, "x") }, blobs3.Requests{Delete: 1})
	step("large put", func() error { return s.Put(ctx, "big", big) }, blobs3.Requests{Put: 1 + 5 + 1})
	step("large get", func() error { _, err := s.Get(ctx, "big"); return err }, blobs3.Requests{Get: 5})
	step("conditional create", func() error { return s.PutIfAbsent(ctx, "c", []byte("c")) }, blobs3.Requests{Put: 1})
	step("lost conditional create", func() error {
		if err := s.PutIfAbsent(ctx, "c", []byte("d")); !errors.Is(err, blob.ErrExists) {
			return err
		}
		return nil
	}, blobs3.Requests{Put: 1, Get: 1}) // the Get compares the existing bytes
}
