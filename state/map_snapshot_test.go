package state_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/eddyflow/eddy/state"
)

var updateSnapshot = flag.Bool("update-snapshot", false, "rewrite testdata/maps.snapshot")

type goldenRich struct {
	Name  string          `proto:"1"`
	Wins  []benchWin      `proto:"2"`
	At    time.Time       `proto:"3"`
	Inner map[int32]int64 `proto:"4"`
}

// mapStates declares map states of struct values on b and, if fill, puts
// the same entries every time: negative and zero keys, zero values, nil
// pointers.
func mapStates(t testing.TB, b *state.Backend, fill bool) {
	wins, err := state.NewMap[int64, benchWin](b, "windows")
	if err != nil {
		t.Fatal(err)
	}
	rich, err := state.NewMap[string, *goldenRich](b, "rich")
	if err != nil {
		t.Fatal(err)
	}
	flags, err := state.NewMap[bool, benchWin](b, "flags")
	if err != nil {
		t.Fatal(err)
	}
	if !fill {
		return
	}
	for i := range 60 {
		k := []byte(fmt.Sprintf("driver-%02d", i))
		b.SetCurrentKey(k, state.KeyGroupFor(k, 128))
		for s := int64(-3); s <= int64(i%5); s++ {
			wins.Put(s*int64(i)*1_000_003, benchWin{End: s * 60, Acc: int64(i) << (s + 3) * 17})
		}
		if i%3 == 0 {
			rich.Put("", nil)
			rich.Put(fmt.Sprintf("r%d", i), &goldenRich{Name: "é" + fmt.Sprint(i), Wins: []benchWin{{}, {End: int64(i)}},
				At: time.Unix(int64(i)*1e6, int64(i)).UTC(), Inner: map[int32]int64{int32(-i): 1, 0: int64(i)}})
			rich.Put("z", &goldenRich{})
		}
		if i%4 == 0 {
			flags.Put(i%8 == 0, benchWin{Acc: int64(-i)})
			flags.Put(true, benchWin{})
		}
	}
}

// TestMapSnapshotMatchesGolden: map states of structs snapshot to the bytes
// that the serde reflect code wrote before maps had typed code, so earlier
// snapshots restore, and restoring one and snapshotting again gives it back.
//
//	go test ./state -run MapSnapshotMatchesGolden -update-snapshot
func TestMapSnapshotMatchesGolden(t *testing.T) {
	const path = "testdata/maps.snapshot"
	src := state.NewBackend(128, 0, 128, keySchema(t))
	src.SetDeterministic(true)
	mapStates(t, src, true)
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if *updateSnapshot {
		if err := os.WriteFile(path, snap, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap, golden) {
		t.Fatalf("the snapshot (%d bytes) differs from %s (%d bytes)", len(snap), path, len(golden))
	}
	r := state.NewBackend(128, 0, 128, keySchema(t))
	r.SetDeterministic(true)
	mapStates(t, r, false)
	if err := r.Restore([][]byte{golden}); err != nil {
		t.Fatal(err)
	}
	again, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, golden) {
		t.Fatal("restoring the golden snapshot and snapshotting again gives other bytes")
	}
}

// FuzzRestoreMaps restores arbitrary bytes into map states of structs: it
// must never panic, and what it accepts must snapshot and restore again.
func FuzzRestoreMaps(f *testing.F) {
	golden, err := os.ReadFile("testdata/maps.snapshot")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Fuzz(func(t *testing.T, in []byte) {
		r := state.NewBackend(128, 0, 128, keySchema(t))
		mapStates(t, r, false)
		if err := r.Restore([][]byte{in}); err != nil {
			return
		}
		snap, err := r.Snapshot()
		if err != nil {
			t.Fatalf("restored state does not snapshot: %v", err)
		}
		again := state.NewBackend(128, 0, 128, keySchema(t))
		mapStates(t, again, false)
		if err := again.Restore([][]byte{snap}); err != nil {
			t.Fatalf("own snapshot does not restore: %v", err)
		}
		if again.Entries() != r.Entries() {
			t.Fatalf("%d entries restored, then %d", r.Entries(), again.Entries())
		}
	})
}
