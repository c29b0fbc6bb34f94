package parallel

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestForEach: every index runs once, never more than conc at a time, and
// the first error stops the rest and is returned.
func TestForEach(t *testing.T) {
	var running, most, sum atomic.Int64
	err := ForEach(context.Background(), 100, 3, func(ctx context.Context, i int) error {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		sum.Add(int64(i))
		running.Add(-1)
		return nil
	})
	if err != nil || sum.Load() != 4950 || most.Load() > 3 {
		t.Fatalf("err %v, sum %d (want 4950), most at once %d (want at most 3)", err, sum.Load(), most.Load())
	}
	boom := errors.New("boom")
	var ran atomic.Int64
	err = ForEach(context.Background(), 1000, 1, func(ctx context.Context, i int) error {
		ran.Add(1)
		if i == 5 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || ran.Load() != 6 {
		t.Fatalf("err %v after %d calls, want boom after 6", err, ran.Load())
	}
}
