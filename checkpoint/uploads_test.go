package checkpoint

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/s3/s3test"
)

// pendingObject uploads payload as the one part of an upload of name on
// p, without completing it, and returns the upload.
func pendingObject(t *testing.T, p blob.Parter, name string, payload []byte) (blob.PartUpload, LogUpload) {
	t.Helper()
	ctx := context.Background()
	u, err := p.CreateParts(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	data := blob.AppendTrailerOf(append([]byte(nil), payload...), blob.UpdateChecksum(0, payload), int64(len(payload)))
	if err := u.UploadPart(ctx, 1, data); err != nil {
		t.Fatal(err)
	}
	return u, LogUpload{Object: name, ID: u.ID(), Parts: 1, Size: int64(len(data))}
}

// logManifest is checkpoint id whose log part is the object of up.
func logManifest(id uint64, up LogUpload) *Manifest {
	return &Manifest{ID: id, Files: []string{up.Object}, Operators: []OperatorState{{Name: "op", MaxParallelism: 8, Parallelism: 1,
		Changelog: []LogPart{{KeyGroupEnd: 8, Writer: "op-0", Upto: 5, Objects: []string{up.Object}, Uploads: []LogUpload{up}}}}}}
}

// TestLatestCompletesUploads: the newest checkpoint names a log object
// whose upload its writer never completed; Latest completes it and returns
// the checkpoint. A checkpoint whose upload is gone (aborted) with no
// object is skipped, as one with a missing file is.
func TestLatestCompletesUploads(t *testing.T) {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "ckpt")
	store := srv.Open(t, "ckpt", "job")
	ctx := context.Background()
	st := NewStorage(store, 3)

	_, up := pendingObject(t, store, "checkpoints/00000000000000000001/dstl-r-1", []byte("the log of checkpoint 1"))
	if err := st.Complete(ctx, logManifest(1, up)); err != nil {
		t.Fatal(err)
	}
	m, skipped, err := st.Latest(ctx)
	if err != nil || m == nil || m.ID != 1 || len(skipped) != 0 {
		t.Fatalf("Latest = %v, skipped %v, %v; want checkpoint 1", m, skipped, err)
	}
	if got, err := store.Get(ctx, up.Object); err != nil || string(got) != "the log of checkpoint 1" {
		t.Fatalf("the completed object: %q, %v", got, err)
	}

	aborted, up2 := pendingObject(t, store, "checkpoints/00000000000000000002/dstl-r-2", []byte("lost"))
	if err := aborted.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Complete(ctx, logManifest(2, up2)); err != nil {
		t.Fatal(err)
	}
	defer func(w time.Duration) { completeWait = w }(completeWait)
	completeWait = 100 * time.Millisecond
	m, skipped, err = st.Latest(ctx)
	if err != nil || m == nil || m.ID != 1 {
		t.Fatalf("Latest = %v, %v; want checkpoint 1", m, err)
	}
	var se *SkipError
	if len(skipped) != 1 || !errors.As(skipped[0], &se) || se.ID != 2 || !strings.Contains(se.Error(), "missing") {
		t.Fatalf("skipped %v, want checkpoint 2 for its missing log object", skipped)
	}
}
