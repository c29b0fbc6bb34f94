package faulty_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/faulty"
	"github.com/eddyflow/eddy/blob/file"
)

// memStore is a minimal in-memory blob.Store for tests that make many calls.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func newMem() *memStore { return &memStore{m: map[string][]byte{}} }

func (s *memStore) Put(ctx context.Context, name string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[name] = slices.Clone(data)
	return nil
}

func (s *memStore) Get(ctx context.Context, name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.m[name]
	if !ok {
		return nil, blob.NotFound(name)
	}
	return slices.Clone(d), nil
}

func (s *memStore) List(ctx context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for n := range s.m {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

func (s *memStore) Delete(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, name)
	return nil
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	return sorted[int(p*float64(len(sorted)))]
}

// The sample percentiles of LongTail are within 20% of its parameters.
//
// The sample p99.9 rests on the ~n/1000 samples above it: their count
// varies by about 1/√(n/1000) (10% at n = 100k), and a Pareto tail of index
// α turns that into about (1/α)·10% on the percentile: 12% for ObjectStore
// (α ≈ 0.85), but 23% for "heavy" (α ≈ 0.43), which therefore uses 1M
// samples. The seeds are fixed, so the test is deterministic.
func TestLongTailPercentiles(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name           string
		d              faulty.Distribution
		p50, p99, p999 time.Duration
		n              int
	}{
		{"ObjectStore", faulty.ObjectStore(), 20 * ms, 200 * ms, 3 * time.Second, 100_000},
		{"mild", faulty.LongTail(5*ms, 15*ms, 40*ms), 5 * ms, 15 * ms, 40 * ms, 100_000},
		{"heavy", faulty.LongTail(time.Millisecond, 50*ms, 10*time.Second), ms, 50 * ms, 10 * time.Second, 1_000_000},
		{"flat tail", faulty.LongTail(10*ms, 100*ms, 100*ms), 10 * ms, 100 * ms, 100 * ms, 100_000},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			s := make([]time.Duration, c.n)
			for j := range s {
				s[j] = c.d.Sample(r)
				if s[j] < 0 || s[j] > 10*c.p999 {
					t.Fatalf("sample %v outside [0, 10·p999]", s[j])
				}
			}
			slices.Sort(s)
			for _, q := range []struct {
				p    float64
				want time.Duration
			}{{0.5, c.p50}, {0.99, c.p99}, {0.999, c.p999}} {
				got := percentile(s, q.p)
				ratio := float64(got) / float64(q.want)
				t.Logf("p%v = %v (want %v, ratio %.3f)", q.p*100, got, q.want, ratio)
				if ratio < 0.8 || ratio > 1.2 {
					t.Errorf("p%v = %v, want %v ±20%%", q.p*100, got, q.want)
				}
			}
		})
	}
}

func TestLongTailPanics(t *testing.T) {
	for _, args := range [][3]time.Duration{{0, 1, 2}, {2, 1, 3}, {1, 3, 2}, {-1, 1, 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("LongTail%v did not panic", args)
				}
			}()
			faulty.LongTail(args[0], args[1], args[2])
		}()
	}
}

func TestFixed(t *testing.T) {
	d := faulty.Fixed(3 * time.Millisecond)
	for range 10 {
		if got := d.Sample(rand.New(rand.NewPCG(1, 2))); got != 3*time.Millisecond {
			t.Fatalf("Fixed(3ms).Sample = %v", got)
		}
	}
}

func TestZeroOptionsPassThrough(t *testing.T) {
	ctx := context.Background()
	s := faulty.New(newMem(), faulty.Options{})
	for i := range 100 {
		name := fmt.Sprintf("o/%d", i)
		if err := s.Put(ctx, name, []byte(name)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, name); err != nil || string(got) != name {
			t.Fatalf("Get(%q) = %q, %v", name, got, err)
		}
	}
	if names, err := s.List(ctx, "o/"); err != nil || len(names) != 100 {
		t.Fatalf("List = %d names, %v", len(names), err)
	}
	if err := s.Delete(ctx, "o/1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "o/1"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	want := faulty.Stats{
		Put: faulty.OpStats{Calls: 100}, Get: faulty.OpStats{Calls: 101},
		List: faulty.OpStats{Calls: 1}, Delete: faulty.OpStats{Calls: 1},
	}
	if got := s.Stats(); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}

// errorPattern returns which of n Gets failed by injection.
func errorPattern(t *testing.T, s *faulty.Store, n int) []bool {
	t.Helper()
	out := make([]bool, n)
	for i := range out {
		_, err := s.Get(context.Background(), "x")
		switch {
		case err == nil:
		case errors.Is(err, faulty.ErrInjected):
			out[i] = true
		default:
			t.Fatalf("Get: unexpected error %v", err)
		}
	}
	return out
}

