package pebble

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPacerReservesAtItsRate: each transfer reserves its bytes' time at
// the rate after the transfers before it, so n transfers of b bytes end
// their reservations n·b/rate after the first began, whatever goroutine
// asked; a cancelled context ends a wait with its error.
func TestPacerReservesAtItsRate(t *testing.T) {
	p := &pacer{rate: 1 << 30} // 1 GiB/s: 1 MiB is 1/1024 s
	begin := time.Now()
	for range 8 {
		if err := p.wait(context.Background(), 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	want := 8 * time.Second / 1024
	if got := p.next.Sub(begin); got < want {
		t.Fatalf("8 transfers of 1 MiB at 1 GiB/s reserved until %v after the first, want at least %v", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	slow := &pacer{rate: 1} // a byte per second: the second waits a day
	if err := slow.wait(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a cancelled context: %v", err)
	}
	slow.wait(context.Background(), 86400)
	if err := slow.wait(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait behind a day's reservation with a cancelled context: %v", err)
	}
	var none *pacer
	if err := none.wait(context.Background(), 1<<40); err != nil {
		t.Fatal(err)
	}
}

// TestBackgroundUploadRate: a negative rate is a configuration error; a
// pool paces at the rate given, at the default without the option, and
// not at all with 0.
func TestBackgroundUploadRate(t *testing.T) {
	if _, err := NewPool(BackgroundUploadRate(-1)); err == nil {
		t.Fatal("NewPool(BackgroundUploadRate(-1)) succeeded")
	}
	p, err := NewPool(BackgroundUploadRate(64 << 20))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.uploads == nil || p.uploads.rate != 64<<20 {
		t.Fatalf("BackgroundUploadRate(64 MiB) gave pacer %+v", p.uploads)
	}
	for _, c := range []struct {
		opts []PoolOption
		rate float64
	}{{nil, DefaultBackgroundUploadRate}, {[]PoolOption{BackgroundUploadRate(0)}, 0}} {
		p, err := NewPool(c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		var rate float64
		if p.uploads != nil {
			rate = p.uploads.rate
		}
		p.Close()
		if rate != c.rate {
			t.Errorf("pool with %d options paces at %v bytes/s, want %v", len(c.opts), rate, c.rate)
		}
	}
}
