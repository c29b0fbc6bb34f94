package main

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/eddyflow/eddy/blob"
)

// TestOverlayLeavesBase: writes and deletes through the overlay are seen
// through it and never reach the base.
func TestOverlayLeavesBase(t *testing.T) {
	ctx := context.Background()
	base, err := blob.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	top, err := blob.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"c/1/a", "c/1/b", "c/2/a"} {
		if err := base.Put(ctx, n, []byte("base "+n)); err != nil {
			t.Fatal(err)
		}
	}
	o := newOverlay(base, top)
	get := func(s blob.Store, name string) string {
		t.Helper()
		data, err := s.Get(ctx, name)
		if errors.Is(err, blob.ErrNotFound) {
			return "<missing>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	list := func(s blob.Store) []string {
		t.Helper()
		names, err := s.List(ctx, "c/")
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	if err := o.Put(ctx, "c/1/a", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := o.Put(ctx, "c/3/a", []byte("added")); err != nil {
		t.Fatal(err)
	}
	if err := o.Delete(ctx, "c/1/b"); err != nil {
		t.Fatal(err)
	}
	if err := o.Delete(ctx, "c/3/a"); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"c/1/a": "new", "c/1/b": "<missing>", "c/2/a": "base c/2/a", "c/3/a": "<missing>"} {
		if got := get(o, name); got != want {
			t.Errorf("overlay Get(%s) = %q, want %q", name, got, want)
		}
	}
	var buf []byte
	if data, err := o.GetInto(ctx, "c/2/a", &buf); err != nil || string(data) != "base c/2/a" {
		t.Errorf("overlay GetInto(c/2/a) = %q, %v", data, err)
	}
	if got, want := list(o), []string{"c/1/a", "c/2/a"}; !slices.Equal(got, want) {
		t.Errorf("overlay List = %q, want %q", got, want)
	}
	// A put after a delete shows the object again.
	if err := o.Put(ctx, "c/1/b", []byte("again")); err != nil {
		t.Fatal(err)
	}
	if got := get(o, "c/1/b"); got != "again" {
		t.Errorf("Get after delete and put = %q", got)
	}
	for name, want := range map[string]string{"c/1/a": "base c/1/a", "c/1/b": "base c/1/b", "c/2/a": "base c/2/a", "c/3/a": "<missing>"} {
		if got := get(base, name); got != want {
			t.Errorf("base Get(%s) = %q, want %q", name, got, want)
		}
	}
	if got, want := list(base), []string{"c/1/a", "c/1/b", "c/2/a"}; !slices.Equal(got, want) {
		t.Errorf("base List = %q, want %q", got, want)
	}
}
