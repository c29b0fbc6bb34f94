package checkpoint

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/eddyflow/eddy/blob"
)

// memStore is an in-memory blob.Store whose writes take no time.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStore) Put(_ context.Context, name string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[name] = append([]byte(nil), data...)
	return nil
}

func (s *memStore) Get(_ context.Context, name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.m[name]
	if !ok {
		return nil, blob.ErrNotFound
	}
	return d, nil
}

func (s *memStore) List(_ context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for n := range s.m {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

func (s *memStore) Delete(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, name)
	return nil
}

// TestManifestHedgeLearns: manifest writes teach the storage's hedger the
// store's latency, so a manifest write stuck in a slow store's tail is
// hedged after a few times the recent writes' p90, not after the fixed
// ManifestHedgeAfter.
func TestManifestHedgeLearns(t *testing.T) {
	s := NewStorage(&memStore{m: map[string][]byte{}}, 3)
	if got := s.hedger.Delay(); got != ManifestHedgeAfter {
		t.Fatalf("before any write: hedge after %v, want %v", got, ManifestHedgeAfter)
	}
	for id := uint64(1); id <= 20; id++ {
		m := &Manifest{ID: id, Job: "job", CreatedAt: int64(id)}
		if err := s.Write(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.hedger.Delay(); got != blob.MinHedgeDelay {
		t.Errorf("after 20 instant writes: hedge after %v, want %v", got, blob.MinHedgeDelay)
	}
}
