package file_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/file"
)

func newStore(t *testing.T) *file.Store {
	t.Helper()
	s, err := file.New(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustPut(t *testing.T, s blob.Store, name string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), name, data); err != nil {
		t.Fatalf("Put(%q): %v", name, err)
	}
}

// getBoth reads name with Get and with GetInto into a buffer already
// holding other bytes, and fails unless both give the same payload or the
// same error.
func getBoth(t *testing.T, s *file.Store, name string) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Get(ctx, name)
	for _, size := range []int{0, 3, 1 << 21} {
		buf := bytes.Repeat([]byte{0xEE}, size)
		into, ierr := s.GetInto(ctx, name, &buf)
		if fmt.Sprint(err) != fmt.Sprint(ierr) || !bytes.Equal(got, into) {
			t.Fatalf("%q: Get = %.40q, %v; GetInto with a %d-byte buffer = %.40q, %v", name, got, err, size, into, ierr)
		}
		if ierr == nil && size >= len(into) && len(into) > 0 && &buf[0] != &into[0] {
			t.Fatalf("%q: GetInto allocated although its %d-byte buffer held the object", name, size)
		}
	}
	return got, err
}

func mustGet(t *testing.T, s *file.Store, name string) []byte {
	t.Helper()
	got, err := getBoth(t, s, name)
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	return got
}

func mustList(t *testing.T, s blob.Store, prefix string) []string {
	t.Helper()
	names, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return names
}

func TestRoundTrip(t *testing.T) {
	s := newStore(t)
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	objects := map[string][]byte{
		"MANIFEST": []byte("top"),
		"checkpoints/00000000000000000012/MANIFEST":   []byte("manifest 12"),
		"checkpoints/00000000000000000012/op-0.state": big,
		"empty": {},
	}
	for n, d := range objects {
		mustPut(t, s, n, d)
	}
	for n, d := range objects {
		if got := mustGet(t, s, n); !bytes.Equal(got, d) {
			t.Errorf("Get(%q) = %d bytes, want %d", n, len(got), len(d))
		}
		// The file is the payload plus the trailer.
		fi, err := os.Stat(s.Path(n))
		if err != nil || fi.Size() != int64(len(d)+blob.TrailerSize) {
			t.Errorf("%s: size %v (%v), want %d", s.Path(n), fi.Size(), err, len(d)+blob.TrailerSize)
		}
	}
}

func TestPutReplaces(t *testing.T) {
	s := newStore(t)
	mustPut(t, s, "a/b", []byte("first version, longer"))
	mustPut(t, s, "a/b", []byte("second"))
	if got := mustGet(t, s, "a/b"); string(got) != "second" {
		t.Fatalf("Get = %q, want %q", got, "second")
	}
	if names := mustList(t, s, ""); !slices.Equal(names, []string{"a/b"}) {
		t.Fatalf("List = %q", names)
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(filepath.Dir(s.Path("a/b")))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want 1", len(entries))
	}
}

