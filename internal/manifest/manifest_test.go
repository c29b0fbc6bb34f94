package manifest

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/eddyflow/eddy/checkpoint"
)

func acks() []Ack {
	return []Ack{
		{Stage: 0, Subtask: 1, ID: 7, Source: "gps", Parallelism: 2, Splits: []checkpoint.SplitState{{Split: 3}, {Split: 1}}},
		{Stage: 0, Subtask: 0, ID: 7, Source: "gps", Parallelism: 2, Splits: []checkpoint.SplitState{{Split: 2}, {Split: 0}},
			SinkTxns: map[string][]byte{"out": []byte("s0")}},
		{Stage: 1, Subtask: 1, ID: 7, Parallelism: 2, Bytes: 10, Entries: 3, Uploaded: 5,
			Parts: []OpPart{{UID: "count", Part: checkpoint.StatePart{Subtask: 1, KeyGroupStart: 64, KeyGroupEnd: 128, Blob: "p1", Size: 10}}},
			Logs: []OpLog{
				{UID: "win", Part: checkpoint.LogPart{Subtask: 1, KeyGroupStart: 64, KeyGroupEnd: 96, Objects: []string{"old"}, Size: 4}},
				{UID: "win", Part: checkpoint.LogPart{Subtask: 1, KeyGroupStart: 64, KeyGroupEnd: 128, Objects: []string{"new"}, Size: 6}},
			},
			Watermarks: []OpWatermark{{UID: "win", Watermark: checkpoint.Watermark{KeyGroupStart: 64, KeyGroupEnd: 128, Nanos: 9}}},
			ExtraFiles: []string{"m2"}},
		{Stage: 1, Subtask: 0, ID: 7, Parallelism: 2, Bytes: 20, Entries: 4,
			Parts:      []OpPart{{UID: "count", Part: checkpoint.StatePart{Subtask: 0, KeyGroupStart: 0, KeyGroupEnd: 64, Blob: "p0", Size: 20}}},
			Watermarks: []OpWatermark{{UID: "win", Watermark: checkpoint.Watermark{KeyGroupStart: 0, KeyGroupEnd: 64, Nanos: 8}}}},
	}
}

func TestAssemble(t *testing.T) {
	pending := map[string][]Txn{"out": {{ID: 5, Data: []byte("aborted-5")}, {ID: 7, Data: []byte("s0")}, {ID: 8, Data: []byte("later")}}}
	r := Assemble(7, "job", 42, 128, acks(), pending)
	m := r.Manifest
	want := &checkpoint.Manifest{ID: 7, Job: "job", CreatedAt: 42,
		Sources: []checkpoint.SourceState{{Name: "gps", Splits: []checkpoint.SplitState{{Split: 0}, {Split: 1}, {Split: 2}, {Split: 3}}}},
		Operators: []checkpoint.OperatorState{
			{Name: "count", MaxParallelism: 128, Parallelism: 2, Parts: []checkpoint.StatePart{
				{Subtask: 0, KeyGroupStart: 0, KeyGroupEnd: 64, Blob: "p0", Size: 20},
				{Subtask: 1, KeyGroupStart: 64, KeyGroupEnd: 128, Blob: "p1", Size: 10}}},
			{Name: "win", MaxParallelism: 128, Parallelism: 2,
				// The log ranges of one ack keep their order: the old
				// base's log replays before the log since.
				Changelog: []checkpoint.LogPart{
					{Subtask: 1, KeyGroupStart: 64, KeyGroupEnd: 96, Objects: []string{"old"}, Size: 4},
					{Subtask: 1, KeyGroupStart: 64, KeyGroupEnd: 128, Objects: []string{"new"}, Size: 6}},
				Watermarks: []checkpoint.Watermark{{KeyGroupStart: 0, KeyGroupEnd: 64, Nanos: 8}, {KeyGroupStart: 64, KeyGroupEnd: 128, Nanos: 9}}},
		},
		// Transactions of this checkpoint and of an earlier one that never
		// completed commit; a later one waits.
		Sinks: []checkpoint.SinkState{{Name: "out", Txns: [][]byte{[]byte("aborted-5"), []byte("s0")}}},
		Files: []string{"new", "old", "p0", "p1"},
		Keep:  []string{"m2"},
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("manifest\n%+v\nwant\n%+v", m, want)
	}
	if !reflect.DeepEqual(r.Pending, map[string][]Txn{"out": {{ID: 8, Data: []byte("later")}}}) {
		t.Fatalf("pending %+v", r.Pending)
	}
	if r.Bytes != 30 || r.Entries != 7 || r.Uploaded != 5 || r.Full != 40 {
		t.Fatalf("totals %+v", r)
	}
	// Any order of the acks gives the same manifest.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		a := acks()
		rng.Shuffle(len(a), func(i, j int) { a[i], a[j] = a[j], a[i] })
		if got := Assemble(7, "job", 42, 128, a, pending).Manifest; !reflect.DeepEqual(got, want) {
			t.Fatalf("acks in another order gave\n%+v", got)
		}
	}
}

// TestAssemblePebbleFiles: the objects of a Pebble part's files go into
// Files (retention keeps what Files lists), each once although parts share
// them, and count into the full size; the bytes uploaded are the acks'.
func TestAssemblePebbleFiles(t *testing.T) {
	shared := checkpoint.PebbleFile{Name: "000004.sst", Object: "c/1/op-0-r.pebble/sst/r-000004.sst", Size: 100}
	part := func(sub uint32, start, end uint32, own string) OpPart {
		return OpPart{UID: "op", Part: checkpoint.StatePart{Subtask: sub, KeyGroupStart: start, KeyGroupEnd: end, Blob: own + ".state", Size: 10,
			Pebble: &checkpoint.PebblePart{Files: []checkpoint.PebbleFile{shared, {Name: "MANIFEST-000001", Object: own + "/MANIFEST-000001", Size: 5}}}}}
	}
	acks := []Ack{
		{Stage: 1, Subtask: 0, ID: 2, Parallelism: 2, Bytes: 15, Parts: []OpPart{part(0, 0, 4, "c/2/op-0")}},
		{Stage: 1, Subtask: 1, ID: 2, Parallelism: 2, Bytes: 115, Parts: []OpPart{part(1, 4, 8, "c/2/op-1")}},
	}
	r := Assemble(2, "job", 1, 8, acks, nil)
	want := []string{"c/1/op-0-r.pebble/sst/r-000004.sst", "c/2/op-0.state", "c/2/op-0/MANIFEST-000001", "c/2/op-1.state", "c/2/op-1/MANIFEST-000001"}
	if !reflect.DeepEqual(r.Manifest.Files, want) {
		t.Fatalf("files %v, want %v", r.Manifest.Files, want)
	}
	if r.Full != 2*(10+100+5) || r.Bytes != 130 {
		t.Fatalf("full %d, bytes %d", r.Full, r.Bytes)
	}
}
