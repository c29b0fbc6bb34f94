package s3_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/eddyflow/eddy/blob"
	blobs3 "github.com/eddyflow/eddy/blob/s3"
	"github.com/eddyflow/eddy/blob/s3/s3test"
)

// firstPut returns a fault proxy filter that lets the proxy fault only
// the first PUT it sees. The proxy calls its filter one request at a
// time.
func firstPut() func(*http.Request) bool {
	seen := false
	return func(r *http.Request) bool {
		if r.Method != http.MethodPut || seen {
			return false
		}
		seen = true
		return true
	}
}

// A conditional create whose PUT landed but whose response was lost
// (replaced by a 500 or 503) counts as created by this call: the SDK's
// retry gets 412, and the store finds its own bytes there. A writer with
// other bytes still loses.
func TestPutIfAbsentLostResponse(t *testing.T) {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "lost")
	ctx := context.Background()
	data := []byte("claim by writer A")

	p := s3test.NewFaultProxy(t, srv.Endpoint, s3test.FaultConfig{ErrorAfterRate: 1, Filter: firstPut()})
	s := srv.Via(p).Open(t, "lost", "retried", blobs3.MaxAttempts(2), blobs3.ReadOnly()) // no probe PUT
	if err := s.PutIfAbsent(ctx, "lock", data); err != nil {
		t.Fatalf("PutIfAbsent whose first response was lost: %v", err)
	}
	if st := p.Stats(); st.ErrorsAfter != 1 {
		t.Errorf("proxy stats %+v, want 1 error after the work", st)
	}
	if err := s.PutIfAbsent(ctx, "lock", []byte("claim by writer B")); !errors.Is(err, blob.ErrExists) {
		t.Errorf("second writer's PutIfAbsent = %v, want ErrExists", err)
	}

	// Without the SDK's retry the caller sees the error, though the
	// object is there; its own retry then succeeds.
	p = s3test.NewFaultProxy(t, srv.Endpoint, s3test.FaultConfig{ErrorAfterRate: 1, Filter: firstPut()})
	s = srv.Via(p).Open(t, "lost", "once", blobs3.MaxAttempts(1), blobs3.ReadOnly())
	err := s.PutIfAbsent(ctx, "lock", data)
	if err == nil || errors.Is(err, blob.ErrExists) {
		t.Fatalf("PutIfAbsent with one attempt and a lost response = %v, want the injected error", err)
	}
	if got, err := srv.Open(t, "lost", "once").Get(ctx, "lock"); err != nil || string(got) != string(data) {
		t.Fatalf("the object after the lost response: %q, %v; want it written", got, err)
	}
	if err := s.PutIfAbsent(ctx, "lock", data); err != nil {
		t.Errorf("the caller's retry of the same claim: %v, want success", err)
	}
}

// A conditional create whose response was lost and whose read-back then
// fails cannot tell whose the object is: it must not report ErrExists
// (the caller would think another writer won), and the caller's retry,
// once reads work, finds its own bytes.
func TestPutIfAbsentLostResponseUnreadable(t *testing.T) {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "lost")
	ctx := context.Background()
	data := []byte("claim by writer A")
	put := firstPut()
	var failGets atomic.Bool
	p := s3test.NewFaultProxy(t, srv.Endpoint, s3test.FaultConfig{ErrorAfterRate: 1, Filter: func(r *http.Request) bool {
		return put(r) || r.Method == http.MethodGet && failGets.Load()
	}})
	s := srv.Via(p).Open(t, "lost", "unreadable", blobs3.MaxAttempts(2), blobs3.ReadOnly())
	failGets.Store(true)
	err := s.PutIfAbsent(ctx, "lock", data)
	if err == nil || errors.Is(err, blob.ErrExists) {
		t.Fatalf("PutIfAbsent with a lost response and failing reads = %v, want an error that is not ErrExists", err)
	}
	failGets.Store(false)
	if err := s.PutIfAbsent(ctx, "lock", data); err != nil {
		t.Fatalf("the caller's retry once reads work: %v, want success", err)
	}
}

// The probe of New rides out a server that fails a few requests (503
// SlowDown, 500): the first three requests of the open fail, with one SDK
// attempt each, and the open still succeeds.
func TestOpenProbeRetries(t *testing.T) {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "flaky")
	failed := 0
	p := s3test.NewFaultProxy(t, srv.Endpoint, s3test.FaultConfig{ErrorRate: 1, Filter: func(*http.Request) bool {
		failed++
		return failed <= 3
	}})
	s := srv.Via(p).Open(t, "flaky", "probe", blobs3.MaxAttempts(1))
	if err := s.Put(context.Background(), "x", []byte("after the open")); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Errors != 3 {
		t.Fatalf("proxy stats %+v, want the 3 injected errors", st)
	}
}