func TestErrorRateSeeded(t *testing.T) {
	const n, rate = 20_000, 0.1
	newStore := func(seed uint64) *faulty.Store {
		m := newMem()
		m.Put(context.Background(), "x", []byte("x"))
		return faulty.New(m, faulty.Options{ErrorRate: rate, Seed: seed})
	}
	s := newStore(1)
	a := errorPattern(t, s, n)
	failed := 0
	for _, f := range a {
		if f {
			failed++
		}
	}
	// Expected 2000, standard deviation ≈ 42.
	if lo, hi := int(0.9*rate*n), int(1.1*rate*n); failed < lo || failed > hi {
		t.Errorf("%d of %d calls failed, want %d..%d", failed, n, lo, hi)
	}
	if st := s.Stats().Get; st.Calls != n || st.Errors != int64(failed) || st.Stalls != 0 || st.Latency != 0 {
		t.Errorf("Stats().Get = %+v, want %d calls, %d errors", st, n, failed)
	}
	if b := errorPattern(t, newStore(1), n); !slices.Equal(a, b) {
		t.Error("same seed gave a different fault sequence")
	}
	if c := errorPattern(t, newStore(2), n); slices.Equal(a, c) {
		t.Error("different seeds gave the same fault sequence")
	}
}

func TestInjectedErrorText(t *testing.T) {
	ctx := context.Background()
	s := faulty.New(newMem(), faulty.Options{ErrorRate: 1})
	_, gerr := s.Get(ctx, "a/b")
	_, lerr := s.List(ctx, "pre/")
	derr := s.Delete(ctx, "c/d")
	perr := s.Put(ctx, "e/f", nil)
	for _, c := range []struct {
		err      error
		op, name string
	}{{gerr, "get", "a/b"}, {lerr, "list", "pre/"}, {derr, "delete", "c/d"}, {perr, "put", "e/f"}} {
		if !errors.Is(c.err, faulty.ErrInjected) {
			t.Errorf("%s: error %v does not match ErrInjected", c.op, c.err)
			continue
		}
		var ie *faulty.InjectedError
		if !errors.As(c.err, &ie) || ie.Op != c.op || ie.Name != c.name {
			t.Errorf("%s: error %#v, want Op %q Name %q", c.op, c.err, c.op, c.name)
		}
		if msg := c.err.Error(); !strings.Contains(msg, c.op) || !strings.Contains(msg, fmt.Sprintf("%q", c.name)) {
			t.Errorf("error text %q does not name op %q and %q", msg, c.op, c.name)
		}
	}
}

