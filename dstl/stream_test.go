package dstl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob"
)

// partStore is memStore as a blob.Parter with a small least part size:
// parts are kept in memory until Complete checks their trailer and stores
// the payload. It records what happened to each upload.
type partStore struct {
	*memStore
	min int

	mu       sync.Mutex
	created  int
	aborted  int
	complete int
	failPart func(n int) error // nil: parts succeed
	// failComplete, if set, decides the fate of each completion by the
	// writer (PartUpload.Complete); nil: they succeed.
	failComplete func() error
	uploads      map[string]*memUpload // by id
}

func newPartStore(min int) *partStore { return &partStore{memStore: newMemStore(), min: min} }

func (s *partStore) MinPartSize() int { return s.min }

func (s *partStore) CreateParts(ctx context.Context, name string) (blob.PartUpload, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.created++
	u := &memUpload{s: s, name: name, id: fmt.Sprintf("upload-%d", s.created), parts: map[int][]byte{}}
	if s.uploads == nil {
		s.uploads = map[string]*memUpload{}
	}
	s.uploads[u.id] = u
	return u, nil
}

// CompleteParts completes the upload id, as S3 does: an upload gone with
// the object there (of the size given) is success.
func (s *partStore) CompleteParts(ctx context.Context, name, id string, n int, size int64) error {
	s.mu.Lock()
	u := s.uploads[id]
	s.mu.Unlock()
	if u == nil || u.name != name {
		return fmt.Errorf("complete %q: no upload %s: %w", name, id, blob.ErrNotFound)
	}
	return u.complete(ctx, n, size)
}

func (s *partStore) counts() (created, completed, aborted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.created, s.complete, s.aborted
}

type memUpload struct {
	s    *partStore
	name string
	id   string

	mu      sync.Mutex
	parts   map[int][]byte
	done    bool
	aborted bool
}

func (u *memUpload) UploadPart(ctx context.Context, n int, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	u.s.mu.Lock()
	fail := u.s.failPart
	u.s.mu.Unlock()
	if fail != nil {
		if err := fail(n); err != nil {
			return err
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done {
		return errors.New("upload is over")
	}
	u.parts[n] = append([]byte(nil), data...)
	return nil
}

func (u *memUpload) ID() string { return u.id }

func (u *memUpload) Complete(ctx context.Context, n int) error {
	u.s.mu.Lock()
	fail := u.s.failComplete
	u.s.mu.Unlock()
	if fail != nil {
		if err := fail(); err != nil {
			return err
		}
	}
	return u.complete(ctx, n, -1)
}

// complete makes parts 1..n the object; an upload completed before is
// success if the object (of size, unless negative) is there.
func (u *memUpload) complete(ctx context.Context, n int, size int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	u.mu.Lock()
	if u.done {
		aborted := u.aborted
		u.mu.Unlock()
		if !aborted {
			if data, err := u.s.memStore.Get(ctx, u.name); err == nil && (size < 0 || int64(len(data)+blob.TrailerSize) == size) {
				return nil
			}
		}
		return fmt.Errorf("complete %q: upload %s is over: %w", u.name, u.id, blob.ErrNotFound)
	}
	var all []byte
	for i := 1; i <= n; i++ {
		p, ok := u.parts[i]
		if !ok {
			u.mu.Unlock()
			return fmt.Errorf("part %d missing", i)
		}
		if i < n && len(p) < u.s.min {
			u.mu.Unlock()
			return fmt.Errorf("part %d has %d bytes, under the least part size %d", i, len(p), u.s.min)
		}
		all = append(all, p...)
	}
	if size >= 0 && int64(len(all)) != size {
		u.mu.Unlock()
		return fmt.Errorf("complete %q: parts 1..%d hold %d bytes, want %d", u.name, n, len(all), size)
	}
	u.done = true
	u.mu.Unlock()
	payload, err := blob.CheckTrailer(u.name, all)
	if err != nil {
		return err
	}
	u.s.mu.Lock()
	u.s.complete++
	u.s.mu.Unlock()
	return u.s.Put(ctx, u.name, payload)
}

func (u *memUpload) Abort(ctx context.Context) error {
	u.mu.Lock()
	u.done, u.aborted = true, true
	u.mu.Unlock()
	u.s.mu.Lock()
	u.s.aborted++
	u.s.mu.Unlock()
	return nil
}

// streamValue is a change's value: 1000 bytes that do not compress away.
func streamValue(i int) []byte {
	v := make([]byte, 1000)
	for j := range v {
		v[j] = byte(i*7 + j*j)
	}
	return v
}

// TestStreamedIntervalIsOneObject logs several FlushBytes of changes in
// one checkpoint interval from two writers: the batches sealed early go up
// as parts, and the barrier's batch completes ONE object, which the
// handles of both writers name and Read replays in full, also from the
// local copy.
func TestStreamedIntervalIsOneObject(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("compression=%v", compress), func(t *testing.T) {
			store := newPartStore(64 << 10)
			local := t.TempDir()
			l := openLog(t, store, Options{FlushBytes: 50 << 10, Compression: compress, LocalDir: local})
			a, b := l.Writer("a"), l.Writer("b")
			want := model{}
			for i := range 600 {
				w := a
				if i%3 == 0 {
					w = b
				}
				c := change{kg: uint32(i % 7), state: 1, op: OpPut, key: fmt.Sprintf("k%d", i%250), value: string(streamValue(i))}
				mustAppend(t, w, c)
				replay(want, []change{c}, 0, 1)
			}
			if m := l.Metrics(); m.Batches < 5 {
				t.Fatalf("%d batches sealed early, want several", m.Batches)
			}
			ua, ub := a.Cut(), b.Cut()
			ha, hb := mustPersistUpto(t, a, 0, ua), mustPersistUpto(t, b, 0, ub)
			if len(ha.Objects) != 1 || !slices.Equal(ha.Objects, hb.Objects) || !slices.Equal(ha.CRCs, hb.CRCs) {
				t.Fatalf("handles %+v and %+v, want one shared object", ha, hb)
			}
			if len(ha.Uploads) != 1 || ha.Uploads[0].Object != ha.Objects[0] {
				t.Fatalf("handle %+v, want the object's upload, whose completion was deferred", ha)
			}
			// Close waits for the completion in the background.
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			names, _ := store.List(context.Background(), "")
			if len(names) != 1 {
				t.Fatalf("store holds %v, want one object", names)
			}
			m := l.Metrics()
			created, completed, aborted := store.counts()
			if m.Objects != 1 || m.Parts < 2 || created != 1 || completed != 1 || aborted != 0 {
				t.Fatalf("metrics %+v; uploads created %d, completed %d, aborted %d: want one object of several parts", m, created, completed, aborted)
			}
			if m.Uploads != m.Batches || m.Completions != 1 {
				t.Fatalf("%d of %d batches uploaded, %d completions", m.Uploads, m.Batches, m.Completions)
			}
			for _, dir := range []string{"", local} {
				got := newSyncModel()
				var st ReadStats
				err := Read(context.Background(), store, ReadOptions{LocalDir: dir, Stats: &st}, []Handle{ha, hb}, 0, 7, got.apply)
				if err != nil {
					t.Fatal(err)
				}
				if d := diff(got.m, want); d != "" {
					t.Fatalf("replay (local dir %q):\n%s", dir, d)
				}
				if dir != "" && st.LocalReads != 1 {
					t.Fatalf("read stats %+v, want the object read from its local copy", st)
				}
			}
		})
	}
}