// TestCrashMidPut leaves what a crash before the rename leaves, a dot-file
// next to the target (and a dot-directory), and checks that readers ignore it.
func TestCrashMidPut(t *testing.T) {
	s := newStore(t)
	mustPut(t, s, "checkpoints/1/MANIFEST", []byte("old"))
	dir := filepath.Dir(s.Path("checkpoints/1/MANIFEST"))
	partial := blob.AppendTrailer([]byte("new"), []byte("new"))
	for _, tmp := range []string{".MANIFEST.tmp-123", ".x"} {
		if err := os.WriteFile(filepath.Join(dir, tmp), partial[:5], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(s.Dir(), ".hidden"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.Dir(), ".hidden", "obj"), partial, 0o644)
	// Another crash, before the directory of a new object got its first file.
	os.MkdirAll(filepath.Join(s.Dir(), "checkpoints", "2"), 0o755)
	os.WriteFile(filepath.Join(s.Dir(), "checkpoints", "2", ".MANIFEST.tmp-9"), nil, 0o644)

	for _, prefix := range []string{"", "checkpoints/", "checkpoints/1/", "checkpoints/1/MAN", "checkpoints/2/"} {
		names := mustList(t, s, prefix)
		want := []string{"checkpoints/1/MANIFEST"}
		if prefix == "checkpoints/2/" {
			want = nil
		}
		if !slices.Equal(names, want) {
			t.Errorf("List(%q) = %q, want %q", prefix, names, want)
		}
	}
	if got := mustGet(t, s, "checkpoints/1/MANIFEST"); string(got) != "old" {
		t.Fatalf("Get = %q", got)
	}
	if _, err := s.Get(context.Background(), "checkpoints/2/MANIFEST"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get of never-renamed object = %v, want ErrNotFound", err)
	}
	// A later Put of the same object succeeds despite the leftovers.
	mustPut(t, s, "checkpoints/1/MANIFEST", []byte("new"))
	if got := mustGet(t, s, "checkpoints/1/MANIFEST"); string(got) != "new" {
		t.Fatalf("Get = %q", got)
	}
}

func TestListPrefixAndOrder(t *testing.T) {
	s := newStore(t)
	names := []string{"a-c", "a/b", "a/b/c", "a/bc", "ab", "b", "checkpoints/00000000000000000002/x", "checkpoints/00000000000000000010/MANIFEST"}
	// "a/b" cannot be both a file and a directory; drop "a/b/c".
	names = slices.DeleteFunc(names, func(n string) bool { return n == "a/b/c" })
	for i := len(names) - 1; i >= 0; i-- {
		mustPut(t, s, names[i], []byte(names[i]))
	}
	cases := map[string][]string{
		"":                                  {"a-c", "a/b", "a/bc", "ab", "b", "checkpoints/00000000000000000002/x", "checkpoints/00000000000000000010/MANIFEST"},
		"a":                                 {"a-c", "a/b", "a/bc", "ab"},
		"a/":                                {"a/b", "a/bc"},
		"a/b":                               {"a/b", "a/bc"},
		"a/bc":                              {"a/bc"},
		"checkpoints/":                      {"checkpoints/00000000000000000002/x", "checkpoints/00000000000000000010/MANIFEST"},
		"checkpoints/00000000000000000010/": {"checkpoints/00000000000000000010/MANIFEST"},
		"zzz":                               nil,
		"nope/":                             nil,
		"../":                               nil,
		"a//":                               nil,
		"/":                                 nil,
	}
	for prefix, want := range cases {
		if got := mustList(t, s, prefix); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
	}
}

func TestMissing(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	mustPut(t, s, "dir/obj", []byte("x"))
	for _, n := range []string{"nope", "dir", "dir/obj/below", "other/dir/obj"} {
		_, err := getBoth(t, s, n)
		if !errors.Is(err, blob.ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprintf("%q", n)) {
			t.Errorf("Get(%q) = %v, want ErrNotFound naming it", n, err)
		}
		if err := s.Delete(ctx, n); err != nil {
			t.Errorf("Delete(%q) = %v, want nil", n, err)
		}
	}
	if got := mustGet(t, s, "dir/obj"); string(got) != "x" {
		t.Fatalf("Delete of a directory name touched its object: %q", got)
	}
}

func TestDeletePrunesEmptyDirs(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	mustPut(t, s, "checkpoints/1/a", []byte("a"))
	mustPut(t, s, "checkpoints/1/b", []byte("b"))
	mustPut(t, s, "checkpoints/2/a", []byte("a"))
	for _, n := range []string{"checkpoints/1/a", "checkpoints/1/a"} { // twice: idempotent
		if err := s.Delete(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(s.Path("checkpoints/1")); err != nil {
		t.Fatalf("non-empty directory removed: %v", err)
	}
	s.Delete(ctx, "checkpoints/1/b")
	if _, err := os.Stat(s.Path("checkpoints/1")); !os.IsNotExist(err) {
		t.Fatalf("empty directory kept: %v", err)
	}
	s.Delete(ctx, "checkpoints/2/a")
	if _, err := os.Stat(s.Path("checkpoints")); !os.IsNotExist(err) {
		t.Fatalf("empty directory kept: %v", err)
	}
	if _, err := os.Stat(s.Dir()); err != nil {
		t.Fatalf("store directory removed: %v", err)
	}
	if names := mustList(t, s, ""); len(names) != 0 {
		t.Fatalf("List = %q", names)
	}
}

// TestCorruptFiles damages a stored object on disk in every way a short
// object allows: truncation at every length, every byte flipped, garbage.
func TestCorruptFiles(t *testing.T) {
	s := newStore(t)
	const name = "checkpoints/00000000000000000003/MANIFEST"
	payload := []byte("a small manifest")
	mustPut(t, s, name, payload)
	path := s.Path(name)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, data []byte) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := getBoth(t, s, name)
		var ce *blob.CorruptError
		if !errors.As(err, &ce) || ce.Name != name || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s: Get = %v, want *blob.CorruptError naming %q", what, err, name)
		}
	}
	for n := 0; n < len(good); n++ {
		check(fmt.Sprintf("truncated to %d bytes", n), good[:n])
	}
	for i := range good {
		bad := slices.Clone(good)
		bad[i] ^= 0x55
		check(fmt.Sprintf("byte %d flipped", i), bad)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		garbage := make([]byte, r.IntN(64))
		for j := range garbage {
			garbage[j] = byte(r.Uint32())
		}
		check(fmt.Sprintf("garbage %x", garbage), garbage)
	}
	// Restoring the original bytes makes the object readable again.
	os.WriteFile(path, good, 0o644)
	if got := mustGet(t, s, name); !bytes.Equal(got, payload) {
		t.Fatalf("Get = %q", got)
	}
}