// Put's injected errors happen before the write in about half the cases and
// after it in the others; after-write errors leave the object readable.
func TestPutErrorAfterWrite(t *testing.T) {
	ctx := context.Background()
	s := faulty.New(newMem(), faulty.Options{ErrorRate: 1, PutOnly: true, Seed: 3})
	const n = 1000
	written := 0
	for i := range n {
		name := fmt.Sprintf("obj/%d", i)
		err := s.Put(ctx, name, []byte(name))
		var ie *faulty.InjectedError
		if !errors.As(err, &ie) {
			t.Fatalf("Put(%q) = %v, want an InjectedError", name, err)
		}
		got, gerr := s.Get(ctx, name)
		if ie.Written {
			written++
			if !strings.Contains(err.Error(), "after") {
				t.Errorf("after-write error text %q does not say so", err)
			}
			if gerr != nil || string(got) != name {
				t.Errorf("Put failed after write, then Get(%q) = %q, %v; want the object", name, got, gerr)
			}
		} else if !errors.Is(gerr, blob.ErrNotFound) {
			t.Errorf("Put failed before write, then Get(%q) = %q, %v; want ErrNotFound", name, got, gerr)
		}
	}
	if written < 0.4*n || written > 0.6*n {
		t.Errorf("%d of %d injected Put errors were after the write, want about half", written, n)
	}
	st := s.Stats()
	if st.Put.Calls != n || st.Put.Errors != n || st.Get.Calls != n || st.Get.Errors != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestPutOnly(t *testing.T) {
	ctx := context.Background()
	m := newMem()
	m.Put(ctx, "x", []byte("x"))
	s := faulty.New(m, faulty.Options{ErrorRate: 1, StallRate: 1, Latency: faulty.Fixed(time.Hour), PutOnly: true})
	for range 50 {
		if _, err := s.Get(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.List(ctx, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Get != (faulty.OpStats{Calls: 50}) || st.List != (faulty.OpStats{Calls: 50}) || st.Delete != (faulty.OpStats{Calls: 1}) {
		t.Errorf("Stats = %+v", st)
	}
}

func TestStallEndsOnCancel(t *testing.T) {
	m := newMem()
	s := faulty.New(m, faulty.Options{StallRate: 1, ErrorRate: 1})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Put(ctx, "stalled", []byte("x")) }()
	select {
	case err := <-done:
		t.Fatalf("stalled Put returned %v before its context was cancelled", err)
	case <-time.After(30 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Errorf("stalled Put = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stalled Put did not return after cancel")
	}
	if _, err := m.Get(context.Background(), "stalled"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("stalled Put wrote the object: %v", err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Get(ctx, "x"); err != context.DeadlineExceeded {
		t.Errorf("stalled Get = %v, want context.DeadlineExceeded", err)
	}
	st := s.Stats()
	if st.Put != (faulty.OpStats{Calls: 1, Stalls: 1}) || st.Get != (faulty.OpStats{Calls: 1, Stalls: 1}) {
		t.Errorf("Stats = %+v", st)
	}
}

func TestLatencyHonoursContext(t *testing.T) {
	m := newMem()
	s := faulty.New(m, faulty.Options{Latency: faulty.Fixed(time.Hour)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Put(ctx, "slow", []byte("x"))
	if err != context.DeadlineExceeded {
		t.Fatalf("Put = %v, want context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Put took %v after its deadline", el)
	}
	if _, err := m.Get(context.Background(), "slow"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("cancelled Put wrote the object: %v", err)
	}
	if lat := s.Stats().Put.Latency; lat < 15*time.Millisecond || lat > 5*time.Second {
		t.Errorf("Stats().Put.Latency = %v, want about 20ms", lat)
	}

	// A context that is already done fails at once.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := s.Get(ctx, "slow"); err != context.Canceled {
		t.Errorf("Get with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestLatencyScale(t *testing.T) {
	s := faulty.New(newMem(), faulty.Options{Latency: faulty.Fixed(time.Second), Scale: 0.005})
	ctx := context.Background()
	start := time.Now()
	for range 4 {
		if err := s.Put(ctx, "x", nil); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Errorf("4 Puts with 5ms latency took %v", el)
	}
	if lat := s.Stats().Put.Latency; lat != 20*time.Millisecond {
		t.Errorf("Stats().Put.Latency = %v, want 20ms", lat)
	}
}

// A workload against a real file store through the wrapper: whatever the
// faults, the store ends up holding what the outcomes say it must.
func TestWrapFileStore(t *testing.T) {
	inner, err := file.New(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	s := faulty.New(inner, faulty.Options{
		Latency:   faulty.ObjectStore(),
		Scale:     0.001, // p50 20µs, p99.9 3ms
		ErrorRate: 0.2,
		StallRate: 0.02,
		Seed:      11,
	})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 5))
	model := map[string][]byte{} // objects known to be there
	call := func(f func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return f(ctx)
	}
	var injected, stalled int
	for i := range 400 {
		name := fmt.Sprintf("ckpt/%02d/MANIFEST", r.IntN(20))
		switch r.IntN(4) {
		case 0, 1:
			data := []byte(fmt.Sprintf("payload %d", i))
			err := call(func(ctx context.Context) error { return s.Put(ctx, name, data) })
			var ie *faulty.InjectedError
			switch {
			case err == nil, errors.As(err, &ie) && ie.Written:
				model[name] = data
			case errors.Is(err, faulty.ErrInjected):
			case errors.Is(err, context.DeadlineExceeded):
				stalled++
			default:
				t.Fatalf("Put(%q): %v", name, err)
			}
			if ie != nil {
				injected++
			}
		case 2:
			var got []byte
			err := call(func(ctx context.Context) (err error) { got, err = s.Get(ctx, name); return err })
			switch {
			case errors.Is(err, faulty.ErrInjected):
				injected++
			case errors.Is(err, context.DeadlineExceeded):
				stalled++
			case err == nil:
				if want, ok := model[name]; !ok || !bytes.Equal(got, want) {
					t.Fatalf("Get(%q) = %q, want %q (present %v)", name, got, want, ok)
				}
			case errors.Is(err, blob.ErrNotFound):
				if _, ok := model[name]; ok {
					t.Fatalf("Get(%q): not found, want %q", name, model[name])
				}
			default:
				t.Fatalf("Get(%q): %v", name, err)
			}
		case 3:
			err := call(func(ctx context.Context) error { return s.Delete(ctx, name) })
			switch {
			case err == nil:
				delete(model, name)
			case errors.Is(err, faulty.ErrInjected):
				injected++
			case errors.Is(err, context.DeadlineExceeded):
				stalled++
			default:
				t.Fatalf("Delete(%q): %v", name, err)
			}
		}
	}
	// Check the final contents through the inner store (no faults).
	names, err := inner.List(ctx, "ckpt/")
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, 0, len(model))
	for n := range model {
		want = append(want, n)
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("inner List = %q, want %q", names, want)
	}
	st := s.Stats()
	t.Logf("stats %+v; saw %d injected errors, %d stalls", st, injected, stalled)
	if got := st.Put.Errors + st.Get.Errors + st.Delete.Errors; got == 0 || injected == 0 || stalled == 0 {
		t.Errorf("no faults seen: %+v", st)
	}
	if st.Put.Latency <= 0 {
		t.Errorf("no latency injected: %+v", st)
	}
}

// Concurrent callers: every call is counted once and every outcome is one
// of success, an injected error or the context's error.
func TestConcurrent(t *testing.T) {
	s := faulty.New(newMem(), faulty.Options{
		Latency:   faulty.LongTail(50*time.Microsecond, 500*time.Microsecond, 2*time.Millisecond),
		ErrorRate: 0.1,
		StallRate: 0.01,
		Seed:      9,
	})
	const workers, calls = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
				name := fmt.Sprintf("w%d/%d", w, i%10)
				var err error
				switch i % 4 {
				case 0:
					err = s.Put(ctx, name, []byte(name))
				case 1:
					_, err = s.Get(ctx, name)
				case 2:
					_, err = s.List(ctx, fmt.Sprintf("w%d/", w))
				case 3:
					err = s.Delete(ctx, name)
				}
				cancel()
				if err != nil && !errors.Is(err, faulty.ErrInjected) && !errors.Is(err, blob.ErrNotFound) &&
					!errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("unexpected error %v", err)
				}
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	for _, o := range []faulty.OpStats{st.Put, st.Get, st.List, st.Delete} {
		if o.Calls != workers*calls/4 || o.Latency <= 0 {
			t.Errorf("Stats = %+v", st)
		}
	}
}

// TestGetIntoInjectsLikeGet: GetInto draws the same faults as Get and, when
// it passes, reads into the caller's buffer through an inner store that can.
func TestGetIntoInjectsLikeGet(t *testing.T) {
	ctx := context.Background()
	inner, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := inner.Put(ctx, "x", []byte("payload")); err != nil {
		t.Fatal(err)
	}
	opts := faulty.Options{ErrorRate: 0.3, Seed: 7}
	viaGet := errorPattern(t, faulty.New(inner, opts), 500)
	s := faulty.New(inner, opts)
	buf := make([]byte, 64)
	passed := 0
	for i, wantFail := range viaGet {
		got, err := s.GetInto(ctx, "x", &buf)
		if wantFail {
			if !errors.Is(err, faulty.ErrInjected) {
				t.Fatalf("GetInto %d = %v, want the injected error Get drew", i, err)
			}
			continue
		}
		if err != nil || string(got) != "payload" || &got[0] != &buf[0] {
			t.Fatalf("GetInto %d = %q, %v; want the payload in the caller's buffer", i, got, err)
		}
		passed++
	}
	if passed == 0 || passed == len(viaGet) {
		t.Fatalf("%d of %d GetIntos passed: the pattern tests nothing", passed, len(viaGet))
	}
	if got := s.Stats().Get.Calls; got != int64(len(viaGet)) {
		t.Fatalf("Stats().Get.Calls = %d, want %d", got, len(viaGet))
	}
}

// TestOperationsDrawApart: the n-th Put meets the same fault whether or not
// calls of other operations came between the Puts, so a test that counts on
// its seed's Put faults gets them however its reads and deletes interleave.
func TestOperationsDrawApart(t *testing.T) {
	ctx := context.Background()
	opts := faulty.Options{ErrorRate: 0.2, Seed: 5}
	putPattern := func(s *faulty.Store, between int) []bool {
		var failed []bool
		for i := range 200 {
			err := s.Put(ctx, fmt.Sprintf("o/%d", i), []byte("x"))
			failed = append(failed, errors.Is(err, faulty.ErrInjected))
			for range between {
				s.Get(ctx, "o/0")
				s.Delete(ctx, "nothing")
			}
		}
		return failed
	}
	alone := putPattern(faulty.New(newMem(), opts), 0)
	mixed := putPattern(faulty.New(newMem(), opts), 3)
	fails := 0
	for i := range alone {
		if alone[i] != mixed[i] {
			t.Fatalf("Put %d failed=%v alone but %v with other calls between", i, alone[i], mixed[i])
		}
		if alone[i] {
			fails++
		}
	}
	if fails == 0 || fails == len(alone) {
		t.Fatalf("%d of %d Puts failed: the pattern tests nothing", fails, len(alone))
	}
}