// TestStreamEndsWithoutABarrierBatch persists a writer whose changes all
// went into batches sealed early: its Cut ends no batch, so the Persist
// itself completes the open stream instead of waiting for the next
// interval's barrier.
func TestStreamEndsWithoutABarrierBatch(t *testing.T) {
	store := newPartStore(16 << 10)
	l := openLog(t, store, Options{FlushBytes: 20 << 10})
	w := l.Writer("w")
	for i := range 60 {
		mustAppend(t, w, change{state: 1, op: OpPut, key: fmt.Sprint(i), value: string(streamValue(i))})
	}
	// Seal what is left early too: now every change is in the open stream.
	l.seal(true)
	if m := l.Metrics(); m.Objects != 0 || m.Batches < 2 {
		t.Fatalf("metrics %+v: want batches sealed early and no object yet", m)
	}
	h := mustPersistUpto(t, w, 0, w.Cut())
	if len(h.Objects) != 1 || h.Upto != 60 {
		t.Fatalf("handle %+v, want one object up to 60", h)
	}
	got := newSyncModel()
	if err := Read(context.Background(), store, ReadOptions{}, []Handle{h}, 0, 1, got.apply); err != nil {
		t.Fatal(err)
	}
	if len(got.m) != 60 {
		t.Fatalf("replayed %d keys, want 60", len(got.m))
	}
}

// TestStreamPartFails fails every upload of one part: Persist returns a
// BatchError naming the object and the part, the log fails, and the
// upload is aborted, leaving no object.
func TestStreamPartFails(t *testing.T) {
	store := newPartStore(16 << 10)
	var tries atomic.Int64
	store.failPart = func(n int) error {
		if n == 2 {
			tries.Add(1)
			return errors.New("injected: part rejected")
		}
		return nil
	}
	l := openLog(t, store, Options{FlushBytes: 20 << 10, MaxAttempts: 2})
	w := l.Writer("w")
	for i := range 100 {
		if err := change(change{state: 1, op: OpPut, key: fmt.Sprint(i), value: string(streamValue(i))}).append(w); err != nil {
			break // the log may fail while appending
		}
	}
	_, err := w.Persist(context.Background(), 0)
	var be *BatchError
	if !errors.As(err, &be) || !bytes.Contains([]byte(err.Error()), []byte("part 2")) || !bytes.Contains([]byte(err.Error()), []byte("injected")) {
		t.Fatalf("Persist: %v, want a BatchError naming part 2 and the cause", err)
	}
	if tries.Load() != 2 {
		t.Fatalf("part 2 tried %d times, want MaxAttempts (2)", tries.Load())
	}
	if err := w.Append(0, 1, []byte("k"), []byte("v"), false); !errors.As(err, &be) {
		t.Fatalf("Append after the failure: %v, want the BatchError", err)
	}
	l.Close()
	if _, _, aborted := store.counts(); aborted != 1 {
		t.Fatalf("%d uploads aborted, want 1", aborted)
	}
	if names, _ := store.List(context.Background(), ""); len(names) != 0 {
		t.Fatalf("store holds %v after a failed stream", names)
	}
}

