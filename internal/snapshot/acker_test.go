package snapshot

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/internal/errs"
	"github.com/eddyflow/eddy/internal/manifest"
)

// gatedStore is a file store whose Put of one name waits for a gate.
type gatedStore struct {
	blob.Store
	name string
	gate chan struct{}
	err  error // returned by the gated Put once opened
}

func (s *gatedStore) Put(ctx context.Context, name string, data []byte) error {
	if name == s.name {
		<-s.gate
		if s.err != nil {
			return s.err
		}
	}
	return s.Store.Put(ctx, name, data)
}

func newStore(t *testing.T, gated string) *gatedStore {
	t.Helper()
	fs, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &gatedStore{Store: fs, name: gated, gate: make(chan struct{})}
}

// collect returns a send function that records acks in the order they
// arrive.
func collect() (func(context.Context, manifest.Ack) error, func() []manifest.Ack) {
	var mu sync.Mutex
	var got []manifest.Ack
	return func(_ context.Context, a manifest.Ack) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, a)
			return nil
		}, func() []manifest.Ack {
			mu.Lock()
			defer mu.Unlock()
			return append([]manifest.Ack(nil), got...)
		}
}

func TestAckWithoutWorkIsSentAtOnce(t *testing.T) {
	send, got := collect()
	var wg sync.WaitGroup
	k := NewAcker(send, &wg)
	if err := k.Ack(context.Background(), &manifest.Ack{ID: 1}, newStore(t, ""), nil, nil); err != nil {
		t.Fatal(err)
	}
	if acks := got(); len(acks) != 1 || acks[0].ID != 1 {
		t.Fatalf("acks right after Ack = %+v, want checkpoint 1's", acks)
	}
}

func TestAcksLeaveInBarrierOrder(t *testing.T) {
	store := newStore(t, "part-1")
	send, got := collect()
	var wg sync.WaitGroup
	k := NewAcker(send, &wg)
	ctx := context.Background()
	released := 0
	data := []byte("state of checkpoint 1")
	part := Part{UID: "op", Subtask: 3, KeyGroupStart: 8, KeyGroupEnd: 16, Name: "part-1", Data: data, Release: func() { released++ }}
	if err := k.Ack(ctx, &manifest.Ack{ID: 1}, store, []Part{part}, nil); err != nil {
		t.Fatal(err)
	}
	// Checkpoint 2 has nothing to upload, but its ack must wait for 1's.
	if err := k.Ack(ctx, &manifest.Ack{ID: 2}, store, nil, nil); err != nil {
		t.Fatal(err)
	}
	if acks := got(); len(acks) != 0 {
		t.Fatalf("acks sent while checkpoint 1's part uploads: %+v", acks)
	}
	close(store.gate)
	wg.Wait()
	acks := got()
	if len(acks) != 2 || acks[0].ID != 1 || acks[1].ID != 2 {
		t.Fatalf("acks = %+v, want checkpoints 1 then 2", acks)
	}
	if released != 1 {
		t.Fatalf("part released %d times, want 1", released)
	}
	a := acks[0]
	if a.Err != nil || len(a.Parts) != 1 || a.Bytes != int64(len(data)) {
		t.Fatalf("ack 1 = %+v", a)
	}
	p := a.Parts[0]
	if p.UID != "op" || p.Part.Subtask != 3 || p.Part.KeyGroupStart != 8 || p.Part.KeyGroupEnd != 16 || p.Part.Blob != "part-1" ||
		p.Part.Size != int64(len(data)) || p.Part.CRC != blob.Checksum(data) {
		t.Fatalf("part recorded as %+v", p)
	}
	stored, err := store.Get(ctx, "part-1")
	if err != nil || !bytes.Equal(stored, data) {
		t.Fatalf("stored part = %q, %v", stored, err)
	}
}

func TestFailedUploadFailsTheCheckpoint(t *testing.T) {
	store := newStore(t, "part-1")
	store.err = errors.New("disk full")
	close(store.gate)
	send, got := collect()
	var wg sync.WaitGroup
	k := NewAcker(send, &wg)
	if err := k.Ack(context.Background(), &manifest.Ack{ID: 7}, store, []Part{{UID: "op", Name: "part-1", Data: []byte("x")}}, nil); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	acks := got()
	if len(acks) != 1 || acks[0].Err == nil || acks[0].Fatal || len(acks[0].Parts) != 0 {
		t.Fatalf("acks = %+v, want one failed, not fatal, without parts", acks)
	}
	if !errors.Is(acks[0].Err, errs.Storage) || !errors.Is(acks[0].Err, store.err) {
		t.Fatalf("ack error %v is not a storage failure wrapping the cause", acks[0].Err)
	}
}

func TestFailedWaitFailsTheJob(t *testing.T) {
	send, got := collect()
	var wg sync.WaitGroup
	k := NewAcker(send, &wg)
	lost := errors.New("log not durable")
	wait := func(context.Context) error { return lost }
	if err := k.Ack(context.Background(), &manifest.Ack{ID: 2}, newStore(t, ""), []Part{{UID: "op", Name: "p", Data: []byte("x")}}, []Wait{wait}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	acks := got()
	if len(acks) != 1 || !errors.Is(acks[0].Err, lost) || !acks[0].Fatal || len(acks[0].Parts) != 0 {
		t.Fatalf("acks = %+v, want one fatal with the wait's error and no parts written", acks)
	}
}

func TestWithoutStoreNothingIsWritten(t *testing.T) {
	send, got := collect()
	var wg sync.WaitGroup
	k := NewAcker(send, &wg)
	released := false
	waited := false
	wait := func(context.Context) error { waited = true; return nil }
	if err := k.Ack(context.Background(), &manifest.Ack{ID: 1}, nil, []Part{{Name: "p", Data: []byte("x"), Release: func() { released = true }}}, []Wait{wait}); err != nil {
		t.Fatal(err)
	}
	if acks := got(); len(acks) != 1 || len(acks[0].Parts) != 0 || !released || waited {
		t.Fatalf("acks = %+v, released %v, waited %v: want the ack at once, the part released, nothing waited for", acks, released, waited)
	}
}

// TestWaitFillsTheAck: what a wait adds to the ack (the changelog's log
// ranges, once durable) is in the ack sent.
func TestWaitFillsTheAck(t *testing.T) {
	send, got := collect()
	var wg sync.WaitGroup
	k := NewAcker(send, &wg)
	a := &manifest.Ack{ID: 4}
	wait := func(context.Context) error {
		a.Logs = append(a.Logs, manifest.OpLog{UID: "op"})
		a.Uploaded += 10
		return nil
	}
	if err := k.Ack(context.Background(), a, newStore(t, ""), nil, []Wait{wait}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	acks := got()
	if len(acks) != 1 || len(acks[0].Logs) != 1 || acks[0].Logs[0].UID != "op" || acks[0].Uploaded != 10 {
		t.Fatalf("acks = %+v, want the wait's log range in it", acks)
	}
}
