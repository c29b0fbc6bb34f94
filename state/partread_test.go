package state_test

import (
	"strings"
	"testing"

	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
)

// TestReadPart: a part read without its Go types lists the states with
// their kinds and schemas and yields every entry the backend wrote, with
// the value bytes the state's codec encodes.
func TestReadPart(t *testing.T) {
	ks, _ := serde.SchemaOf[string]()
	b := state.NewBackend(8, 0, 8, ks)
	b.SetDeterministic(true)
	v, _ := state.NewValue[int64](b, "count")
	l, _ := state.NewList[int64](b, "lst")
	m, _ := state.NewMap[string, int32](b, "tags")
	for _, k := range []string{"a", "b", "c"} {
		b.SetCurrentKey([]byte(k), state.KeyGroupFor([]byte(k), 8))
		v.Update(int64(len(k) + 6))
		l.Add(5)
		m.Put("t", 3)
	}
	b.SetWatermark(1000)
	snap, err := b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	info, err := state.ReadPart(snap)
	if err != nil {
		t.Fatal(err)
	}
	if info.MaxParallelism != 8 || !info.HasWatermark || info.Watermark != 1000 || len(info.States) != 3 {
		t.Fatalf("header %+v", info)
	}
	kinds := []string{info.States[0].Kind, info.States[1].Kind, info.States[2].Kind}
	if strings.Join(kinds, ",") != "value,list,map" || info.States[0].Name != "count" {
		t.Fatalf("states %+v", info.States)
	}
	if _, err := serde.ParseSchema(info.KeySchema); err != nil {
		t.Fatalf("key schema: %v", err)
	}
	seen := map[string]int{}
	for _, g := range info.Groups {
		err := g.Entries(func(key, value []byte) error {
			name := info.States[g.State].Name
			seen[name+"/"+string(key)]++
			if state.KeyGroupFor(key, 8) != g.KeyGroup {
				t.Errorf("key %q in key group %d", key, g.KeyGroup)
			}
			if name == "count" && string(value) != "\x08\x07" {
				t.Errorf("count value % x", value)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 9 {
		t.Fatalf("entries %v", seen)
	}

	// Damage: bad magic, a truncated body, a group whose count overstates.
	if _, err := state.ReadPart([]byte("nope")); err == nil || !strings.Contains(err.Error(), "bad magic") {
		t.Fatalf("bad magic: %v", err)
	}
	if _, err := state.ReadPart(snap[:len(snap)-3]); err == nil {
		t.Fatal("truncated part read")
	}
	g := info.Groups[0]
	g.Count++
	if err := g.Entries(func(_, _ []byte) error { return nil }); err == nil || !strings.Contains(err.Error(), "entry 1") {
		t.Fatalf("overstated count: %v", err)
	}
}

// FuzzReadPart: ReadPart and Entries never panic on arbitrary bytes.
func FuzzReadPart(f *testing.F) {
	ks, _ := serde.SchemaOf[string]()
	b := state.NewBackend(4, 0, 4, ks)
	v, _ := state.NewValue[int64](b, "count")
	b.SetCurrentKey([]byte("k1"), 1)
	v.Update(7)
	snap, _ := b.Snapshot()
	f.Add(snap)
	f.Fuzz(func(t *testing.T, in []byte) {
		info, err := state.ReadPart(in)
		if err != nil {
			return
		}
		for _, g := range info.Groups {
			_ = g.Entries(func(_, _ []byte) error { return nil })
		}
	})
}