func TestInvalidNames(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for _, n := range []string{"", "/etc/passwd", "../escape", "a/../../b", "a//b", ".tmp", "a/.b", "a/"} {
		if err := s.Put(ctx, n, []byte("x")); err == nil || !strings.Contains(err.Error(), "invalid object name") {
			t.Errorf("Put(%q) = %v, want an invalid-name error", n, err)
		}
		if _, err := s.Get(ctx, n); err == nil || errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want an invalid-name error", n, err)
		}
		if err := s.Delete(ctx, n); err == nil {
			t.Errorf("Delete(%q) = nil, want an invalid-name error", n)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.Dir()), "escape")); !os.IsNotExist(err) {
		t.Fatal("Put escaped the store directory")
	}
}

func TestCanceledContext(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(ctx, "a", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Put = %v", err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get = %v", err)
	}
	mustPut(t, s, "a", nil)
	if _, err := s.List(ctx, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("List = %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := file.New(""); err == nil {
		t.Error("New(\"\") succeeded")
	}
	f := filepath.Join(t.TempDir(), "afile")
	os.WriteFile(f, nil, 0o644)
	if _, err := file.New(filepath.Join(f, "sub")); err == nil {
		t.Error("New below a regular file succeeded")
	}
}

// TestConcurrentPutDelete races Puts that create a directory against Deletes
// that prune it; every Put must succeed and every Get see a whole object.
func TestConcurrentPutDelete(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				name := fmt.Sprintf("d/%d/obj-%d", i%3, w)
				data := bytes.Repeat([]byte{byte(w)}, 100+i)
				if err := s.Put(ctx, name, data); err != nil {
					errs <- err
					return
				}
				got, err := s.Get(ctx, name)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, data) {
					errs <- fmt.Errorf("Get(%q) = %d bytes, want %d", name, len(got), len(data))
					return
				}
				if err := s.Delete(ctx, name); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestNewSweepsStaleTempFiles(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "checkpoints", "00000000000000000003")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(sub, ".MANIFEST.tmp-123")
	fresh := filepath.Join(sub, ".x.state.tmp-456")
	keep := filepath.Join(sub, ".hidden")
	for _, p := range []string{stale, fresh, keep} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := file.New(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("a temp file left by a killed writer an hour ago survived: %v", err)
	}
	for _, p := range []string{fresh, keep} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s was removed: a fresh temp file may belong to a live writer", p)
		}
	}
}
