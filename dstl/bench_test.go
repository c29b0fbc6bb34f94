package dstl

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

// appendLoop appends changes as writer "op-<id>" while next reports true,
// then persists them: 16-byte keys drawn from a space of 1M per writer (so
// few changes are superseded within a batch) and 32-byte values whose
// first 8 bytes vary.
func appendLoop(b *testing.B, l *Log, id int64, next func() bool) {
	w := l.Writer(fmt.Sprint("op-", id))
	var key [16]byte
	value := []byte("value-0123456789-0123456789-0123")
	binary.LittleEndian.PutUint64(key[8:], uint64(id))
	x := uint64(id) * 0x9e3779b97f4a7c15
	for next() {
		x = x*6364136223846793005 + 1442695040888963407
		k := x >> 44
		binary.LittleEndian.PutUint64(key[:8], k)
		binary.LittleEndian.PutUint64(value, x)
		if err := w.Append(uint32(k&127), 1, key[:], value, false); err != nil {
			b.Error(err)
			return
		}
	}
	if _, err := w.Persist(context.Background(), 0); err != nil {
		b.Error(err)
	}
}

// BenchmarkAppend measures Append: ns/op and allocs/op per change, and
// the uploaded bytes per change (B/change; rawB/change before zstd), with
// one writer and with 8 writers appending concurrently. Uploads go to an
// in-memory store that discards them.
func BenchmarkAppend(b *testing.B) {
	for _, bc := range []struct {
		writers  int
		compress bool
	}{{1, false}, {1, true}, {8, false}, {8, true}} {
		b.Run(fmt.Sprintf("writers=%d/zstd=%v", bc.writers, bc.compress), func(b *testing.B) {
			store := newMemStore()
			store.discard = true
			l, err := Open(store, Options{Compression: bc.compress})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			b.ReportAllocs()
			b.ResetTimer()
			if bc.writers == 1 {
				i := 0
				appendLoop(b, l, 1, func() bool { i++; return i <= b.N })
			} else {
				var ids atomic.Int64
				p := runtime.GOMAXPROCS(0)
				b.SetParallelism((bc.writers + p - 1) / p)
				b.RunParallel(func(pb *testing.PB) { appendLoop(b, l, ids.Add(1), pb.Next) })
			}
			b.StopTimer()
			m := l.Metrics()
			b.ReportMetric(float64(m.BytesUploaded)/float64(b.N), "B/change")
			b.ReportMetric(float64(m.BytesRaw)/float64(b.N), "rawB/change")
			b.ReportMetric(100*float64(m.DroppedChanges)/float64(b.N), "dropped%")
			b.ReportMetric(float64(m.Changes)/float64(max(m.Batches, 1)), "changes/batch")
		})
	}
}

// BenchmarkPersist measures a checkpoint boundary: 100 changes, then
// Persist, against an in-memory store.
func BenchmarkPersist(b *testing.B) {
	store := newMemStore()
	store.discard = true
	l, err := Open(store, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	w := l.Writer("w")
	value := make([]byte, 32)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for j := range 100 {
			w.Append(uint32(j), 1, []byte{byte(i), byte(j)}, value, false)
		}
		if _, err := w.Persist(context.Background(), w.Seq()-100); err != nil {
			b.Fatal(err)
		}
	}
}
