package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/internal/parallel"
)

func init() {
	blob.RegisterScheme("s3", func(rest string) (blob.Store, error) {
		bucket, prefix, opts, err := parseURL(rest)
		if err != nil {
			return nil, err
		}
		return New(context.Background(), bucket, prefix, opts...)
	})
}

// Store is a blob.Store keeping each object in an S3 object under one
// bucket and key prefix. It is safe for concurrent use.
type Store struct {
	client *s3.Client
	bucket string
	prefix string // "" or ending in "/"
	where  string // s3://bucket/prefix at endpoint, for errors
	cfg    config
	reqs   counters
}

var (
	_ blob.Store      = (*Store)(nil)
	_ blob.Creator    = (*Store)(nil)
	_ blob.IntoGetter = (*Store)(nil)
)

// New returns the store of the objects under prefix in bucket, after a
// probe that checks, within the open timeout, that the endpoint answers,
// the credentials are accepted, the bucket exists and may be listed, and
// (unless ReadOnly) that objects may be written, read and deleted: a List
// of at most one key, then a Put, Get and Delete of a probe object. Its errors name the endpoint, bucket and
// prefix, never the secret.
func New(ctx context.Context, bucket, prefix string, opts ...Option) (*Store, error) {
	c := defaults()
	for _, o := range opts {
		o(&c)
	}
	c.partSize = max(c.partSize, MinPartSize)
	c.concurrency = max(c.concurrency, 1)
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	s := &Store{bucket: bucket, prefix: prefix, cfg: c}
	s.where = "s3://" + bucket + "/" + prefix
	if c.endpoint != "" {
		s.where += " at " + c.endpoint
	}
	if bucket == "" {
		return nil, fmt.Errorf("blob/s3: empty bucket name")
	}

	loadOpts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRetryMaxAttempts(c.maxAttempts),
		awsconfig.WithHTTPClient(s.httpClient()),
	}
	if c.region != "" {
		loadOpts = append(loadOpts, awsconfig.WithRegion(c.region))
	}
	if c.creds != nil {
		loadOpts = append(loadOpts, awsconfig.WithCredentialsProvider(c.creds))
	}
	actx, cancel := context.WithTimeout(ctx, c.openTimeout)
	defer cancel()
	awsCfg, err := awsconfig.LoadDefaultConfig(actx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("blob/s3: open %s: load AWS configuration: %w", s.where, err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	s.client = s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if c.endpoint != "" {
			o.BaseEndpoint = aws.String(c.endpoint)
		}
		o.UsePathStyle = c.pathStyle
		// The SDK's own log lines (e.g. a body it could not drain after a
		// reset connection) would go to stderr past the job's logger;
		// every failure that matters reaches the caller as an error.
		o.Logger = logging.Nop{}
		o.HTTPClient = &countingClient{base: o.HTTPClient, c: &s.reqs}
		// The trailer's CRC-32C guards the payload end to end; the SDK's
		// own checksums are left to operations that require them, which
		// S3-compatible servers support unevenly.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	if err := s.probe(actx); err != nil {
		return nil, err
	}
	return s, nil
}

// probeKey is the base of the object the write probe creates and deletes
// under the prefix; it starts with "." so that no blob name can be it.
const probeKey = ".eddy-probe-"

// probe lists at most one key under the prefix and, unless the store is
// read-only, puts, reads and deletes a probe object, so that credentials
// missing one of the permissions a job needs fail at open, not at the
// first checkpoint or prune. A failure becomes an error that says what
// to fix.
func (s *Store) probe(ctx context.Context) error {
	err := probeRetry(ctx, func() error {
		_, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
			Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix), MaxKeys: aws.Int32(1),
		})
		return err
	})
	if err != nil {
		return s.probeError("ListObjectsV2", "s3:ListBucket", err)
	}
	if s.cfg.readOnly {
		return nil
	}
	key := aws.String(s.prefix + probeKey + strconv.FormatInt(time.Now().UnixNano(), 36))
	err = probeRetry(ctx, func() error {
		_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: key, Body: bytes.NewReader([]byte("probe"))})
		return err
	})
	if err != nil {
		return s.probeError("PutObject", "s3:PutObject", err)
	}
	err = probeRetry(ctx, func() error {
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: key})
		if err == nil {
			_, err = io.Copy(io.Discard, out.Body)
			out.Body.Close()
		}
		return err
	})
	if err != nil {
		_, _ = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: key})
		return s.probeError("GetObject", "s3:GetObject", err)
	}
	err = probeRetry(ctx, func() error {
		_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: key})
		return err
	})
	if err != nil {
		return s.probeError("DeleteObject", "s3:DeleteObject", err)
	}
	return nil
}

