package blob_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/file"
)

func TestTrailerRoundTrip(t *testing.T) {
	for _, payload := range [][]byte{nil, {}, []byte("x"), bytes.Repeat([]byte("eddy"), 1000)} {
		obj := blob.AppendTrailer(append([]byte(nil), payload...), payload)
		if len(obj) != len(payload)+blob.TrailerSize {
			t.Fatalf("object of %d-byte payload has %d bytes", len(payload), len(obj))
		}
		got, err := blob.CheckTrailer("obj", obj)
		if err != nil {
			t.Fatalf("CheckTrailer: %v", err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("payload = %q, want %q", got, payload)
		}
	}
}

// wantCorrupt checks that err is a *CorruptError naming name.
func wantCorrupt(t *testing.T, err error, name, what string) {
	t.Helper()
	var ce *blob.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: err = %v, want *blob.CorruptError", what, err)
	}
	if ce.Name != name || !strings.Contains(err.Error(), name) || ce.Reason == "" {
		t.Fatalf("%s: error %q does not name %q with a reason", what, err, name)
	}
}

func TestTrailerDetectsTruncationAndFlips(t *testing.T) {
	payload := []byte("checkpoint manifest bytes")
	obj := blob.AppendTrailer(append([]byte(nil), payload...), payload)
	for n := 0; n < len(obj); n++ {
		_, err := blob.CheckTrailer("a/b", obj[:n])
		wantCorrupt(t, err, "a/b", fmt.Sprintf("truncated to %d bytes", n))
	}
	for i := range obj {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := append([]byte(nil), obj...)
			bad[i] ^= mask
			_, err := blob.CheckTrailer("a/b", bad)
			wantCorrupt(t, err, "a/b", fmt.Sprintf("byte %d ^ %#x", i, mask))
		}
	}
	// An appended byte moves the trailer: also corrupt.
	_, err := blob.CheckTrailer("a/b", append(append([]byte(nil), obj...), 0))
	wantCorrupt(t, err, "a/b", "appended byte")
}

func TestCorruptErrorReasons(t *testing.T) {
	payload := []byte("hello")
	obj := blob.AppendTrailer(append([]byte(nil), payload...), payload)
	cases := []struct {
		data []byte
		want string
	}{
		{obj[:3], "truncated"},
		{obj[:len(obj)-1], "no trailer"},
		{append([]byte("x"), obj...), "length mismatch"},
		{append([]byte("j"), obj[1:]...), "checksum mismatch"},
	}
	for _, c := range cases {
		_, err := blob.CheckTrailer("obj", c.data)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckTrailer(%q) = %v, want an error containing %q", c.data, err, c.want)
		}
	}
}

func TestValidateName(t *testing.T) {
	good := []string{"a", "MANIFEST", "checkpoints/00000000000000000012/MANIFEST", "a.b/c..d/e.", "op-1.state", "x/y z"}
	for _, n := range good {
		if err := blob.ValidateName(n); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", n, err)
		}
	}
	bad := map[string]string{
		"":         "empty",
		"/abs":     "absolute",
		"a//b":     "empty segment",
		"a/":       "empty segment",
		"..":       `".."`,
		"a/../b":   `".."`,
		".":        "starts with '.'",
		"a/./b":    "starts with '.'",
		".tmp":     "starts with '.'",
		"a/.x.tmp": "starts with '.'",
		`a\b`:      "backslash",
		"a\x00b":   "NUL",
	}
	for n, want := range bad {
		err := blob.ValidateName(n)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "invalid object name") {
			t.Errorf("ValidateName(%q) = %v, want an error mentioning %q", n, err, want)
		}
	}
}

func TestNotFound(t *testing.T) {
	err := blob.NotFound("a/b")
	if !errors.Is(err, blob.ErrNotFound) || !strings.Contains(err.Error(), `"a/b"`) {
		t.Fatalf("NotFound = %v", err)
	}
}

func TestOpenURLForms(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	cases := []struct{ url, dir string }{
		{"file://" + filepath.Join(base, "abs"), filepath.Join(base, "abs")},
		{"file://./rel/dir", filepath.Join(base, "rel", "dir")},
		{"FILE://./upper", filepath.Join(base, "upper")},
		{filepath.Join(base, "plain"), filepath.Join(base, "plain")},
		{"plain/rel", filepath.Join(base, "plain", "rel")},
	}
	for _, c := range cases {
		s, err := blob.Open(c.url)
		if err != nil {
			t.Fatalf("Open(%q): %v", c.url, err)
		}
		fs, ok := s.(*file.Store)
		if !ok {
			t.Fatalf("Open(%q) = %T, want *file.Store", c.url, s)
		}
		if fs.Dir() != c.dir {
			t.Errorf("Open(%q) dir = %q, want %q", c.url, fs.Dir(), c.dir)
		}
		if fi, err := os.Stat(c.dir); err != nil || !fi.IsDir() {
			t.Errorf("Open(%q) did not create %s: %v", c.url, c.dir, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	cases := map[string][]string{
		"":            {"empty storage URL"},
		"s3://b/p":    {`"s3"`, "no store registered", "registered: file", "blob/s3"},
		"gs://bucket": {`"gs"`, "no store registered"},
		"file://":     {"missing path"},
	}
	for url, wants := range cases {
		_, err := blob.Open(url)
		if err == nil {
			t.Errorf("Open(%q) succeeded", url)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Open(%q) = %q, want it to mention %q", url, err, w)
			}
		}
	}
}

func TestRegisterSchemeTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("registering \"file\" twice did not panic")
		}
	}()
	blob.RegisterScheme("file", func(string) (blob.Store, error) { return nil, nil })
}
