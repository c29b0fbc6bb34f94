package checkpoint

import (
	"reflect"
	"strings"
	"testing"
)

func sampleManifest() *Manifest {
	return &Manifest{
		ID:        12,
		Job:       "orders",
		CreatedAt: 1700000000123456789,
		Sources: []SourceState{{Name: "kafka", Splits: []SplitState{
			{Split: 0, Pos: []byte{0x01, 0x02}}, {Split: 7, Pos: []byte("offset=99"), Done: true}}}},
		Operators: []OperatorState{{Name: "agg", MaxParallelism: 128, Parallelism: 2, Schemas: []byte{0x0a, 0x00},
			Parts: []StatePart{
				{Subtask: 0, KeyGroupStart: 0, KeyGroupEnd: 64, Blob: "checkpoints/00000000000000000012/agg-0.state", Size: 10},
				{Subtask: 1, KeyGroupStart: 64, KeyGroupEnd: 128, Blob: "checkpoints/00000000000000000011/agg-1.state", Size: 20},
			}}},
		Sinks: []SinkState{{Name: "out", Txns: [][]byte{[]byte("txn-a"), []byte("txn-b")}}},
		Files: []string{"checkpoints/00000000000000000012/agg-0.state", "checkpoints/00000000000000000011/agg-1.state"},
	}
}

// uploadsManifest is a manifest whose log part records an object's upload.
func uploadsManifest() *Manifest {
	obj := "checkpoints/00000000000000000003/dstl-r-1"
	return &Manifest{ID: 3, Files: []string{obj}, Operators: []OperatorState{{Name: "agg", MaxParallelism: 8, Parallelism: 1,
		Changelog: []LogPart{{KeyGroupEnd: 8, Writer: "agg-0", After: 4, Upto: 90, Objects: []string{obj}, Size: 5000, CRCs: []uint32{7},
			Uploads: []LogUpload{{Object: obj, ID: "2~abc", Parts: 3, Size: 11 << 20}}}}}}}
}

func TestManifestRoundTrip(t *testing.T) {
	for _, m := range []*Manifest{sampleManifest(), uploadsManifest()} {
		testManifestRoundTrip(t, m)
	}
}

// TestManifestVersionFollowsUploads: a manifest is written as version 1,
// which builds from before deferred uploads read, unless it lists a log
// object whose completion was deferred: then as version 2, which those
// builds refuse by its version instead of taking the object for missing.
// Version 1 manifests with uploads (written before version 2 existed) are
// still read.
func TestManifestVersionFollowsUploads(t *testing.T) {
	for _, c := range []struct {
		m    *Manifest
		want uint32
	}{{sampleManifest(), 1}, {uploadsManifest(), 2}} {
		data, err := encodeManifest(c.m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeManifest(data)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != c.want {
			t.Errorf("manifest %d (%d log uploads) written as version %d, want %d", c.m.ID, len(c.m.uploads()), got.Version, c.want)
		}
	}
	data, err := encodeManifest(uploadsManifest())
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, 15<<3, 1) // the version field again: 1 wins
	got, err := DecodeManifest(data)
	if err != nil {
		t.Fatalf("a version 1 manifest with uploads: %v", err)
	}
	if len(got.uploads()) != 1 {
		t.Fatalf("a version 1 manifest with uploads decoded with %d uploads, want 1", len(got.uploads()))
	}
}

func testManifestRoundTrip(t *testing.T, m *Manifest) {
	data, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	want := *m
	want.Version = versionOf(m)
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("DecodeManifest =\n%+v\nwant\n%+v", got, &want)
	}
	if m.Version != 0 {
		t.Fatal("encodeManifest modified its argument")
	}
}

func TestDecodeManifestRejects(t *testing.T) {
	future := sampleManifest()
	data, _ := encodeManifest(future)
	data = append(data, 15<<3, 3) // field 15 (Version) again: 3 wins
	cases := map[string][]byte{
		"no format version":             nil,
		"format version 3":              data,
		"checkpoint: decode manifest: ": {0xff, 0xff, 0xff},
	}
	for want, in := range cases {
		_, err := DecodeManifest(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeManifest(%x) = %v, want an error containing %q", in, err, want)
		}
	}
}

// FuzzDecodeManifest feeds DecodeManifest arbitrary bytes: it must not panic,
// and whatever it accepts must survive a re-encode unchanged.
func FuzzDecodeManifest(f *testing.F) {
	good, err := encodeManifest(sampleManifest())
	if err != nil {
		f.Fatal(err)
	}
	small, _ := encodeManifest(&Manifest{ID: 1})
	withPebble, _ := encodeManifest(pebbleManifest())
	f.Add(withPebble)
	withUploads, err := encodeManifest(uploadsManifest())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(withUploads)
	f.Add(good)
	f.Add(small)
	f.Add([]byte{})
	f.Add(good[:len(good)/2])
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(data)
		if err != nil {
			if m != nil {
				t.Fatal("DecodeManifest returned a manifest and an error")
			}
			return
		}
		again, err := encodeManifest(m)
		if err != nil {
			t.Fatalf("re-encode of an accepted manifest: %v", err)
		}
		m2, err := DecodeManifest(again)
		if err != nil {
			t.Fatalf("decode of a re-encoded manifest: %v", err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("manifest changed across re-encode:\n%+v\n%+v", m, m2)
		}
	})
}