// probeAttempts bounds the tries of each probe request: a server that
// answers errors or drops connections now and then (as S3 does, with 503
// SlowDown) must not fail the open, one that keeps doing so must.
const probeAttempts = 5

// probeRetry runs op until it succeeds, fails with an error no retry can
// fix (a 4xx answer: credentials, permissions, bucket, clock), ctx ends or
// probeAttempts tries have failed, backing off between tries.
func probeRetry(ctx context.Context, op func() error) error {
	var err error
	for try := 0; try < probeAttempts; try++ {
		if err = op(); err == nil || ctx.Err() != nil {
			return err
		}
		if st := httpStatus(err); st >= 400 && st < 500 && st != http.StatusRequestTimeout && st != http.StatusTooManyRequests {
			return err
		}
		t := time.NewTimer(time.Duration(50<<try) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
	return err
}

// probeError explains the failure of the probe's request op, which needs
// the permission perm.
func (s *Store) probeError(op, perm string, err error) error {
	hint := "is the endpoint right and the server up?"
	switch code := errorCode(err); {
	case code == "NoSuchBucket":
		hint = fmt.Sprintf("bucket %q does not exist; create it, or fix the bucket in the URL", s.bucket)
	case code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "InvalidClientTokenId" ||
		code == "ExpiredToken" || code == "XAdminUserNotFound" || httpStatus(err) == http.StatusUnauthorized:
		hint = "the credentials were refused (" + code + "); check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE and the shared config"
	case code == "RequestTimeTooSkewed" || code == "RequestExpired":
		hint = "the server refused the request's time (" + code + "): this machine's clock is too far from the server's; fix the clock (NTP)"
	case code == "AccessDenied" || code == "Forbidden" || httpStatus(err) == http.StatusForbidden:
		hint = fmt.Sprintf("access denied to %s (%s); the credentials need %s: a job needs s3:ListBucket on bucket %q for prefix %q, and s3:GetObject, s3:PutObject and s3:DeleteObject on its objects (add read_only=true to the URL to only read)",
			op, code, perm, s.bucket, s.prefix)
	case errors.Is(err, context.DeadlineExceeded):
		hint = fmt.Sprintf("no answer within %v; is the endpoint right and the server up?", s.cfg.openTimeout)
	case strings.Contains(err.Error(), "get credentials") || strings.Contains(err.Error(), "retrieve credentials"):
		hint = "no credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
	}
	return fmt.Errorf("blob/s3: open %s: %s: %s: %w", s.where, op, hint, err)
}

// httpClient is the client of the SDK: it fails a response that does not
// start within the stall timeout. It is an SDK buildable client so that
// the configuration can still add its CA bundle (AWS_CA_BUNDLE).
func (s *Store) httpClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = min(3*time.Second, s.cfg.openTimeout) }).
		WithTransportOptions(func(tr *http.Transport) {
			tr.ResponseHeaderTimeout = s.cfg.stallTimeout
			tr.MaxIdleConnsPerHost = 2 * s.cfg.concurrency
		})
}

// Client returns the S3 client the store uses, e.g. for a test to reach
// its objects behind its back.
func (s *Store) Client() *s3.Client { return s.client }

// Bucket returns the store's bucket.
func (s *Store) Bucket() string { return s.bucket }

// Key returns the S3 key of the object name: the prefix, then name.
func (s *Store) Key(name string) string { return s.prefix + name }

// String names the store by bucket, prefix and endpoint.
func (s *Store) String() string { return s.where }

// errorCode returns the S3 error code of err, or "".
func errorCode(err error) string {
	var ae interface{ ErrorCode() string }
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// httpStatus returns the HTTP status of err's response, or 0.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return true
	}
	code := errorCode(err)
	return code == "NoSuchKey" || code == "NotFound" || httpStatus(err) == http.StatusNotFound && code != "NoSuchBucket"
}

func (s *Store) fail(op, name string, err error) error {
	return fmt.Errorf("blob/s3: %s %q in %s: %w", op, name, s.where, err)
}

// Put stores data under name: one PUT of payload and trailer, or for a
// large object a multipart upload, which S3 makes visible whole when it
// completes.
func (s *Store) Put(ctx context.Context, name string, data []byte) error {
	if err := blob.ValidateName(name); err != nil {
		return err
	}
	if err := s.put(ctx, name, data, false); err != nil {
		return s.fail("put", name, err)
	}
	return nil
}

