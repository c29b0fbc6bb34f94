package runtime

import (
	"reflect"
	"testing"

	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/state/pebble"
)

// TestPebbleParts: the Pebble checkpoints a subtask restores from are
// every part of its operator, narrowed to the key groups each is listed
// for; consecutive entries of one database are joined; heap snapshot parts
// and key groups no part lists become parts without files (they start
// empty); a checkpoint without Pebble parts overlapping the subtask's key
// groups restores none.
func TestPebbleParts(t *testing.T) {
	files := func(name string) []checkpoint.PebbleFile {
		return []checkpoint.PebbleFile{{Name: "000005.sst", Object: name, Size: 10, CRC32C: 1}}
	}
	pfiles := func(name string) []pebble.File {
		return []pebble.File{{Name: "000005.sst", Object: name, Size: 10, CRC32C: 1}}
	}
	// Database a held [0, 16) and was restored at parallelism 2 by
	// subtasks that listed it for their own key groups; one of them
	// listed its gap [8, 12) from the log alone, the next one a heap
	// part; database b is a subtask's own.
	a := &checkpoint.PebblePart{Files: files("a"), KeyGroupStart: 0, KeyGroupEnd: 16}
	m := &checkpoint.Manifest{ID: 3, Operators: []checkpoint.OperatorState{
		{Name: "other", MaxParallelism: 32},
		{Name: "op", MaxParallelism: 32, Parts: []checkpoint.StatePart{
			{Subtask: 2, KeyGroupStart: 16, KeyGroupEnd: 24, Blob: "b.state", Pebble: &checkpoint.PebblePart{Files: files("b")}},
			{Subtask: 0, KeyGroupStart: 0, KeyGroupEnd: 4, Blob: "a.state", Pebble: a},
			{Subtask: 1, KeyGroupStart: 4, KeyGroupEnd: 8, Blob: "a.state", Pebble: a},
			{Subtask: 1, KeyGroupStart: 12, KeyGroupEnd: 16, Blob: "heap.state"},
		}},
	}}
	got, err := pebbleParts(m, "op", 32, 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	want := []pebble.Checkpoint{
		{MaxParallelism: 32, Start: 0, End: 16, OwnStart: 0, OwnEnd: 8, Files: pfiles("a")},
		{MaxParallelism: 32, Start: 8, End: 12},
		{MaxParallelism: 32, Start: 12, End: 16},
		{MaxParallelism: 32, Start: 16, End: 24, OwnStart: 16, OwnEnd: 24, Files: pfiles("b")},
		{MaxParallelism: 32, Start: 24, End: 32},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("pebbleParts =\n%+v\nwant\n%+v", got, want)
	}
	for _, c := range []struct {
		uid        string
		start, end int
	}{{"op", 8, 16}, {"op", 24, 32}, {"other", 0, 32}, {"new", 0, 32}} {
		if got, err := pebbleParts(m, c.uid, 32, c.start, c.end); err != nil || got != nil {
			t.Errorf("%s [%d, %d): %+v, %v; want none: no Pebble part overlaps", c.uid, c.start, c.end, got, err)
		}
	}
	if got, err := pebbleParts(m, "op", 64, 0, 8); err != nil || got != nil {
		t.Errorf("another max parallelism: %+v, %v; want none (restore.Keyed refuses it)", got, err)
	}
	if got, err := pebbleParts(nil, "op", 32, 0, 8); err != nil || got != nil {
		t.Errorf("no checkpoint: %+v, %v", got, err)
	}
}
