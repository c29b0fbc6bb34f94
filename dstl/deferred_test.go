package dstl

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/s3/s3test"
)

// diesBeforeCompleting wraps a store that builds objects from parts as if
// the writer's process died once a stream's parts were up: every
// completion by the writer (PartUpload.Complete) fails, and, with corrupt
// set, the bytes of that part number arrive with a byte flipped. A
// reader's CompleteParts goes through.
type diesBeforeCompleting struct {
	blob.Store
	p       blob.Parter
	corrupt int
}

func (s diesBeforeCompleting) MinPartSize() int { return s.p.MinPartSize() }

func (s diesBeforeCompleting) CreateParts(ctx context.Context, name string) (blob.PartUpload, error) {
	u, err := s.p.CreateParts(ctx, name)
	if err != nil {
		return nil, err
	}
	return stuckUpload{u, s.corrupt}, nil
}

func (s diesBeforeCompleting) CompleteParts(ctx context.Context, name, id string, n int, size int64) error {
	return s.p.CompleteParts(ctx, name, id, n, size)
}

type stuckUpload struct {
	blob.PartUpload
	corrupt int
}

func (u stuckUpload) UploadPart(ctx context.Context, n int, data []byte) error {
	if n == u.corrupt {
		data = slices.Clone(data)
		data[len(data)/2] ^= 0x40
	}
	return u.PartUpload.UploadPart(ctx, n, data)
}

func (u stuckUpload) Complete(context.Context, int) error {
	return errors.New("injected: the writer is gone")
}

// logInterval appends changes of bytes value bytes each (enough for
// several parts of min bytes) to w and returns the model of them.
func logInterval(t *testing.T, w *Writer, n, bytes int, seed uint64) model {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	want := model{}
	value := make([]byte, bytes)
	for i := range n {
		for j := range value {
			value[j] = byte(rng.Uint32())
		}
		c := change{kg: uint32(i % 8), state: 1, op: OpPut, key: fmt.Sprintf("k%d", i%(n/2)), value: string(value)}
		mustAppend(t, w, c)
		replay(want, []change{c}, 0, 1)
	}
	return want
}

// testWriterNeverCompletes checks a checkpoint whose log object's
// completion never happened: Persist returns once the parts are up, with
// the upload in the handle; the failed completions fail the log (never
// silently lost); and a reader with the handle completes the upload and
// replays every change.
func testWriterNeverCompletes(t *testing.T, inner blob.Store, opts Options, n, bytes int) {
	p, _, ok := blob.PartsOf(inner)
	if !ok {
		t.Fatalf("%T cannot build objects from parts", inner)
	}
	store := diesBeforeCompleting{Store: inner, p: p}

	l := openLog(t, store, opts)
	w := l.Writer("w")
	want := logInterval(t, w, n, bytes, 1)
	h := mustPersist(t, w)
	if len(h.Objects) != 1 || len(h.Uploads) != 1 || h.Uploads[0].Object != h.Objects[0] || h.Uploads[0].Parts < 2 {
		t.Fatalf("handle %+v, want one object of several parts, its upload pending", h)
	}
	if _, err := inner.Get(context.Background(), h.Objects[0]); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("the uncompleted object: Get gives %v, want not found", err)
	}
	waitFor(t, time.Minute, "the failed completion to fail the log", func() bool { return l.Metrics().FailedCompletions == 1 })
	var be *BatchError
	if err := w.Append(0, 1, []byte("k"), []byte("v"), false); !errors.As(err, &be) || !strings.Contains(err.Error(), "complete") || be.Object != h.Objects[0] {
		t.Fatalf("Append after the completion failed: %v, want a *BatchError naming the completion of %q", err, h.Objects[0])
	}
	if err := l.Close(); !errors.As(err, &be) {
		t.Fatalf("Close = %v, want the log's *BatchError", err)
	}

	for try := range 2 { // the second read finds the object complete
		got := newSyncModel()
		var st ReadStats
		if err := Read(context.Background(), store, ReadOptions{Stats: &st}, []Handle{h}, 0, 8, got.apply); err != nil {
			t.Fatalf("read %d: %v", try, err)
		}
		if d := diff(got.m, want); d != "" {
			t.Fatalf("read %d:\n%s", try, d)
		}
		if st.Completed != int64(1-try) {
			t.Fatalf("read %d: stats %+v, want %d completed by the read", try, st, 1-try)
		}
	}
}

// TestWriterNeverCompletes is testWriterNeverCompletes on the in-memory
// store of parts.
func TestWriterNeverCompletes(t *testing.T) {
	testWriterNeverCompletes(t, newPartStore(16<<10), Options{FlushBytes: 20 << 10}, 200, 1000)
}

// TestWriterNeverCompletesOnS3 is testWriterNeverCompletes on versitygw,
// whose ListParts gives the reader the parts' ETags.
func TestWriterNeverCompletesOnS3(t *testing.T) {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "dstl")
	testWriterNeverCompletes(t, srv.Open(t, "dstl", "log"), Options{FlushBytes: 6 << 20}, 4000, 4000)
}

