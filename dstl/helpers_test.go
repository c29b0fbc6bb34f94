package dstl

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	gets    sync.Map // object name -> *atomic.Int64, Gets of it
}

// getsOf returns how many times name was read.
func (s *memStore) getsOf(name string) int64 {
	if n, ok := s.gets.Load(name); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
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
	n, _ := s.gets.LoadOrStore(name, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
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
	get func(ctx context.Context, name string) ([]byte, error)    // nil: pass through
}

func (s *hookStore) Get(ctx context.Context, name string) ([]byte, error) {
	if s.get != nil {
		return s.get(ctx, name)
	}
	return s.Store.Get(ctx, name)
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

// mval is a model entry: a whole value and elements set by element
// operations.
type mval struct {
	whole string
	elems map[string]string
}

func (v *mval) String() string {
	keys := make([]string, 0, len(v.elems))
	for k := range v.elems {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%q{", v.whole)
	for _, k := range keys {
		fmt.Fprintf(&b, "%q:%q,", k, v.elems[k])
	}
	b.WriteString("}")
	return b.String()
}

// model is a state map: the result of applying changes.
type model map[skey]*mval

func (m model) apply(c *Change) {
	k := skey{c.KeyGroup, c.State, string(c.Key)}
	if c.Op == OpDelete {
		delete(m, k)
		return
	}
	v := m[k]
	if v == nil || c.Op == OpPut {
		v = &mval{elems: map[string]string{}}
		m[k] = v
	}
	switch c.Op {
	case OpPut:
		v.whole = string(c.Value)
	case OpPutElem:
		v.elems[string(c.Sub)] = string(c.Value)
	case OpDeleteElem:
		delete(v.elems, string(c.Sub))
	}
}

// syncModel is a model that Read's apply may fill concurrently.
type syncModel struct {
	mu sync.Mutex
	m  model
}

func newSyncModel() *syncModel { return &syncModel{m: model{}} }

func (s *syncModel) apply(c *Change) error {
	s.mu.Lock()
	s.m.apply(c)
	s.mu.Unlock()
	return nil
}

// change is a change as a test recorded it.
type change struct {
	kg, state       uint32
	op              Op
	key, sub, value string
}

func (c change) append(w *Writer) error {
	return w.AppendOp(c.kg, c.state, c.op, []byte(c.key), []byte(c.sub), []byte(c.value))
}

// replay applies changes[from:to] (sequence numbers from+1..to) to m.
func replay(m model, changes []change, from, to uint64) model {
	for _, c := range changes[from:to] {
		m.apply(&Change{KeyGroup: c.kg, State: c.state, Op: c.op, Key: []byte(c.key), Sub: []byte(c.sub), Value: []byte(c.value)})
	}
	return m
}

// diff describes the differences between two models, or returns "".
func diff(got, want model) string {
	var b strings.Builder
	n := 0
	for k, w := range want {
		if g, ok := got[k]; !ok || g.String() != w.String() {
			if n++; n <= 5 {
				fmt.Fprintf(&b, "  %v: got %v (present %v), want %v\n", k, g, ok, w)
			}
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			if n++; n <= 5 {
				fmt.Fprintf(&b, "  %v: got %v, want absent\n", k, g)
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

// mustAppend appends c to w.
func mustAppend(t testing.TB, w *Writer, c change) {
	t.Helper()
	if err := c.append(w); err != nil {
		t.Fatal(err)
	}
}

// mustPersist persists w (which also ends the shared batch) and returns
// its handle.
func mustPersist(t testing.TB, w *Writer) Handle {
	t.Helper()
	h, err := w.Persist(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// randomOp draws c's operation from r < rng.IntN(n): a delete below del,
// a put of one of subs elements below putElem, a delete of one below
// delElem, a put of the whole value otherwise; operations without a value
// drop c's.
func (c *change) randomOp(rng *rand.Rand, n, del, putElem, delElem, subs int) {
	switch r := rng.IntN(n); {
	case r < del:
		c.op = OpDelete
	case r < putElem:
		c.op, c.sub = OpPutElem, fmt.Sprint(rng.IntN(subs))
	case r < delElem:
		c.op, c.sub = OpDeleteElem, fmt.Sprint(rng.IntN(subs))
	}
	if !c.op.hasValue() {
		c.value = ""
	}
}

// mustPersistUpto persists w's changes (after, upto] and returns the
// handle.
func mustPersistUpto(t testing.TB, w *Writer, after, upto uint64) Handle {
	t.Helper()
	h, err := w.PersistUpto(context.Background(), after, upto)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
