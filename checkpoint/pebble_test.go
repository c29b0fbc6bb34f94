package checkpoint

import (
	"reflect"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/serde"
)

// oldStatePart and oldManifest are the manifest format before Pebble
// parts (StatePart fields 1-6 only), to check that both directions of the
// change decode.
type oldStatePart struct {
	Subtask       uint32 `proto:"1"`
	KeyGroupStart uint32 `proto:"2"`
	KeyGroupEnd   uint32 `proto:"3"`
	Blob          string `proto:"4"`
	Size          int64  `proto:"5"`
	CRC           uint32 `proto:"6,fixed"`
}

type oldOperatorState struct {
	Name           string         `proto:"1"`
	MaxParallelism uint32         `proto:"2"`
	Parallelism    uint32         `proto:"3"`
	Parts          []oldStatePart `proto:"4"`
}

type oldManifest struct {
	ID        uint64             `proto:"1"`
	Operators []oldOperatorState `proto:"5"`
	Files     []string           `proto:"7"`
	Version   uint32             `proto:"15"`
}

func pebbleManifest() *Manifest {
	return &Manifest{ID: 4, Operators: []OperatorState{{Name: "count", MaxParallelism: 8, Parallelism: 1, Parts: []StatePart{{
		KeyGroupEnd: 8, Blob: "checkpoints/4/count-0-r.state", Size: 40, CRC: 7,
		Pebble: &PebblePart{Files: []PebbleFile{
			{Name: "000005.sst", Object: "checkpoints/2/count-0-q.pebble/sst/q-000005.sst", Size: 900, CRC32C: 1},
			{Name: "MANIFEST-000001", Object: "checkpoints/4/count-0-r.pebble/4/MANIFEST-000001", Size: 80, CRC32C: 2},
		}}}}}},
		Files: []string{"checkpoints/2/count-0-q.pebble/sst/q-000005.sst", "checkpoints/4/count-0-r.pebble/4/MANIFEST-000001", "checkpoints/4/count-0-r.state"}}
}

// TestPebblePartRoundTrip: a manifest with Pebble parts decodes to what
// was encoded, and a manifest of the format before them decodes with no
// Pebble part; a build of that format reads the new manifest's parts
// without their files (it then refuses the header blob by its magic).
func TestPebblePartRoundTrip(t *testing.T) {
	m := pebbleManifest()
	data, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	m.Version = versionOf(m)
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("decoded %+v\nwant %+v", got, m)
	}

	old := oldManifest{ID: 3, Version: 1, Files: []string{"checkpoints/3/count-0.state"},
		Operators: []oldOperatorState{{Name: "count", MaxParallelism: 8, Parallelism: 1, Parts: []oldStatePart{{KeyGroupEnd: 8, Blob: "checkpoints/3/count-0.state", Size: 12}}}}}
	oldData, err := serde.MustFor[oldManifest]().Append(nil, &old)
	if err != nil {
		t.Fatal(err)
	}
	got, err = DecodeManifest(oldData)
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Operators[0].Parts[0]; p.Pebble != nil || p.Blob != "checkpoints/3/count-0.state" || p.Size != 12 {
		t.Fatalf("old part decoded as %+v", p)
	}

	var back oldManifest
	if err := serde.MustFor[oldManifest]().Decode(data, &back); err != nil {
		t.Fatal(err)
	}
	if p := back.Operators[0].Parts[0]; p.Blob != m.Operators[0].Parts[0].Blob {
		t.Fatalf("the old format reads the part as %+v", p)
	}
}

// TestPebblePartValidation: a Pebble part's files must be plain names
// with their objects in Files, and the part must name its header blob.
func TestPebblePartValidation(t *testing.T) {
	for _, c := range []struct {
		name   string
		breaks func(m *Manifest)
		want   string
	}{
		{"object not in Files", func(m *Manifest) { m.Files = m.Files[1:] }, "is not listed in Files"},
		{"path as name", func(m *Manifest) { m.Operators[0].Parts[0].Pebble.Files[0].Name = "../x.sst" }, "is not a file name"},
		{"dot dot", func(m *Manifest) { m.Operators[0].Parts[0].Pebble.Files[0].Name = ".." }, "is not a file name"},
		{"negative size", func(m *Manifest) { m.Operators[0].Parts[0].Pebble.Files[1].Size = -1 }, "negative size"},
		{"no header", func(m *Manifest) { m.Operators[0].Parts[0].Blob = "" }, "without a state header"},
		{"database narrower than the part", func(m *Manifest) {
			m.Operators[0].Parts[0].Pebble.KeyGroupStart, m.Operators[0].Parts[0].Pebble.KeyGroupEnd = 2, 8
		}, "cannot hold the part's"},
		{"database beyond the key groups", func(m *Manifest) {
			m.Operators[0].Parts[0].KeyGroupStart = 2
			m.Operators[0].Parts[0].Pebble.KeyGroupStart, m.Operators[0].Parts[0].Pebble.KeyGroupEnd = 0, 9
		}, "cannot hold the part's"},
	} {
		m := pebbleManifest()
		c.breaks(m)
		err := m.validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := pebbleManifest().validate(); err != nil {
		t.Fatal(err)
	}
	// A part narrowed to some of its database's key groups is valid, and
	// says which ones the database held.
	m := pebbleManifest()
	m.Operators[0].Parts[0].KeyGroupStart = 3
	m.Operators[0].Parts[0].Pebble.KeyGroupStart, m.Operators[0].Parts[0].Pebble.KeyGroupEnd = 0, 8
	if err := m.validate(); err != nil {
		t.Fatal(err)
	}
	if s, e := m.Operators[0].Parts[0].DBKeyGroups(); s != 0 || e != 8 {
		t.Fatalf("DBKeyGroups = [%d, %d), want [0, 8)", s, e)
	}
	if s, e := pebbleManifest().Operators[0].Parts[0].DBKeyGroups(); s != 0 || e != 8 {
		t.Fatalf("DBKeyGroups of a part from before = [%d, %d), want the part's [0, 8)", s, e)
	}
}
