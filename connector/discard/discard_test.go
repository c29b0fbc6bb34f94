package discard

import (
	"context"
	"sync"
	"testing"

	"github.com/eddyflow/eddy/internal/race"

	"github.com/eddyflow/eddy"
)

func TestCountsAcrossWriters(t *testing.T) {
	ctx := context.Background()
	var s eddy.Sink[int] = Sink[int]()
	c := s.(*Counter[int])
	if err := s.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for sub := range 4 {
		w, err := s.OpenWriter(ctx, sub, 4)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := range 10_000 {
				w.Write(&i)
				if i%1000 == 0 {
					if h, err := w.PreCommit(uint64(i)); h != nil || err != nil {
						t.Error(h, err)
					}
				}
			}
			w.Close()
		})
	}
	wg.Wait()
	if err := s.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := c.Count(); n != 40_000 {
		t.Fatalf("count %d, want 40000", n)
	}
	if s.Name() != "discard" {
		t.Fatal(s.Name())
	}
}

func TestWriteAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts differ under the race detector")
	}
	c := New[string]()
	w, _ := c.OpenWriter(context.Background(), 0, 1)
	rec := "x"
	if a := testing.AllocsPerRun(1000, func() { w.Write(&rec) }); a != 0 {
		t.Fatalf("%v allocs per write", a)
	}
	if c.Count() != 1001 {
		t.Fatalf("count %d", c.Count())
	}
}
