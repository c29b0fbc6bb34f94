package blob_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/file"
)

// slowStore answers its Puts, and its Gets, by plan: "stall" until
// cancelled, "fail", for Gets also "missing" and "corrupt", or "ok" from a
// real file store.
type slowStore struct {
	blob.Store
	mu       sync.Mutex
	calls    int
	plan     []string // per call
	canceled int
}

// next returns what the plan says for this call, and for a stall waits
// until ctx ends.
func (s *slowStore) next(ctx context.Context) (string, error) {
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
		return what, ctx.Err()
	case "fail":
		return what, errors.New("injected")
	}
	return what, nil
}

func (s *slowStore) Put(ctx context.Context, name string, data []byte) error {
	if _, err := s.next(ctx); err != nil {
		return err
	}
	return s.Store.Put(ctx, name, data)
}

func (s *slowStore) Get(ctx context.Context, name string) ([]byte, error) {
	what, err := s.next(ctx)
	switch {
	case err != nil:
		return nil, err
	case what == "missing":
		return nil, blob.NotFound(name)
	case what == "corrupt":
		return nil, &blob.CorruptError{Name: name, Reason: "injected"}
	}
	return s.Store.Get(ctx, name)
}

func (s *slowStore) List(ctx context.Context, prefix string) ([]string, error) {
	if _, err := s.next(ctx); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, prefix)
}

func (s *slowStore) Delete(ctx context.Context, name string) error {
	if _, err := s.next(ctx); err != nil {
		return err
	}
	return s.Store.Delete(ctx, name)
}

// hedgeCases are plans for a slowStore's calls and what a hedged operation
// with 3 attempts makes of them.
// hedgeDelay is the hedge delay of these tests: long enough that a failed
// attempt's immediate retry finishes before a hedge could start, even on a
// loaded machine whose file writes (with fsync) take tens of milliseconds
// (at 20 ms, "failure retried at once" saw a third attempt under load;
// at 250 ms, once at load 10-18).
const hedgeDelay = time.Second

var hedgeCases = []struct {
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
}

// TestHedgerDelete: a stalled or failed delete gets another attempt, and
// the object is gone when one succeeds; when all fail, the error says so.
func TestHedgerDelete(t *testing.T) {
	for _, tc := range hedgeCases {
		t.Run(tc.name, func(t *testing.T) {
			inner := storeWithObject(t, "o", "payload")
			s := &slowStore{Store: inner, plan: tc.plan}
			err := (&blob.Hedger{Max: hedgeDelay}).Delete(context.Background(), s, "o", 3)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr && !strings.Contains(err.Error(), `delete "o": 3 attempts failed`) {
				t.Errorf("err = %v, want it to name the delete and its attempts", err)
			}
			if s.calls != tc.calls {
				t.Errorf("%d attempts, want %d", s.calls, tc.calls)
			}
			_, gerr := inner.Get(context.Background(), "o")
			if gone := errors.Is(gerr, blob.ErrNotFound); gone == tc.wantErr {
				t.Errorf("after Delete (err %v) the object is gone=%v", err, gone)
			}
		})
	}
}

// TestHedgerList: a stalled or failed listing gets another attempt; when
// all fail, the error says so.
func TestHedgerList(t *testing.T) {
	for _, tc := range hedgeCases {
		t.Run(tc.name, func(t *testing.T) {
			s := &slowStore{Store: storeWithObject(t, "dir/o", "payload"), plan: tc.plan}
			names, err := (&blob.Hedger{Max: hedgeDelay}).List(context.Background(), s, "dir/", 3)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr && !strings.Contains(err.Error(), `list "dir/": 3 attempts failed`) {
				t.Errorf("err = %v, want it to name the listing and its attempts", err)
			}
			if !tc.wantErr && (len(names) != 1 || names[0] != "dir/o") {
				t.Errorf("List = %q, want [dir/o]", names)
			}
			if s.calls != tc.calls {
				t.Errorf("%d attempts, want %d", s.calls, tc.calls)
			}
		})
	}
}

