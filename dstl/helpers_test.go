package dstl

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/file"
)

// memStore is an in-memory blob.Store.
type memStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	discard bool // keep nothing (benchmarks)
	puts    atomic.Int64
	bytes   atomic.Int64
}

func newMemStore() *memStore { return &memStore{objects: map[string][]byte{}} }

func (s *memStore) Put(ctx context.Context, name string, data []byte) error {
	if err := blob.ValidateName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.puts.Add(1)
	s.bytes.Add(int64(len(data)))
	if s.discard {
		return nil
	}
	s.mu.Lock()
	s.objects[name] = append([]byte(nil), data...)
	s.mu.Unlock()
	return nil
}

func (s *memStore) Get(ctx context.Context, name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.objects[name]
	if !ok {
		return nil, blob.NotFound(name)
	}
	return append([]byte(nil), d...), nil
}

func (s *memStore) List(ctx context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for n := range s.objects {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

func (s *memStore) Delete(ctx context.Context, name string) error {
	s.mu.Lock()
	delete(s.objects, name)
	s.mu.Unlock()
	return nil
}

// hookStore wraps a store and lets a test intercept Put.
type hookStore struct {
	blob.Store
	put func(ctx context.Context, name string, data []byte) error // nil: pass through
}

func (s *hookStore) Put(ctx context.Context, name string, data []byte) error {
	if s.put != nil {
		return s.put(ctx, name, data)
	}
	return s.Store.Put(ctx, name, data)
}

// fileStore returns a file store in a temporary directory.
func fileStore(t testing.TB) *file.Store {
	t.Helper()
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// openLog opens a log and closes it at the end of the test.
func openLog(t testing.TB, store blob.Store, opts Options) *Log {
	t.Helper()
	l, err := Open(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// skey identifies a state entry in a model.
type skey struct {
	kg, state uint32
	key       string
}

// model is a state map: the result of applying changes.
type model map[skey]string

func (m model) apply(kg, state uint32, key, value []byte, del bool) {
	k := skey{kg, state, string(key)}
	if del {
		delete(m, k)
	} else {
		m[k] = string(value)
	}
}

// syncModel is a model that Read's apply may fill concurrently.
type syncModel struct {
	mu sync.Mutex
	m  model
}

func newSyncModel() *syncModel { return &syncModel{m: model{}} }

func (s *syncModel) apply(kg, state uint32, key, value []byte, del bool) error {
	s.mu.Lock()
	s.m.apply(kg, state, key, value, del)
	s.mu.Unlock()
	return nil
}

// change is a change as a test recorded it.
type change struct {
	kg, state  uint32
	key, value string
	del        bool
}

// replay applies changes[from:to] (sequence numbers from+1..to) to m.
func replay(m model, changes []change, from, to uint64) model {
	for _, c := range changes[from:to] {
		m.apply(c.kg, c.state, []byte(c.key), []byte(c.value), c.del)
	}
	return m
}

// diff describes the differences between two models, or returns "".
func diff(got, want model) string {
	var b strings.Builder
	n := 0
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			if n++; n <= 5 {
				fmt.Fprintf(&b, "  %v: got %q (present %v), want %q\n", k, g, ok, w)
			}
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			if n++; n <= 5 {
				fmt.Fprintf(&b, "  %v: got %q, want absent\n", k, g)
			}
		}
	}
	if n > 0 {
		fmt.Fprintf(&b, "  (%d differences; got %d entries, want %d)", n, len(got), len(want))
	}
	return b.String()
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}
