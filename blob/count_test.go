package blob_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/blobtest"
	"github.com/eddyflow/eddy/blob/file"
)

// A counted store is still a store: it passes the conformance suite, its
// conditional create included.
func TestCountConformance(t *testing.T) {
	inner := map[blob.Store]*file.Store{}
	blobtest.Run(t, func(t *testing.T) blob.Store {
		f, err := file.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		s := blob.Count(f, new(blob.Counter))
		inner[s] = f
		return s
	}, blobtest.Corrupt(func(t *testing.T, s blob.Store, name string, damage func([]byte) []byte) {
		path := inner[s].Path(name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, damage(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}))
}

// TestCountCountsEachKind: every operation counts once under its kind,
// failed ones too, and two stores may share a counter.
func TestCountCountsEachKind(t *testing.T) {
	ctx := context.Background()
	f, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var c blob.Counter
	s := blob.Count(f, &c)
	step := func(what string, op func() error, want blob.Requests) {
		t.Helper()
		before := c.Requests()
		if err := op(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := c.Requests().Sub(before); got != want {
			t.Errorf("%s: counted %v, want %v", what, got, want)
		}
	}
	step("put", func() error { return s.Put(ctx, "a/1", []byte("one")) }, blob.Requests{Put: 1})
	step("put if absent", func() error { return blob.PutIfAbsent(ctx, s, "a/2", []byte("two")) }, blob.Requests{Put: 1})
	step("lost put if absent", func() error {
		if err := blob.PutIfAbsent(ctx, s, "a/2", []byte("again")); !errors.Is(err, blob.ErrExists) {
			return err
		}
		return nil
	}, blob.Requests{Put: 1})
	step("get", func() error {
		got, err := s.Get(ctx, "a/1")
		if err == nil && string(got) != "one" {
			t.Errorf("Get = %q", got)
		}
		return err
	}, blob.Requests{Get: 1})
	step("get into", func() error {
		var buf []byte
		got, err := blob.GetInto(ctx, s, "a/2", &buf)
		if err == nil && string(got) != "two" {
			t.Errorf("GetInto = %q", got)
		}
		return err
	}, blob.Requests{Get: 1})
	step("get of a missing object", func() error {
		if _, err := s.Get(ctx, "a/none"); !errors.Is(err, blob.ErrNotFound) {
			return err
		}
		return nil
	}, blob.Requests{Get: 1})
	step("list", func() error {
		names, err := s.List(ctx, "a/")
		if err == nil && len(names) != 2 {
			t.Errorf("List = %q", names)
		}
		return err
	}, blob.Requests{List: 1})
	step("delete", func() error { return s.Delete(ctx, "a/1") }, blob.Requests{Delete: 1})

	// A second store counted in the same counter adds to it.
	g, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	step("put to a second store", func() error { return blob.Count(g, &c).Put(ctx, "x", nil) }, blob.Requests{Put: 1})

	if got, want := c.Requests(), (blob.Requests{Put: 4, Get: 3, List: 1, Delete: 1}); got != want {
		t.Errorf("in all %v, want %v", got, want)
	}
	if got, want := c.Requests().String(), "4 PUT, 3 GET, 1 LIST, 1 DELETE"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := c.Requests().Total(); got != 9 {
		t.Errorf("Total() = %d, want 9", got)
	}
	// Answers (not found, exists) are no failures; errors are.
	if got := c.Failed(); got != (blob.Requests{}) {
		t.Errorf("failed %v after answers only, want none", got)
	}
	if err := s.Put(ctx, "../bad", nil); err == nil {
		t.Fatal("Put of an invalid name succeeded")
	}
	if _, err := s.Get(ctx, "../bad"); err == nil {
		t.Fatal("Get of an invalid name succeeded")
	}
	if got, want := c.Failed(), (blob.Requests{Put: 1, Get: 1}); got != want {
		t.Errorf("failed %v, want %v", got, want)
	}
}

// plainStore is a Store with none of the optional interfaces.
type plainStore struct{ blob.Store }

// TestCountKeepsOptionalInterfaces: the wrapper is a Creator and a Locker
// exactly when the wrapped store is, and the lock it passes on still
// keeps a second holder out.
func TestCountKeepsOptionalInterfaces(t *testing.T) {
	dir := t.TempDir()
	f, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := blob.Count(f, new(blob.Counter))
	if _, ok := s.(blob.Creator); !ok {
		t.Error("the count of a file store is not a Creator")
	}
	l, ok := s.(blob.Locker)
	if !ok {
		t.Fatal("the count of a file store is not a Locker")
	}
	lease, err := l.Lock("first")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	other, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	var held *blob.HeldError
	if _, err := other.Lock("second"); !errors.As(err, &held) || held.Holder != "first" {
		t.Fatalf("second Lock = %v, want a *HeldError naming the first holder", err)
	}

	p := blob.Count(plainStore{f}, new(blob.Counter))
	if _, ok := p.(blob.Creator); ok {
		t.Error("the count of a store without conditional create is a Creator")
	}
	if _, ok := p.(blob.Locker); ok {
		t.Error("the count of a store without a lock is a Locker")
	}
	if err := blob.PutIfAbsent(context.Background(), p, "x", nil); !errors.Is(err, blob.ErrNoConditionalCreate) {
		t.Errorf("PutIfAbsent on the count of a plain store = %v, want ErrNoConditionalCreate", err)
	}
}
