package inspect

import (
	"context"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
)

// TestVerifyPebbleFiles: verify checks each file of a Pebble part against
// the size and CRC-32C the manifest records, as a restore does: an intact
// object with other bytes (another file under the name) is a problem
// naming the file.
func TestVerifyPebbleFiles(t *testing.T) {
	ctx := context.Background()
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sst, other := []byte("the sst's bytes"), []byte("other sst bytes")
	ks, err := serde.SchemaOf[string]()
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := state.NewBackend(4, 0, 4, ks).AppendHeader(nil)
	if err != nil {
		t.Fatal(err)
	}
	const header, object = "checkpoints/00000000000000000001/op-0-r.state", "checkpoints/00000000000000000001/op-0-r.pebble/sst/r-000004.sst"
	for name, data := range map[string][]byte{header: hdr, object: other} {
		if err := store.Put(ctx, name, data); err != nil {
			t.Fatal(err)
		}
	}
	m := &checkpoint.Manifest{ID: 1, Files: []string{header, object}, Operators: []checkpoint.OperatorState{{Name: "op", MaxParallelism: 4, Parallelism: 1,
		Parts: []checkpoint.StatePart{{KeyGroupEnd: 4, Blob: header, Size: int64(len(hdr)), Pebble: &checkpoint.PebblePart{Files: []checkpoint.PebbleFile{
			{Name: "000004.sst", Object: object, Size: int64(len(sst)), CRC32C: crc32.Checksum(sst, crc32.MakeTable(crc32.Castagnoli))}}}}}}}}
	if err := checkpoint.NewStorage(store, 3).Write(ctx, m); err != nil {
		t.Fatal(err)
	}
	r, err := Verify(ctx, store, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range r.Problems {
		if p.File == object && strings.Contains(p.What, "Pebble file 000004.sst") && strings.Contains(p.What, "CRC-32C") {
			found = true
		}
	}
	if !found || len(r.Problems) != 1 {
		t.Fatalf("problems %v: none names the replaced Pebble file", r.Problems)
	}
}
