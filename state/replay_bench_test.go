package state_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/state"
)

type benchWin struct {
	End int64 `proto:"1"`
	Acc int64 `proto:"2"`
}

// BenchmarkReplayWindows replays a window-like change log (5,000 keys, each
// update putting 6 map entries, 100 batches) into a fresh backend: what a
// changelog recovery does after loading the snapshot.
//
//	go test ./state -run '^$' -bench ReplayWindows -benchmem
func BenchmarkReplayWindows(b *testing.B) {
	store, err := file.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	log, err := dstl.Open(store, dstl.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	w := log.Writer("windows-0")
	src := state.NewBackend(128, 0, 128, keySchema(b))
	src.SetChangeLog(func(kg, st uint32, op state.ChangeOp, key, sub, value []byte) error {
		return w.AppendOp(kg, st, dstl.Op(op), key, sub, value)
	})
	m, _ := state.NewMap[int64, benchWin](src, "windows")
	ctx := context.Background()
	const keys, updates = 5000, 40_000
	for i := range updates {
		k := []byte(fmt.Sprintf("driver-%05d", i%keys))
		src.SetCurrentKey(k, state.KeyGroupFor(k, 128))
		t := int64(i / keys * 2)
		for s := t - 5; s <= t; s++ {
			m.Put(s*10, benchWin{End: s*10 + 60, Acc: int64(i)})
		}
		if i%(updates/100) == 0 {
			if _, err := w.Persist(ctx, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	h, err := w.Persist(ctx, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(h.Size)
	b.ReportMetric(float64(len(h.Objects)), "objects")
	b.ResetTimer()
	for range b.N {
		dst := state.NewBackend(128, 0, 128, keySchema(b))
		state.NewMap[int64, benchWin](dst, "windows")
		err := dstl.Read(ctx, store, dstl.ReadOptions{}, []dstl.Handle{h}, 0, 128, func(c *dstl.Change) error {
			return dst.ApplyChange(c.KeyGroup, c.State, state.ChangeOp(c.Op), c.Key, c.Sub, c.Value)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplayValues replays a log of 40,000 new keys with 1 KiB values
// (job (a) of `eddy bench checkpoint`), 100 objects, into a fresh backend.
//
//	go test ./state -run '^$' -bench ReplayValues -benchmem
func BenchmarkReplayValues(b *testing.B) {
	store, err := file.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	log, err := dstl.Open(store, dstl.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	w := log.Writer("fill-0")
	src := state.NewBackend(128, 0, 128, keySchema(b))
	src.SetChangeLog(func(kg, st uint32, op state.ChangeOp, key, sub, value []byte) error {
		return w.AppendOp(kg, st, dstl.Op(op), key, sub, value)
	})
	v, _ := state.NewValue[benchPayload](src, "values")
	ctx := context.Background()
	payload := make([]byte, 1024)
	const keys = 40_000
	for i := range keys {
		k := []byte(fmt.Sprintf("key-%d", i))
		src.SetCurrentKey(k, state.KeyGroupFor(k, 128))
		v.Update(benchPayload{Payload: payload, Count: int64(i)})
		if i%(keys/100) == 0 {
			if _, err := w.Persist(ctx, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	h, err := w.Persist(ctx, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(h.Size)
	b.ResetTimer()
	for range b.N {
		dst := state.NewBackend(128, 0, 128, keySchema(b))
		state.NewValue[benchPayload](dst, "values")
		err := dstl.Read(ctx, store, dstl.ReadOptions{}, []dstl.Handle{h}, 0, 128, func(c *dstl.Change) error {
			return dst.ApplyChange(c.KeyGroup, c.State, state.ChangeOp(c.Op), c.Key, c.Sub, c.Value)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