// PutIfAbsent stores data under name like Put if no object name exists,
// with "If-None-Match: *" on the PUT (or on the completion of the
// multipart upload): S3 decides atomically, and a loser gets 412, reported
// as an error matching blob.ErrExists. A 409 (a concurrent conditional
// write still in flight) is retried a few times. Since a request may have
// succeeded though its response was lost and a retry then found the
// object, an existing object holding exactly data counts as created by
// this call: give writers that must be told apart bytes of their own.
func (s *Store) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	if err := blob.ValidateName(name); err != nil {
		return err
	}
	var err error
	for attempt := 0; ; attempt++ {
		err = s.put(ctx, name, data, true)
		if errorCode(err) != "ConditionalRequestConflict" && httpStatus(err) != http.StatusConflict || attempt == conflictRetries {
			break
		}
		if werr := blob.Sleep(ctx, time.Duration(10<<attempt)*time.Millisecond); werr != nil {
			break
		}
	}
	if err == nil {
		return nil
	}
	if errorCode(err) == "PreconditionFailed" || httpStatus(err) == http.StatusPreconditionFailed {
		got, gerr := s.Get(ctx, name)
		switch {
		case gerr == nil && bytes.Equal(got, data):
			return nil
		case gerr == nil || errors.Is(gerr, blob.ErrNotFound):
			// Another writer's bytes, or an object deleted since: it
			// existed and was not ours.
			return blob.Exists(name)
		}
		// Whose the object is cannot be told: not ErrExists, which would
		// tell the caller another writer won; the caller may try again.
		return fmt.Errorf("blob/s3: put if absent %q in %s: the object exists and reading it back to compare failed: %w", name, s.where, gerr)
	}
	return s.fail("put if absent", name, err)
}

// conflictRetries bounds the retries of a conditional write that S3
// reports in conflict with another one in flight.
const conflictRetries = 5

func (s *Store) put(ctx context.Context, name string, data []byte, ifAbsent bool) error {
	var t [blob.TrailerSize]byte
	trailer := blob.AppendTrailer(t[:0], data)
	obj := pieces{data, trailer}
	if obj.size() > s.cfg.multipartAbove {
		return s.putMultipart(ctx, name, obj, ifAbsent)
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.Key(name)),
		Body:          obj.reader(0, obj.size()),
		ContentLength: aws.Int64(obj.size()),
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := s.client.PutObject(ctx, in)
	return err
}

// putMultipart uploads obj in parts of the part size, concurrently, each
// read from the caller's buffer (nothing is copied), and completes the
// upload, conditionally if ifAbsent. A failed upload is aborted.
func (s *Store) putMultipart(ctx context.Context, name string, obj pieces, ifAbsent bool) (err error) {
	key := aws.String(s.Key(name))
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(s.bucket), Key: key})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// Abort even when ctx is done: the parts cost storage.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_, _ = s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.bucket), Key: key, UploadId: up.UploadId})
		}
	}()
	size, ps := obj.size(), s.cfg.partSize
	n := int((size + ps - 1) / ps)
	parts := make([]types.CompletedPart, n)
	err = parallel.ForEach(ctx, n, s.cfg.concurrency, func(ctx context.Context, i int) error {
		off := int64(i) * ps
		l := min(ps, size-off)
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: aws.String(s.bucket), Key: key, UploadId: up.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: obj.reader(off, l), ContentLength: aws.Int64(l),
		})
		if err != nil {
			return fmt.Errorf("part %d of %d: %w", i+1, n, err)
		}
		parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))}
		return nil
	})
	if err != nil {
		return err
	}
	in := &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	_, err = s.client.CompleteMultipartUpload(ctx, in)
	return err
}

// Get reads the object name and verifies its trailer.
func (s *Store) Get(ctx context.Context, name string) ([]byte, error) {
	var buf []byte
	return s.GetInto(ctx, name, &buf)
}

// GetInto is Get reading into *buf, grown as needed. The first GET asks
// for the first part-size bytes; a larger object's other ranges are read
// in parallel, each on condition that the object is still the one the
// first GET saw (If-Match its ETag); if it was replaced meanwhile, the
// read starts over.
func (s *Store) GetInto(ctx context.Context, name string, buf *[]byte) ([]byte, error) {
	if err := blob.ValidateName(name); err != nil {
		return nil, err
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var data []byte
		data, err = s.get(ctx, name, buf)
		if err == nil {
			return blob.CheckTrailer(name, data)
		}
		if isNotFound(err) {
			return nil, blob.NotFound(name)
		}
		if !errors.Is(err, errReplaced) {
			break
		}
	}
	return nil, s.fail("get", name, err)
}

