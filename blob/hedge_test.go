package blob_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/file"
)

// slowStore stalls the Puts its plan says to stall (until cancelled) and
// fails those it says to fail; the others go to a real file store.
type slowStore struct {
	blob.Store
	mu       sync.Mutex
	calls    int
	plan     []string // per call: "stall", "fail" or "ok"
	canceled int
}

func (s *slowStore) Put(ctx context.Context, name string, data []byte) error {
	s.mu.Lock()
	what := "ok"
	if s.calls < len(s.plan) {
		what = s.plan[s.calls]
	}
	s.calls++
	s.mu.Unlock()
	switch what {
	case "stall":
		<-ctx.Done()
		s.mu.Lock()
		s.canceled++
		s.mu.Unlock()
		return ctx.Err()
	case "fail":
		return errors.New("injected")
	}
	return s.Store.Put(ctx, name, data)
}

func TestPutHedged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		plan    []string
		wantErr bool
		calls   int
	}{
		{"first succeeds", []string{"ok"}, false, 1},
		{"stalled first, hedge wins", []string{"stall", "ok"}, false, 2},
		{"failure retried at once", []string{"fail", "ok"}, false, 2},
		{"two stalls, third wins", []string{"stall", "stall", "ok"}, false, 3},
		{"all fail", []string{"fail", "fail", "fail"}, true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, err := file.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			s := &slowStore{Store: inner, plan: tc.plan}
			start := time.Now()
			err = blob.PutHedged(context.Background(), s, "m", []byte("manifest"), 20*time.Millisecond, 3)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if s.calls != tc.calls {
				t.Errorf("%d attempts, want %d", s.calls, tc.calls)
			}
			// Every stalled attempt has given up by the time PutHedged
			// returns: none of its writes can land later.
			stalls := 0
			for _, p := range tc.plan[:min(tc.calls, len(tc.plan))] {
				if p == "stall" {
					stalls++
				}
			}
			s.mu.Lock()
			canceled := s.canceled
			s.mu.Unlock()
			if canceled != stalls {
				t.Errorf("%d of %d stalled attempts had returned when PutHedged did", canceled, stalls)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
			if !tc.wantErr {
				got, err := inner.Get(context.Background(), "m")
				if err != nil || string(got) != "manifest" {
					t.Errorf("stored %q, %v", got, err)
				}
			}
		})
	}
	// A cancelled context ends the wait.
	inner, _ := file.New(t.TempDir())
	s := &slowStore{Store: inner, plan: []string{"stall", "stall", "stall"}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := blob.PutHedged(ctx, s, "m", []byte("x"), 10*time.Millisecond, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's", err)
	}
}
