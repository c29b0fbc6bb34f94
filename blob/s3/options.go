package s3

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Option configures a Store made by New.
type Option func(*config)

type config struct {
	endpoint       string
	region         string
	pathStyle      bool
	multipartAbove int64
	partSize       int64
	concurrency    int
	openTimeout    time.Duration
	stallTimeout   time.Duration
	maxAttempts    int
	creds          aws.CredentialsProvider
	readOnly       bool
}

// Defaults of the options.
const (
	DefaultMultipartAbove = 16 << 20
	DefaultPartSize       = 8 << 20
	DefaultConcurrency    = 8
	DefaultOpenTimeout    = 5 * time.Second
	DefaultStallTimeout   = 30 * time.Second
	DefaultMaxAttempts    = 2
	// MinPartSize is S3's least size of a multipart upload's part (but
	// the last).
	MinPartSize = 5 << 20
)

func defaults() config {
	return config{
		multipartAbove: DefaultMultipartAbove,
		partSize:       DefaultPartSize,
		concurrency:    DefaultConcurrency,
		openTimeout:    DefaultOpenTimeout,
		stallTimeout:   DefaultStallTimeout,
		maxAttempts:    DefaultMaxAttempts,
	}
}

// Endpoint sends requests to an S3-compatible server at url (e.g.
// "http://127.0.0.1:9000") instead of AWS, with path-style addressing.
func Endpoint(url string) Option {
	return func(c *config) { c.endpoint, c.pathStyle = url, true }
}

// Region sets the region; without it, the shared config's or
// AWS_REGION's applies, and "us-east-1" if neither says.
func Region(region string) Option { return func(c *config) { c.region = region } }

// PathStyle addresses the bucket in the path (http://host/bucket/key)
// rather than in the host name; Endpoint implies it.
func PathStyle(on bool) Option { return func(c *config) { c.pathStyle = on } }

// MultipartAbove uploads objects larger than n bytes (payload and trailer)
// as parallel multipart pieces, and reads objects larger than the part
// size with parallel ranged GETs.
func MultipartAbove(n int64) Option { return func(c *config) { c.multipartAbove = n } }

// PartSize sets the size of a multipart upload's pieces and of a large
// read's ranges; it is raised to MinPartSize.
func PartSize(n int64) Option { return func(c *config) { c.partSize = n } }

// Concurrency bounds the parts of one object uploaded or read at once.
func Concurrency(n int) Option { return func(c *config) { c.concurrency = n } }

// OpenTimeout bounds the probe New makes of the bucket.
func OpenTimeout(d time.Duration) Option { return func(c *config) { c.openTimeout = d } }

// StallTimeout fails a request whose response does not start, or whose
// body makes no progress, for d; the caller (or blob.Hedger) retries.
func StallTimeout(d time.Duration) Option { return func(c *config) { c.stallTimeout = d } }

// MaxAttempts sets the SDK's attempts per request (retries plus one). It
// is low by default because blob.Hedger hedges and retries above the
// store; a retry inside the SDK would hide a slow store from it.
func MaxAttempts(n int) Option { return func(c *config) { c.maxAttempts = max(n, 1) } }

// ReadOnly skips the write probe of New (a Put, Get and Delete of a
// probe object), for tools that only read a store with credentials that
// may only read. The store's writes still work if the credentials allow.
func ReadOnly() Option { return func(c *config) { c.readOnly = true } }

// Credentials uses p instead of the default chain (environment variables
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, the shared config and
// credentials files, then the instance's role).
func Credentials(p aws.CredentialsProvider) Option { return func(c *config) { c.creds = p } }

// parseURL splits the part of an "s3://" URL after the scheme into bucket,
// prefix and options:
//
//	bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1
//
// Parameters: endpoint, region, path_style (true/false), multipart_above
// and part_size (bytes), concurrency, open_timeout and stall_timeout
// (durations such as "5s"), max_attempts, read_only (true/false).
func parseURL(rest string) (bucket, prefix string, opts []Option, err error) {
	path, query, _ := strings.Cut(rest, "?")
	bucket, prefix, _ = strings.Cut(path, "/")
	if bucket == "" {
		return "", "", nil, fmt.Errorf("blob/s3: no bucket in s3://%s; want s3://bucket/prefix", rest)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", "", nil, fmt.Errorf("blob/s3: parameters of s3://%s: %v", path, err)
	}
	for k, vs := range q {
		v := vs[len(vs)-1]
		bad := func(e error) error {
			return fmt.Errorf("blob/s3: parameter %s=%q of s3://%s: %v", k, v, path, e)
		}
		switch k {
		case "endpoint":
			opts = append(opts, Endpoint(v))
		case "region":
			opts = append(opts, Region(v))
		case "path_style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "", "", nil, bad(err)
			}
			// After endpoint, whatever the order in the URL.
			defer func() { opts = append(opts, PathStyle(b)) }()
		case "multipart_above", "part_size":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return "", "", nil, bad(fmt.Errorf("want a positive number of bytes"))
			}
			if k == "part_size" {
				opts = append(opts, PartSize(n))
			} else {
				opts = append(opts, MultipartAbove(n))
			}
		case "concurrency", "max_attempts":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return "", "", nil, bad(fmt.Errorf("want a positive integer"))
			}
			if k == "concurrency" {
				opts = append(opts, Concurrency(n))
			} else {
				opts = append(opts, MaxAttempts(n))
			}
		case "read_only":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "", "", nil, bad(err)
			}
			if b {
				opts = append(opts, ReadOnly())
			}
		case "open_timeout", "stall_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return "", "", nil, bad(fmt.Errorf("want a positive duration such as 5s"))
			}
			if k == "open_timeout" {
				opts = append(opts, OpenTimeout(d))
			} else {
				opts = append(opts, StallTimeout(d))
			}
		default:
			return "", "", nil, fmt.Errorf("blob/s3: unknown parameter %q in s3://%s (known: endpoint, region, path_style, multipart_above, part_size, concurrency, open_timeout, stall_timeout, max_attempts, read_only)", k, path)
		}
	}
	return bucket, prefix, opts, nil
}
