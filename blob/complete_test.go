package blob_test

import (
	"context"
	"errors"
	"testing"
	"time"

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

// TestCompleteAndAwait: after the completion, successful or finding the
// upload gone, the object is looked for until it shows (a completion may
// only have joined one in progress); not showing within the wait is false,
// a failed completion or look is an error.
func TestCompleteAndAwait(t *testing.T) {
	ctx := context.Background()
	lookups := 0
	showsAt := func(n int) func(context.Context) (bool, error) {
		lookups = 0
		return func(context.Context) (bool, error) { lookups++; return lookups >= n, nil }
	}
	for _, errs := range [][]error{nil, {blob.ErrNotFound}} {
		found, err := blob.CompleteAndAwait(ctx, &flakyParter{errs: errs}, "log/1", "u1", 2, 100, 3, time.Minute, showsAt(3))
		if !found || err != nil || lookups != 3 {
			t.Fatalf("completion %v, object on the third look: %v, %v after %d looks", errs, found, err, lookups)
		}
	}
	if found, err := blob.CompleteAndAwait(ctx, &flakyParter{}, "log/1", "u1", 2, 100, 3, 0, showsAt(1000)); found || err != nil || lookups != 1 {
		t.Fatalf("object never there, no wait: %v, %v after %d looks, want false after 1", found, err, lookups)
	}
	busy := errors.New("403 access denied")
	if found, err := blob.CompleteAndAwait(ctx, &flakyParter{errs: []error{busy, busy, busy}}, "log/1", "u1", 2, 100, 3, time.Minute, showsAt(1)); found || !errors.Is(err, busy) {
		t.Fatalf("completion failing: %v, %v", found, err)
	}
	broken := errors.New("list failed")
	if found, err := blob.CompleteAndAwait(ctx, &flakyParter{}, "log/1", "u1", 2, 100, 3, time.Minute,
		func(context.Context) (bool, error) { return false, broken }); found || !errors.Is(err, broken) {
		t.Fatalf("look failing: %v, %v", found, err)
	}
}
