package s3

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/eddyflow/eddy/blob"
)

var _ blob.Parter = (*Store)(nil)

// MinPartSize is S3's least part size (5 MiB).
func (s *Store) MinPartSize() int { return MinPartSize }

// CreateParts starts a multipart upload of name.
func (s *Store) CreateParts(ctx context.Context, name string) (blob.PartUpload, error) {
	if err := blob.ValidateName(name); err != nil {
		return nil, err
	}
	key := aws.String(s.Key(name))
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(s.bucket), Key: key})
	if err != nil {
		return nil, s.fail("create parts", name, err)
	}
	return &partUpload{s: s, name: name, key: key, id: up.UploadId, etags: map[int]*string{}, sizes: map[int]int64{}}, nil
}

// partUpload is a multipart upload in progress.
type partUpload struct {
	s    *Store
	name string
	key  *string
	id   *string

	mu    sync.Mutex
	etags map[int]*string // by part number, of the last upload that finished
	sizes map[int]int64   // their sizes
}

func (u *partUpload) UploadPart(ctx context.Context, n int, data []byte) error {
	if n < 1 || n > 10000 {
		return u.s.fail("upload part", u.name, fmt.Errorf("part number %d outside 1..10000", n))
	}
	l := int64(len(data))
	out, err := u.s.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: aws.String(u.s.bucket), Key: u.key, UploadId: u.id,
		PartNumber: aws.Int32(int32(n)), Body: pieces{data}.reader(0, l), ContentLength: aws.Int64(l),
	})
	if err != nil {
		return u.s.fail(fmt.Sprintf("upload part %d of", n), u.name, err)
	}
	u.mu.Lock()
	u.etags[n], u.sizes[n] = out.ETag, l
	u.mu.Unlock()
	return nil
}

func (u *partUpload) ID() string { return *u.id }

func (u *partUpload) Complete(ctx context.Context, n int) error {
	u.mu.Lock()
	parts := make([]types.CompletedPart, 0, n)
	var size int64
	for i := 1; i <= n; i++ {
		size += u.sizes[i]
		etag, ok := u.etags[i]
		if !ok {
			u.mu.Unlock()
			return u.s.fail("complete", u.name, fmt.Errorf("part %d of %d was not uploaded", i, n))
		}
		parts = append(parts, types.CompletedPart{ETag: etag, PartNumber: aws.Int32(int32(i))})
	}
	u.mu.Unlock()
	err := u.s.complete(ctx, u.key, u.id, parts, size)
	if err != nil {
		return u.s.fail("complete", u.name, err)
	}
	return nil
}

// CompleteParts completes the multipart upload id of name from its parts
// 1..n as ListParts gives them (the ETags of the parts' last uploads).
func (s *Store) CompleteParts(ctx context.Context, name, id string, n int, size int64) error {
	if err := blob.ValidateName(name); err != nil {
		return err
	}
	if n < 1 || n > 10000 {
		return s.fail("complete", name, fmt.Errorf("part count %d outside 1..10000", n))
	}
	key := aws.String(s.Key(name))
	parts := make([]types.CompletedPart, 0, n)
	var listed int64
	in := &s3.ListPartsInput{Bucket: aws.String(s.bucket), Key: key, UploadId: aws.String(id)}
	for {
		out, err := s.client.ListParts(ctx, in)
		if err != nil && errorCode(err) == "NoSuchUpload" {
			if s.completed(ctx, key, size) {
				return nil
			}
			return s.fail("complete", name, fmt.Errorf("upload %s is gone and no object of %d bytes is there: %w", id, size, blob.ErrNotFound))
		}
		if err != nil {
			return s.fail(fmt.Sprintf("list the parts of upload %s of", id), name, err)
		}
		for _, p := range out.Parts {
			if p.PartNumber != nil && int(*p.PartNumber) <= n {
				parts = append(parts, types.CompletedPart{ETag: p.ETag, PartNumber: p.PartNumber})
				listed += aws.ToInt64(p.Size)
			}
		}
		if !aws.ToBool(out.IsTruncated) || out.NextPartNumberMarker == nil {
			break
		}
		in.PartNumberMarker = out.NextPartNumberMarker
	}
	slices.SortFunc(parts, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })
	parts = slices.CompactFunc(parts, func(a, b types.CompletedPart) bool { return *a.PartNumber == *b.PartNumber })
	if len(parts) != n {
		return s.fail("complete", name, fmt.Errorf("upload %s holds %d of parts 1..%d", id, len(parts), n))
	}
	if listed != size {
		return s.fail("complete", name, fmt.Errorf("upload %s: parts 1..%d hold %d bytes, want %d", id, n, listed, size))
	}
	if err := s.complete(ctx, key, aws.String(id), parts, size); err != nil {
		return s.fail("complete", name, err)
	}
	return nil
}

// complete completes the upload id of key from parts (in part order),
// which hold size bytes.
func (s *Store) complete(ctx context.Context, key, id *string, parts []types.CompletedPart, size int64) error {
	_, err := s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: key, UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil && errorCode(err) == "NoSuchUpload" && s.completed(ctx, key, size) {
		// An earlier attempt completed the upload and its response was
		// lost (or a hedge, the writer or another reader won): the
		// object is there, whole.
		return nil
	}
	return err
}

// completed reports whether the object exists with the size of the
// upload's parts, after a completion found the upload gone. (Names of
// objects built from parts are never reused, so an object of that size
// is this upload's.)
func (s *Store) completed(ctx context.Context, key *string, size int64) bool {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: key})
	return err == nil && out.ContentLength != nil && *out.ContentLength == size
}

func (u *partUpload) Abort(ctx context.Context) error {
	_, err := u.s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(u.s.bucket), Key: u.key, UploadId: u.id})
	if err != nil && !isNotFound(err) {
		return u.s.fail("abort", u.name, err)
	}
	return nil
}
