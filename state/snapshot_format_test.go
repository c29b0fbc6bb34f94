package state

import (
	"bytes"
	"testing"

	"github.com/eddyflow/eddy/serde"
)

// TestSnapshotFormatAgreesWithSerde: SnapshotGroups writes the header's
// groups by hand and decodeSnapshot reads them without copying; both must
// agree with serde's encoding of snapshotHeader, so snapshots written by
// serde (earlier versions) restore, and serde reads ours.
func TestSnapshotFormatAgreesWithSerde(t *testing.T) {
	ks, err := serde.SchemaOf[string]()
	if err != nil {
		t.Fatal(err)
	}
	b := NewBackend(128, 0, 128, ks)
	b.SetDeterministic(true)
	v, _ := NewValue[int64](b, "count")
	m, _ := NewMap[string, int32](b, "tags")
	for i := range 500 {
		k := []byte{byte(i), byte(i >> 8), 'k'}
		b.SetCurrentKey(k, KeyGroupFor(k, 128))
		v.Update(int64(i))
		if i%3 == 0 {
			m.Put("t", int32(i))
		}
	}
	b.SetWatermark(-42)
	snap, err := b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	codec := serde.MustFor[snapshotHeader]()
	var viaSerde snapshotHeader
	if err := codec.Decode(snap[len(snapshotMagic):], &viaSerde); err != nil {
		t.Fatalf("serde cannot read the snapshot: %v", err)
	}
	var ours snapshotHeader
	if err := decodeSnapshot(snap[len(snapshotMagic):], &ours); err != nil {
		t.Fatal(err)
	}
	if len(ours.Groups) != len(viaSerde.Groups) || len(ours.Groups) == 0 {
		t.Fatalf("%d groups, serde read %d", len(ours.Groups), len(viaSerde.Groups))
	}
	for i, g := range ours.Groups {
		s := viaSerde.Groups[i]
		if g.KeyGroup != s.KeyGroup || g.State != s.State || g.Count != s.Count || !bytes.Equal(g.Data, s.Data) {
			t.Fatalf("group %d differs: %+v vs %+v", i, g, s)
		}
	}
	if ours.Watermark == nil || *ours.Watermark != -42 || ours.MaxParallelism != 128 || len(ours.States) != 2 {
		t.Fatalf("header fields: %+v", ours)
	}
	// A snapshot as serde writes it (the earlier format) restores to the
	// same state.
	old, err := codec.Append([]byte(snapshotMagic), &viaSerde)
	if err != nil {
		t.Fatal(err)
	}
	r := NewBackend(128, 0, 128, ks)
	r.SetDeterministic(true)
	NewValue[int64](r, "count")
	NewMap[string, int32](r, "tags")
	if err := r.Restore([][]byte{old}); err != nil {
		t.Fatal(err)
	}
	again, _ := r.Snapshot()
	if !bytes.Equal(again, snap) {
		t.Fatal("restoring a serde-written snapshot gave different state")
	}
}

// TestGroupBytes: a snapshot and a restore record each key group's size,
// which the changelog uses to size materialization steps.
func TestGroupBytes(t *testing.T) {
	ks, _ := serde.SchemaOf[string]()
	b := NewBackend(128, 0, 4, ks)
	v, _ := NewValue[string](b, "v")
	for i := range 40 {
		k := []byte{byte(i)}
		b.SetCurrentKey(k, i%2) // key groups 0 and 1 only
		v.Update("0123456789")
	}
	if got := b.GroupBytes(0); got != 0 {
		t.Fatalf("before any snapshot: %d", got)
	}
	snap, err := b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	g0, g1 := b.GroupBytes(0), b.GroupBytes(1)
	if g0 < 20*11 || g1 < 20*11 || b.GroupBytes(2) != 0 || b.GroupBytes(99) != 0 {
		t.Fatalf("after the snapshot: %d %d %d", g0, g1, b.GroupBytes(2))
	}
	r := NewBackend(128, 0, 4, ks)
	NewValue[string](r, "v")
	if err := r.Restore([][]byte{snap}); err != nil {
		t.Fatal(err)
	}
	if r.GroupBytes(0) != g0 || r.GroupBytes(1) != g1 {
		t.Fatalf("after the restore: %d %d, want %d %d", r.GroupBytes(0), r.GroupBytes(1), g0, g1)
	}
}