// pendingUpload logs an interval of several parts (values from seed) to a
// log on store and persists it: the handle names the object's upload.
func pendingUpload(t *testing.T, store blob.Store, seed uint64) (*Log, Handle, model) {
	t.Helper()
	l := openLog(t, store, Options{FlushBytes: 20 << 10})
	w := l.Writer("w")
	want := logInterval(t, w, 200, 1000, seed)
	h := mustPersist(t, w)
	if len(h.Uploads) != 1 {
		t.Fatalf("handle %+v, want its object's upload", h)
	}
	return l, h, want
}

// TestCompletedByWriterAndReader reads a handle whose upload the writer
// completed meanwhile (Close waits for it): the read finds the object and
// completes nothing; a second completion from the handle is harmless.
func TestCompletedByWriterAndReader(t *testing.T) {
	store := newPartStore(16 << 10)
	l, h, want := pendingUpload(t, store, 2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if m := l.Metrics(); m.Completions != 1 || m.FailedCompletions != 0 {
		t.Fatalf("metrics %+v, want one completion in the background", m)
	}
	u := h.Uploads[0]
	if err := store.CompleteParts(context.Background(), u.Object, u.ID, int(u.Parts), u.Size); err != nil {
		t.Fatalf("completing again: %v", err)
	}
	got := newSyncModel()
	var st ReadStats
	if err := Read(context.Background(), store, ReadOptions{Stats: &st}, []Handle{h}, 0, 8, got.apply); err != nil {
		t.Fatal(err)
	}
	if d := diff(got.m, want); d != "" {
		t.Fatal(d)
	}
	if st.Completed != 0 {
		t.Fatalf("stats %+v, want nothing completed by the read", st)
	}
}

// TestCorruptPartOnS3 completes, as a reader, an upload one of whose
// parts arrived damaged: the object's checksum catches it, and the error
// names the object.
func TestCorruptPartOnS3(t *testing.T) {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "dstl")
	inner := srv.Open(t, "dstl", "log")
	store := diesBeforeCompleting{Store: inner, p: inner, corrupt: 2}
	l := openLog(t, store, Options{FlushBytes: 6 << 20})
	w := l.Writer("w")
	logInterval(t, w, 4000, 4000, 3)
	h := mustPersist(t, w)
	if len(h.Uploads) != 1 || h.Uploads[0].Parts < 2 {
		t.Fatalf("handle %+v, want an upload of several parts", h)
	}
	err := Read(context.Background(), store, ReadOptions{}, []Handle{h}, 0, 8, newSyncModel().apply)
	var ce *blob.CorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), h.Objects[0]) {
		t.Fatalf("Read = %v, want a corruption error naming %q", err, h.Objects[0])
	}
}

// TestReadUploadRefusesBadHandles: an upload of an object the handle does
// not list, without an id, or of no parts is refused before any request.
func TestReadUploadRefusesBadHandles(t *testing.T) {
	base := Handle{Writer: "w", After: 0, Upto: 1, Objects: []string{"a"}}
	for _, c := range []struct {
		up   Upload
		want string
	}{
		{Upload{Object: "b", ID: "x", Parts: 1, Size: 20}, "not among its objects"},
		{Upload{Object: "a", Parts: 1, Size: 20}, "without an id"},
		{Upload{Object: "a", ID: "x", Size: 20}, "part count 0"},
		{Upload{Object: "a", ID: "x", Parts: 1, Size: 3}, "less than a trailer"},
	} {
		h := base
		h.Uploads = []Upload{c.up}
		store := newPartStore(16 << 10)
		err := Read(context.Background(), store, ReadOptions{}, []Handle{h}, 0, 8, newSyncModel().apply)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("upload %+v: Read = %v, want an error containing %q", c.up, err, c.want)
		}
		if n := store.getsOf("a"); n != 0 {
			t.Errorf("upload %+v: %d reads of the object", c.up, n)
		}
	}
}

// completesLater wraps a store of parts whose completion by a reader
// reports success while the object is not there yet, as versitygw
// answers a completion that joins one in progress: the object appears
// only after the first read that misses it.
type completesLater struct {
	diesBeforeCompleting
	mu      sync.Mutex
	pending map[string]func() error // by object: what makes it appear
}

func (s *completesLater) CompleteParts(ctx context.Context, name, id string, n int, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = map[string]func() error{}
	}
	s.pending[name] = func() error { return s.p.CompleteParts(ctx, name, id, n, size) }
	return nil
}

func (s *completesLater) Get(ctx context.Context, name string) ([]byte, error) {
	s.mu.Lock()
	appear := s.pending[name]
	delete(s.pending, name)
	s.mu.Unlock()
	if appear != nil {
		if err := appear(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("get %q: %w", name, blob.ErrNotFound)
	}
	return s.Store.Get(ctx, name)
}

// TestCompletionInProgress: a reader whose completion of a log object's
// upload succeeds, but only joins a completion still in progress, waits
// for the object instead of failing on its first miss.
func TestCompletionInProgress(t *testing.T) {
	inner := newPartStore(16 << 10)
	store := &completesLater{diesBeforeCompleting: diesBeforeCompleting{Store: inner, p: inner}}
	_, h, want := pendingUpload(t, store, 3)
	got := newSyncModel()
	if err := Read(context.Background(), store, ReadOptions{}, []Handle{h}, 0, 8, got.apply); err != nil {
		t.Fatal(err)
	}
	if d := diff(got.m, want); d != "" {
		t.Fatalf("read:\n%s", d)
	}
}