func TestPutHedged(t *testing.T) {
	for _, tc := range hedgeCases {
		t.Run(tc.name, func(t *testing.T) {
			inner, err := file.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			s := &slowStore{Store: inner, plan: tc.plan}
			err = blob.PutHedged(context.Background(), s, "m", []byte("manifest"), hedgeDelay, 3)
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

// TestHedgerDelay: a Hedger hedges after Max until 16 attempts are known,
// then after Factor times their p90, between MinHedgeDelay and Max, also
// for a factor too large to convert; with no factor, after Max.
func TestHedgerDelay(t *testing.T) {
	h := blob.NewHedger(3, time.Second)
	for i := range 15 {
		h.Record(time.Duration(i+1) * time.Millisecond)
	}
	if got := h.Delay(); got != time.Second {
		t.Errorf("15 attempts known: hedge after %v, want Max", got)
	}
	for range 64 { // pushes the first 15 out of the window
		h.Record(100 * time.Millisecond)
	}
	h.Record(900 * time.Millisecond) // one slow attempt is above the p90
	if got := h.Delay(); got != 300*time.Millisecond {
		t.Errorf("hedge after %v, want 3 x 100ms", got)
	}
	for _, tc := range []struct {
		factor float64
		max    time.Duration
		want   time.Duration
	}{
		{0.001, time.Second, blob.MinHedgeDelay},
		{math.Inf(1), time.Second, time.Second},
		{1e300, time.Second, time.Second},
		{0, 2 * time.Second, 2 * time.Second},
		{-1, 0, blob.DefaultHedgeMax},
		{3, 10 * time.Millisecond, 10 * time.Millisecond}, // Max wins over MinHedgeDelay
	} {
		h := blob.NewHedger(tc.factor, tc.max)
		for range 20 {
			h.Record(100 * time.Millisecond)
		}
		if got := h.Delay(); got != tc.want {
			t.Errorf("factor %g, max %v: hedge after %v, want %v", tc.factor, tc.max, got, tc.want)
		}
	}
}

// TestHedgerPutLearns: once a Hedger has learned from fast writes, a
// stalled write is hedged after a few times their p90, not after Max.
func TestHedgerPutLearns(t *testing.T) {
	inner, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	plan := make([]string, 20)
	for i := range plan {
		plan[i] = "ok"
	}
	s := &slowStore{Store: inner, plan: append(plan, "stall")}
	h := blob.NewHedger(3, time.Hour)
	ctx := context.Background()
	for i := range 20 {
		if err := h.Put(ctx, s, "m", []byte{byte(i)}, 3); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- h.Put(ctx, s, "m", []byte("last"), 3) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("a stalled write was not hedged after %v (delay %v)", time.Since(start), h.Delay())
	}
	if s.canceled != 1 {
		t.Errorf("%d stalled attempts cancelled, want 1", s.canceled)
	}
	if got, err := inner.Get(ctx, "m"); err != nil || string(got) != "last" {
		t.Errorf("stored %q, %v", got, err)
	}
}

// storeWithObject returns a file store holding one object.
func storeWithObject(t *testing.T, name, payload string) *file.Store {
	t.Helper()
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), name, []byte(payload)); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHedgerGetInto: a read stuck in the store is hedged and the hedge's
// payload returned; a failed read is retried up to the attempts; a
// missing or damaged object is answered at once, without another read.
func TestHedgerGetInto(t *testing.T) {
	inner := storeWithObject(t, "o", "payload")
	ctx := context.Background()
	for _, tc := range []struct {
		plan      []string
		wantErr   func(error) bool
		wantCalls int
	}{
		{[]string{"stall"}, nil, 2},
		{[]string{"fail", "fail"}, nil, 3},
		{[]string{"fail", "fail", "fail"}, func(err error) bool { return err != nil }, 3},
		{[]string{"missing"}, func(err error) bool { return errors.Is(err, blob.ErrNotFound) }, 1},
		{[]string{"corrupt"}, func(err error) bool { var c *blob.CorruptError; return errors.As(err, &c) }, 1},
	} {
		s := &slowStore{Store: inner, plan: tc.plan}
		h := blob.NewHedger(3, time.Hour)
		for range 20 {
			h.Record(time.Millisecond) // learned: hedge after MinHedgeDelay
		}
		var buf []byte
		got, err := h.GetInto(ctx, s, "o", &buf, 3)
		if tc.wantErr != nil {
			if !tc.wantErr(err) {
				t.Errorf("plan %v: err = %v", tc.plan, err)
			}
		} else if err != nil || string(got) != "payload" {
			t.Errorf("plan %v: got %q, %v", tc.plan, got, err)
		}
		if s.calls != tc.wantCalls {
			t.Errorf("plan %v: %d reads, want %d", tc.plan, s.calls, tc.wantCalls)
		}
	}
}

// TestHedgerLearnsDuringAttempt: an attempt started before the Hedger
// knew the store is hedged once it has learned, not after Max: a restore
// in a new process learns the store from its first reads.
func TestHedgerLearnsDuringAttempt(t *testing.T) {
	inner := storeWithObject(t, "o", "payload")
	ctx := context.Background()
	s := &slowStore{Store: inner, plan: []string{"stall"}}
	h := blob.NewHedger(3, time.Hour)
	done := make(chan error, 1)
	go func() {
		var buf []byte
		_, err := h.GetInto(ctx, s, "o", &buf, 3)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // the stalled read has started
	for range 20 {
		h.Record(time.Millisecond) // other reads finish meanwhile
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a read started before the Hedger had learned was not hedged once it had")
	}
}

// TestNilHedger: a nil *Hedger hedges after DefaultHedgeMax and learns
// nothing, so a caller without one still writes and reads.
func TestNilHedger(t *testing.T) {
	var h *blob.Hedger
	h.Record(time.Millisecond)
	if got := h.Delay(); got != blob.DefaultHedgeMax {
		t.Errorf("nil Hedger: hedge after %v, want %v", got, blob.DefaultHedgeMax)
	}
	s := storeWithObject(t, "o", "payload")
	if err := h.Put(context.Background(), s, "p", []byte("x"), 3); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	if got, err := h.GetInto(context.Background(), s, "o", &buf, 3); err != nil || string(got) != "payload" {
		t.Errorf("GetInto: %q, %v", got, err)
	}
}
