package s3test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	blobs3 "github.com/eddyflow/eddy/blob/s3"
)

// VersitygwVersion is the version of versitygw .ci/run installs.
const VersitygwVersion = "v1.8.0"

// Server is a running S3 server for a test.
type Server struct {
	Endpoint string // e.g. "http://127.0.0.1:41234"
	Access   string // the root user's access key
	Secret   string // and its secret
	Region   string
	Dir      string // the directory the server keeps buckets in
}

// ToolsBin returns the directory .ci/run installs test tools into:
// $EDDY_TOOLS/bin, or eddy-tools/bin next to the Go build cache.
func ToolsBin() string {
	if d := os.Getenv("EDDY_TOOLS"); d != "" {
		return filepath.Join(d, "bin")
	}
	cache := os.Getenv("GOCACHE")
	if cache == "" {
		if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
			cache = strings.TrimSpace(string(out))
		}
	}
	if cache == "" || cache == "off" {
		if d, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(d, "go-build")
		}
	}
	return filepath.Join(filepath.Dir(cache), "eddy-tools", "bin")
}

var findOnce = sync.OnceValues(func() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	p := filepath.Join(ToolsBin(), "versitygw")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("versitygw is neither on PATH nor at %s; install it with: GOBIN=%s go install github.com/versity/versitygw/cmd/versitygw@%s",
			p, ToolsBin(), VersitygwVersion)
	}
	return p, nil
})

// VersitygwPath returns the versitygw binary the tests use.
func VersitygwPath() (string, error) { return findOnce() }

// absent skips the test, or fails it on CI (CI=true).
func absent(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %v", err)
	}
	t.Skip(err)
}

// Versitygw starts versitygw on 127.0.0.1 with a posix backend in a
// temporary directory, waits until it accepts connections, and stops it at
// t.Cleanup. Without the binary it skips the test (fails it on CI).
func Versitygw(t testing.TB) *Server {
	t.Helper()
	bin, err := VersitygwPath()
	if err != nil {
		absent(t, err)
	}
	srv := &Server{Access: "eddy-test-access", Secret: "eddy-test-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		Region: "us-east-1", Dir: t.TempDir()}
	var lastErr error
	// A free port may be taken between finding it and the server binding
	// it; then the server exits and another port is tried.
	for range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if lastErr = start(t, bin, srv, addr); lastErr == nil {
			srv.Endpoint = "http://" + addr
			return srv
		}
	}
	t.Fatalf("versitygw did not start: %v", lastErr)
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs versitygw on addr and waits until it accepts connections or
// exits.
func start(t testing.TB, bin string, srv *Server, addr string) error {
	var out strings.Builder
	// Metadata (ETags, which If-None-Match and multipart completion rely
	// on) goes to a sidecar directory: the temporary directory's file
	// system may lack user xattrs, and with --nometa versitygw takes every
	// object for absent in conditional writes.
	sidecar := t.TempDir()
	cmd := exec.Command(bin, "--access", srv.Access, "--secret", srv.Secret, "--region", srv.Region,
		"--port", addr, "--quiet", "posix", "--sidecar", sidecar, srv.Dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY=", "ROOT_SECRET_KEY=")
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	ready := make(chan struct{})
	go func() {
		defer close(ready)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				return
			}
			select {
			case <-exited:
				return
			case <-tick.C:
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
	}
	select {
	case <-exited:
		return fmt.Errorf("versitygw exited (%v): %s", waitErr, out.String())
	default:
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err != nil {
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("versitygw does not accept connections on %s after 20s: %s", addr, out.String())
	} else {
		c.Close()
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	return nil
}

// Client returns an SDK client of the server with its root credentials.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.Access, s.Secret, ""),
	})
}

// CreateBucket creates the bucket name.
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %q at %s: %v", name, s.Endpoint, err)
	}
}

// Options returns the store options that reach the server (endpoint,
// region, credentials) followed by extra.
func (s *Server) Options(extra ...blobs3.Option) []blobs3.Option {
	return append([]blobs3.Option{
		blobs3.Endpoint(s.Endpoint), blobs3.Region(s.Region),
		blobs3.Credentials(credentials.NewStaticCredentialsProvider(s.Access, s.Secret, "")),
	}, extra...)
}

// Open returns a store of bucket/prefix on the server.
func (s *Server) Open(t testing.TB, bucket, prefix string, extra ...blobs3.Option) *blobs3.Store {
	t.Helper()
	st, err := blobs3.New(context.Background(), bucket, prefix, s.Options(extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Via returns a copy of s reached through the fault proxy p: its
// Endpoint is p's, so its Client, Options, Open, URL and Env go through
// the proxy while the credentials stay the server's.
func (s *Server) Via(p *FaultProxy) *Server {
	v := *s
	v.Endpoint = p.Endpoint
	return &v
}

// URL returns the blob.Open URL of bucket/prefix on the server:
// "s3://bucket/prefix?endpoint=...&region=...". The credentials are not
// in it; pass Env to the process that opens it.
func (s *Server) URL(bucket, prefix string) string {
	q := url.Values{"endpoint": {s.Endpoint}, "region": {s.Region}}
	return "s3://" + bucket + "/" + strings.Trim(prefix, "/") + "?" + q.Encode()
}

// Env returns the environment variables (as "KEY=value") with which a
// child process's blob/s3 reaches the server with its credentials: the
// access key and secret, the region, and an empty session token, profile
// and shared files so that nothing of the test's own AWS configuration
// takes over. Append them to os.Environ() for exec.Cmd.Env.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.Access,
		"AWS_SECRET_ACCESS_KEY=" + s.Secret,
		"AWS_SESSION_TOKEN=",
		"AWS_REGION=" + s.Region,
		"AWS_PROFILE=",
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
	}
}