// TestStreamClosed closes the log with a stream open: a Persist waiting
// for it returns ErrClosed, the upload is aborted and its local copy's
// temporary file removed.
func TestStreamClosed(t *testing.T) {
	store := newPartStore(16 << 10)
	local := t.TempDir()
	l, err := Open(store, Options{FlushBytes: 20 << 10, LocalDir: local})
	if err != nil {
		t.Fatal(err)
	}
	w := l.Writer("w")
	for i := range 60 {
		mustAppend(t, w, change{state: 1, op: OpPut, key: fmt.Sprint(i), value: string(streamValue(i))})
	}
	l.seal(true)
	waitFor(t, 10*time.Second, "a part uploaded", func() bool { return l.Metrics().Parts >= 1 })
	l.Close()
	if _, err := w.PersistUpto(context.Background(), 0, 60); !errors.Is(err, ErrClosed) {
		t.Fatalf("Persist after Close: %v, want ErrClosed", err)
	}
	if created, completed, aborted := store.counts(); created != 1 || completed != 0 || aborted != 1 {
		t.Fatalf("uploads created %d, completed %d, aborted %d; want one, aborted", created, completed, aborted)
	}
	var files []string
	filepath.WalkDir(local, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	if len(files) != 0 {
		t.Fatalf("local files left: %v", files)
	}
}

// TestDecodeFrames decodes an object of two frames (what a stream
// uploads) and names the frame a damage is in.
func TestDecodeFrames(t *testing.T) {
	one, err := EncodeObject(&Object{Sections: []Section{{Writer: "a", Changes: []Change{{Seq: 1, Op: OpPut, Key: []byte("k"), Value: []byte("v1")}}}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	two, err := EncodeObject(&Object{Sections: []Section{{Writer: "a", Changes: []Change{{Seq: 2, Op: OpPut, Key: []byte("k"), Value: []byte("v2")}}}}}, true)
	if err != nil {
		t.Fatal(err)
	}
	both := append(append([]byte(nil), one...), two...)
	o, err := DecodeObject(both)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Sections) != 2 || o.Sections[1].Changes[0].Seq != 2 || string(o.Sections[1].Changes[0].Value) != "v2" {
		t.Fatalf("decoded %+v", o)
	}
	b, _ := decodeBatch(both, nil)
	if want := framesCRC([]uint32{objectCRC(one), objectCRC(two)}); b.crc != want || b.crc == objectCRC(one) {
		t.Fatalf("checksum %08x, want %08x", b.crc, want)
	}
	bad := slices.Clone(both)
	bad[len(bad)-1] ^= 1
	if _, err := DecodeObject(bad); !errors.Is(err, ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte("frame 2")) {
		t.Fatalf("damaged second frame: %v, want ErrCorrupt naming frame 2", err)
	}
	if _, err := DecodeObject(both[:len(both)-3]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated: %v, want ErrCorrupt", err)
	}
}

// TestStreamNeedsRoomInFlight: with MaxInFlight below four least part
// sizes, pending frames could hold what blocked Appends wait for, so the
// log makes an object per batch instead; a writer logging past
// MaxInFlight is not stuck.
func TestStreamNeedsRoomInFlight(t *testing.T) {
	store := newPartStore(1 << 20)
	l := openLog(t, store, Options{FlushBytes: 64 << 10, MaxInFlight: 3 << 20})
	w := l.Writer("w")
	for i := range 5000 {
		mustAppend(t, w, change{state: 1, op: OpPut, key: fmt.Sprint(i), value: string(streamValue(i))})
	}
	mustPersist(t, w)
	if m := l.Metrics(); m.Parts != 0 || m.Objects != m.Batches {
		t.Fatalf("metrics %+v: want one object per batch, no parts", m)
	}
}

// TestNoParts: with Options.NoParts, a store that builds objects from
// parts gets an object per batch, as any store does.
func TestNoParts(t *testing.T) {
	store := newPartStore(16 << 10)
	l := openLog(t, store, Options{FlushBytes: 20 << 10, NoParts: true})
	w := l.Writer("w")
	for i := range 60 {
		mustAppend(t, w, change{state: 1, op: OpPut, key: fmt.Sprint(i), value: string(streamValue(i))})
	}
	h := mustPersist(t, w)
	if m := l.Metrics(); m.Parts != 0 || m.Objects != m.Batches || len(h.Objects) != int(m.Batches) || m.Batches < 2 {
		t.Fatalf("metrics %+v, handle objects %v: want one object per batch", m, h.Objects)
	}
	if created, _, _ := store.counts(); created != 0 {
		t.Fatalf("%d multipart uploads created", created)
	}
}
