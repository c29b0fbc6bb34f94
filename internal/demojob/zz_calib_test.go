package demojob

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
)

func TestZZCalib(t *testing.T) {
	for _, ev := range []int64{100_000} {
		for _, rate := range []float64{0, 40_000} {
			for _, par := range []int{1, 3} {
				dir := t.TempDir()
				c := Config{Seed: 7, Events: ev, Drivers: 300, Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out"),
					CheckpointInterval: 20 * time.Millisecond, Parallelism: par, Rate: rate}
				st := time.Now()
				env := Env(c, eddy.Logger(io.Discard))
				if err := env.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				t.Logf("ev=%d rate=%v par=%d: %v ckpts=%d", ev, rate, par, time.Since(st), env.Stats().Checkpoints)
				st = time.Now()
				sameLines(t, committed(t, c.Out), expected(c))
				t.Logf("verify %v", time.Since(st))
			}
		}
	}
}
