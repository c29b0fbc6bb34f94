//go:build unix

package file

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/blob"
)

func TestLock(t *testing.T) {
	dir := t.TempDir()
	a, _ := New(dir)
	b, _ := New(dir)
	lease, err := a.Lock("job x, pid 1")
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Check(); err != nil {
		t.Fatal(err)
	}
	_, err = b.Lock("job x, pid 2")
	var he *blob.HeldError
	if !errors.As(err, &he) || he.Holder != "job x, pid 1" || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Lock = %v, want a HeldError naming the holder", err)
	}
	if err := lease.Release(); err != nil {
		t.Fatal(err)
	}
	second, err := b.Lock("job x, pid 2")
	if err != nil {
		t.Fatalf("Lock after Release: %v", err)
	}
	// The lock is not an object: listing the store does not show it.
	names, err := a.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == lockName {
			t.Fatal("List shows the lock file")
		}
	}
	// Someone removes the lock file: the holder learns it lost the store.
	if err := os.Remove(b.Path(lockName)); err != nil {
		t.Fatal(err)
	}
	if err := second.Check(); err == nil {
		t.Fatal("Check passed with the lock file removed")
	}
	second.Release()
}
