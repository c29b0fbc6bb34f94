package blob_test

import (
	"context"
	"errors"
	"testing"

	"github.com/eddyflow/eddy/blob"
)

// flakyParter fails CompleteParts with each of errs in turn, then succeeds.
type flakyParter struct {
	errs  []error
	calls int
}

func (f *flakyParter) MinPartSize() int { return 5 << 20 }
func (f *flakyParter) CreateParts(context.Context, string) (blob.PartUpload, error) {
	return nil, errors.New("not used")
}
func (f *flakyParter) CompleteParts(_ context.Context, name, id string, parts int, size int64) error {
	f.calls++
	if f.calls <= len(f.errs) {
		return f.errs[f.calls-1]
	}
	return nil
}

// TestCompleteUploadRetries: a failed completion is tried again up to the
// attempts given; an upload that is gone is reported at once, matching
// ErrNotFound; the last failure is returned when all attempts fail.
func TestCompleteUploadRetries(t *testing.T) {
	ctx := context.Background()
	busy := errors.New("503 slow down")
	p := &flakyParter{errs: []error{busy, busy}}
	if err := blob.CompleteUpload(ctx, p, "log/1", "u1", 2, 100, 3); err != nil || p.calls != 3 {
		t.Fatalf("two failures then success: %v after %d calls, want nil after 3", err, p.calls)
	}
	p = &flakyParter{errs: []error{busy, busy, busy}}
	if err := blob.CompleteUpload(ctx, p, "log/1", "u1", 2, 100, 3); !errors.Is(err, busy) || p.calls != 3 {
		t.Fatalf("three failures: %v after %d calls, want the failure after 3", err, p.calls)
	}
	p = &flakyParter{errs: []error{blob.ErrNotFound}}
	if err := blob.CompleteUpload(ctx, p, "log/1", "u1", 2, 100, 3); !errors.Is(err, blob.ErrNotFound) || p.calls != 1 {
		t.Fatalf("upload gone: %v after %d calls, want ErrNotFound after 1", err, p.calls)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	p = &flakyParter{errs: []error{busy, busy}}
	if err := blob.CompleteUpload(cctx, p, "log/1", "u1", 2, 100, 3); !errors.Is(err, context.Canceled) || !errors.Is(err, busy) || p.calls != 1 {
		t.Fatalf("context ended: %v after %d calls, want the failure and context.Canceled after 1", err, p.calls)
	}
}
