package inspect

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/serde"
)

type userID int64

// TestParseKey: a key given as text becomes the bytes the runtime stores
// for it (runtime.KeyEncoder: strings as their bytes, other types with
// serde), and text that does not parse as the key type is an error naming
// the type.
func TestParseKey(t *testing.T) {
	check := func(s serde.Schema, text string, want []byte) {
		t.Helper()
		got, err := ParseKey(s, text)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("ParseKey(%s, %q) = % x, %v; want % x", s.Root, text, got, err, want)
		}
	}
	str, _ := serde.SchemaOf[string]()
	check(str, "driver-1", []byte("driver-1"))
	i64, _ := serde.SchemaOf[int64]()
	for _, v := range []int64{0, 1, -1, 1 << 40} {
		want, _ := serde.MustFor[int64]().Append(nil, &v)
		check(i64, strconv.FormatInt(v, 10), want)
	}
	u16, _ := serde.SchemaOf[uint16]()
	v16 := uint16(65535)
	want, _ := serde.MustFor[uint16]().Append(nil, &v16)
	check(u16, "65535", want)
	named, _ := serde.SchemaOf[userID]()
	uid := userID(-7)
	want, _ = serde.MustFor[userID]().Append(nil, &uid)
	check(named, "-7", want)
	b, _ := serde.SchemaOf[bool]()
	tr := true
	want, _ = serde.MustFor[bool]().Append(nil, &tr)
	check(b, "true", want)

	for _, c := range []struct {
		s    serde.Schema
		text string
		want string
	}{
		{i64, "abc", "does not parse as a key of type int64: invalid syntax"},
		{u16, "65536", "value out of range"},
		{u16, "-1", "invalid syntax"},
	} {
		if _, err := ParseKey(c.s, c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseKey(%s, %q): %v, want %q", c.s.Root, c.text, err, c.want)
		}
	}
	type pair struct {
		A string `proto:"1"`
	}
	ps, _ := serde.SchemaOf[pair]()
	if _, err := ParseKey(ps, "x"); err == nil || !strings.Contains(err.Error(), "messages") {
		t.Errorf("struct key: %v", err)
	}
}
