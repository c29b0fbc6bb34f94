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

// changeLogged returns a file store, a fresh backend whose change log goes
// to a writer of a dstl log on it, and that writer.
func changeLogged(b *testing.B, writer string) (*file.Store, *state.Backend, *dstl.Writer) {
	store, err := file.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	log, err := dstl.Open(store, dstl.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { log.Close() })
	w := log.Writer(writer)
	src := state.NewBackend(128, 0, 128, keySchema(b))
	src.SetChangeLog(func(kg, st uint32, op state.ChangeOp, key, sub, value []byte) error {
		return w.AppendOp(kg, st, dstl.Op(op), key, sub, value)
	})
	return store, src, w
}

// replayInto reads h from store into a fresh backend that declare fills
// with states, b.N times.
func replayInto(b *testing.B, store *file.Store, h dstl.Handle, declare func(*state.Backend)) {
	b.SetBytes(h.Size)
	b.ResetTimer()
	for range b.N {
		dst := state.NewBackend(128, 0, 128, keySchema(b))
		declare(dst)
		err := dstl.Read(context.Background(), store, dstl.ReadOptions{}, []dstl.Handle{h}, 0, 128, func(c *dstl.Change) error {
			return dst.ApplyChange(c.KeyGroup, c.State, state.ChangeOp(c.Op), c.Key, c.Sub, c.Value)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplayWindows replays a window-like change log (5,000 keys, each
// update putting 6 map entries, 100 batches) into a fresh backend: what a
// changelog recovery does after loading the snapshot.
//
//	go test ./state -run '^$' -bench ReplayWindows -benchmem
func BenchmarkReplayWindows(b *testing.B) {
	store, src, w := changeLogged(b, "windows-0")
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
	b.ReportMetric(float64(len(h.Objects)), "objects")
	replayInto(b, store, h, func(dst *state.Backend) { state.NewMap[int64, benchWin](dst, "windows") })
}

// BenchmarkReplayValues replays a log of 40,000 new keys with 1 KiB values
// (job (a) of `eddy bench checkpoint`), 100 objects, into a fresh backend.
//
//	go test ./state -run '^$' -bench ReplayValues -benchmem
func BenchmarkReplayValues(b *testing.B) {
	store, src, w := changeLogged(b, "fill-0")
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
	replayInto(b, store, h, func(dst *state.Backend) { state.NewValue[benchPayload](dst, "values") })
}
