package runtime

import (
	"testing"
	"time"
)

func TestRestartDelay(t *testing.T) {
	for _, c := range []struct {
		first   time.Duration
		attempt int
		want    time.Duration
	}{
		{time.Second, 0, time.Second}, {time.Second, 1, 2 * time.Second}, {time.Second, 3, 8 * time.Second},
		{time.Second, 10, time.Minute}, {0, 5, 0}, {2 * time.Minute, 3, 2 * time.Minute},
	} {
		if got := restartDelay(c.first, c.attempt); got != c.want {
			t.Errorf("restartDelay(%v, %d) = %v, want %v", c.first, c.attempt, got, c.want)
		}
	}
}
