package faulty

import (
	"math"
	"testing"
	"time"
)

// The inverse CDF hits the three percentiles exactly, is monotonic and
// is truncated at 10·p999.
func TestLongTailQuantileExact(t *testing.T) {
	d := LongTail(20*time.Millisecond, 200*time.Millisecond, 3*time.Second).(*longTail)
	for _, c := range []struct {
		u    float64
		want time.Duration
	}{{0.5, 20 * time.Millisecond}, {0.99, 200 * time.Millisecond}, {0.999, 3 * time.Second}} {
		got := d.quantile(c.u)
		if math.Abs(float64(got-c.want)) > 1e-6*float64(c.want) {
			t.Errorf("quantile(%v) = %v, want %v", c.u, got, c.want)
		}
	}
	if got := d.quantile(0); got != 0 {
		t.Errorf("quantile(0) = %v, want 0", got)
	}
	if got, want := d.quantile(math.Nextafter(1, 0)), 30*time.Second; got != want {
		t.Errorf("quantile(1-ε) = %v, want the cap %v", got, want)
	}
	prev := time.Duration(0)
	for i := 1; i < 100000; i++ {
		q := d.quantile(float64(i) / 100000)
		if q < prev {
			t.Fatalf("quantile not monotonic at %d: %v < %v", i, q, prev)
		}
		prev = q
	}
}