// errReplaced says the object changed between the ranged GETs of a read.
var errReplaced = errors.New("object replaced during the read")

func (s *Store) get(ctx context.Context, name string, buf *[]byte) ([]byte, error) {
	ps := s.cfg.partSize
	first, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.Key(name)),
		Range: aws.String("bytes=0-" + strconv.FormatInt(ps-1, 10)),
	})
	if err != nil {
		if errorCode(err) == "InvalidRange" || httpStatus(err) == http.StatusRequestedRangeNotSatisfiable {
			return nil, nil // an empty object: CheckTrailer says it is truncated
		}
		return nil, err
	}
	total, err := objectSize(first)
	if err != nil {
		first.Body.Close()
		return nil, err
	}
	if int64(int(total)) != total {
		first.Body.Close()
		return nil, fmt.Errorf("%d bytes do not fit in memory", total)
	}
	if int64(cap(*buf)) < total {
		*buf = make([]byte, total)
	}
	data := (*buf)[:total]
	n := min(total, ps)
	if first.ContentRange == nil {
		n = total // the server ignored the range
	}
	err = s.readBody(ctx, first.Body, data[:n])
	if err != nil || n == total {
		return data, err
	}
	rest := int((total - n + ps - 1) / ps)
	err = parallel.ForEach(ctx, rest, s.cfg.concurrency, func(ctx context.Context, i int) error {
		off := n + int64(i)*ps
		end := min(off+ps, total)
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
			Bucket: aws.String(s.bucket), Key: aws.String(s.Key(name)),
			Range:   aws.String(fmt.Sprintf("bytes=%d-%d", off, end-1)),
			IfMatch: first.ETag,
		})
		if err != nil {
			if errorCode(err) == "PreconditionFailed" || httpStatus(err) == http.StatusPreconditionFailed || isNotFound(err) {
				return errReplaced
			}
			return err
		}
		if t, err := objectSize(out); err != nil || t != total {
			out.Body.Close()
			return errReplaced
		}
		return s.readBody(ctx, out.Body, data[off:end])
	})
	return data, err
}

// objectSize returns the size of the whole object from a (ranged) GET.
func objectSize(out *s3.GetObjectOutput) (int64, error) {
	if out.ContentRange == nil {
		if out.ContentLength == nil {
			return 0, errors.New("response has neither Content-Range nor Content-Length")
		}
		return *out.ContentLength, nil
	}
	cr := *out.ContentRange // "bytes 0-99/1234"
	i := strings.LastIndexByte(cr, '/')
	total, err := strconv.ParseInt(cr[i+1:], 10, 64)
	if i < 0 || err != nil || total < 0 {
		return 0, fmt.Errorf("malformed Content-Range %q", cr)
	}
	return total, nil
}

// readBody fills dst from body and closes it. A body that makes no
// progress for the stall timeout fails; so does one that ends early or
// goes on past dst, both signs of an object replaced under the read.
func (s *Store) readBody(ctx context.Context, body io.ReadCloser, dst []byte) error {
	stalled := time.AfterFunc(s.cfg.stallTimeout, func() { body.Close() })
	defer stalled.Stop()
	defer body.Close()
	for off := 0; off < len(dst); {
		k, err := body.Read(dst[off:min(len(dst), off+256<<10)])
		off += k
		if k > 0 && !stalled.Reset(s.cfg.stallTimeout) {
			return fmt.Errorf("the response body made no progress for %v", s.cfg.stallTimeout)
		}
		if err == io.EOF && off < len(dst) {
			return fmt.Errorf("response body ended after %d of %d bytes", off, len(dst))
		}
		if err != nil && err != io.EOF {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !stalled.Stop() {
				return fmt.Errorf("the response body made no progress for %v: %w", s.cfg.stallTimeout, err)
			}
			return err
		}
	}
	var one [1]byte
	if k, _ := body.Read(one[:]); k > 0 {
		return fmt.Errorf("response body longer than the %d bytes expected", len(dst))
	}
	return nil
}

// List returns the names under prefix, page by page of ListObjectsV2.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	var names []string
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix + prefix),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("blob/s3: list %q in %s: %w", prefix, s.where, err)
		}
		for _, o := range page.Contents {
			name, ok := strings.CutPrefix(aws.ToString(o.Key), s.prefix)
			if ok && strings.HasPrefix(name, prefix) && blob.ValidateName(name) == nil {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// Delete removes the object name; S3 answers a delete of a missing key
// with success.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := blob.ValidateName(name); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.Key(name))})
	if err != nil && !isNotFound(err) {
		return s.fail("delete", name, err)
	}
	return nil
}
