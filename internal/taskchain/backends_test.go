package taskchain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/file"
	blobs3 "github.com/eddyflow/eddy/blob/s3"
	"github.com/eddyflow/eddy/blob/s3/s3test"
)

// backend is a kind of store the chain's tests run on.
type backend struct {
	name  string
	setup func(t *testing.T) env
}

// env makes stores of one backend for a test.
type env interface {
	// fresh returns a new, empty store.
	fresh(t *testing.T) blob.Store
	// damage replaces the stored bytes of object name (payload and
	// trailer) of a store fresh returned with f(stored), behind its back.
	damage(t *testing.T, s blob.Store, name string, f func([]byte) []byte)
	// locate returns the blob.Open URL of a store fresh returned and the
	// environment a child process needs to reach it.
	locate(s blob.Store) (url string, environ []string)
}

// backends are the local file store and versitygw, a real S3 server
// (skipped without it, failing when CI=true).
var backends = []backend{
	{"file", func(t *testing.T) env { return fileEnv{} }},
	{"versitygw", func(t *testing.T) env {
		srv := s3test.Versitygw(t)
		srv.CreateBucket(t, "chains")
		return &s3Env{srv: srv}
	}},
}

// forEachBackend runs f as a subtest per backend.
func forEachBackend(t *testing.T, f func(t *testing.T, e env)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b.setup(t)) })
	}
}

type fileEnv struct{}

func (fileEnv) fresh(t *testing.T) blob.Store {
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (fileEnv) damage(t *testing.T, s blob.Store, name string, f func([]byte) []byte) {
	t.Helper()
	p := s.(*file.Store).Path(name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (fileEnv) locate(s blob.Store) (string, []string) { return s.(*file.Store).Dir(), nil }

type s3Env struct {
	srv *s3test.Server
	n   atomic.Int64
}

func (e *s3Env) fresh(t *testing.T) blob.Store {
	return e.srv.Open(t, "chains", fmt.Sprintf("t%d", e.n.Add(1)))
}

func (e *s3Env) damage(t *testing.T, s blob.Store, name string, f func([]byte) []byte) {
	s3test.Rewrite(t, s, name, f)
}

func (e *s3Env) locate(s blob.Store) (string, []string) {
	return e.srv.URL("chains", s.(*blobs3.Store).Key("")), e.srv.Env()
}

// lossy is a store whose conditional creates can be made to fail: the
// next lose of them reach the store and then report an error whatever it
// answered (the reply was lost), the next drop of them fail without
// reaching it (the request was lost). The other operations pass through.
type lossy struct {
	blob.Store
	mu         sync.Mutex
	lose, drop int
}

func (l *lossy) set(lose, drop int) {
	l.mu.Lock()
	l.lose, l.drop = lose, drop
	l.mu.Unlock()
}

// errLost is what lossy reports for a create it failed.
var errLost = errors.New("connection reset by peer (injected)")

func (l *lossy) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	l.mu.Lock()
	lose := l.lose > 0
	drop := !lose && l.drop > 0
	if lose {
		l.lose--
	} else if drop {
		l.drop--
	}
	l.mu.Unlock()
	if drop {
		return errLost
	}
	err := l.Store.(blob.Creator).PutIfAbsent(ctx, name, data)
	if lose {
		return errLost
	}
	return err
}
