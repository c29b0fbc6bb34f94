package state_test

import (
	"fmt"
	"testing"

	"github.com/eddyflow/eddy/state"
)

type benchPayload struct {
	Payload []byte `proto:"1"`
	Count   int64  `proto:"2"`
}

// payloadKeys is how many 1 KiB values payloadBackend holds.
const payloadKeys = 64 << 10

// payloadBackend returns a backend of key groups [0, 64) holding 64 MiB:
// payloadKeys 1 KiB values in the value state "values".
func payloadBackend(b *testing.B) *state.Backend {
	be := state.NewBackend(128, 0, 64, keySchema(b))
	v, err := state.NewValue[benchPayload](be, "values")
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1024)
	for i := range payloadKeys {
		k := []byte(fmt.Sprintf("key-%d", i))
		be.SetCurrentKey(k, state.KeyGroupFor(k, 128)%64)
		v.Update(benchPayload{Payload: buf, Count: int64(i)})
	}
	return be
}

// BenchmarkSnapshotGroups snapshots 64 key groups holding 64 MiB of 1 KiB
// values (what a changelog materialization step does), 8 groups per call.
//
//	go test ./state -run '^$' -bench SnapshotGroups -benchmem
func BenchmarkSnapshotGroups(b *testing.B) {
	be := payloadBackend(b)
	b.SetBytes(payloadKeys * 1024)
	b.ResetTimer()
	for range b.N {
		for from := 0; from < 64; from += 8 {
			if _, err := be.SnapshotGroups(from, from+8); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkGroupSnapshot is BenchmarkSnapshotGroups done as a changelog
// materialization does it: steps of 1 MiB of entries, parts of 4 MiB,
// each part joined into one buffer (which the upload goroutine does). It
// reports the mean time of a step, what a materialization holds a subtask
// up for.
//
//	go test ./state -run '^$' -bench 'SnapshotGroups|GroupSnapshot' -benchmem
func BenchmarkGroupSnapshot(b *testing.B) {
	be := payloadBackend(b)
	b.SetBytes(payloadKeys * 1024)
	b.ResetTimer()
	steps := 0
	var buf []byte // parts are joined into one buffer, as for their uploads
	for range b.N {
		s := be.NewGroupSnapshot(0, 64, 4<<20)
		joined := 0
		for !s.Done() {
			p, err := s.Step(1 << 20)
			if err != nil {
				b.Fatal(err)
			}
			steps++
			if p != nil {
				buf = p.AppendTo(buf[:0])
				joined += len(buf)
			}
		}
		if joined < payloadKeys*1024 {
			b.Fatalf("parts of %d bytes for %d bytes of values", joined, payloadKeys*1024)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/step")
}

// BenchmarkAppendSnapshotReused is BenchmarkSnapshotGroups as a synchronous
// checkpoint now takes it: the whole backend appended into the buffer of
// the checkpoint before, once that one was uploaded.
func BenchmarkAppendSnapshotReused(b *testing.B) {
	be := payloadBackend(b)
	b.SetBytes(payloadKeys * 1024)
	var buf []byte
	var err error
	b.ResetTimer()
	for range b.N {
		if buf, err = be.AppendSnapshot(buf[:0]); err != nil {
			b.Fatal(err)
		}
		if len(buf) < payloadKeys*1024 {
			b.Fatalf("a snapshot of %d bytes for %d bytes of values", len(buf), payloadKeys*1024)
		}
	}
}

// BenchmarkSnapshot is the whole-backend snapshot into a new buffer, what a
// synchronous checkpoint took before BenchmarkAppendSnapshotReused.
func BenchmarkSnapshot(b *testing.B) {
	be := payloadBackend(b)
	b.SetBytes(payloadKeys * 1024)
	b.ResetTimer()
	for range b.N {
		if _, err := be.Snapshot(); err != nil {
			b.Fatal(err)
		}
	}
}
