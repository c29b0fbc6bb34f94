package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/internal/demojob"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestKafkaDemo runs the Kafka demo against kfake twice, once interrupted
// and resumed: the committed totals are the same.
func TestKafkaDemo(t *testing.T) {
	digest := func(interrupt bool) (int64, string) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		brokers := c.ListenAddrs()
		cfg := demojob.Config{Seed: 3, Events: 100_000, Drivers: 50, Data: filepath.Join(t.TempDir(), "data"),
			CheckpointInterval: 20 * time.Millisecond, Parallelism: 2, EmitEvery: 10}
		ctx := context.Background()
		run := func(d time.Duration) error {
			env, _, err := kafkaDemoEnv(ctx, cfg, brokers, io.Discard, new(blob.Counter), eddy.LogOutput(io.Discard), eddy.Restarts(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return env.Run(rctx)
		}
		if interrupt {
			interrupted := 0
			for _, d := range []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond} {
				if err := run(d); err != nil {
					interrupted++
				}
			}
			if interrupted == 0 {
				t.Log("no run was interrupted")
			}
		}
		if err := run(time.Minute); err != nil {
			t.Fatal(err)
		}
		n, d, err := kafkaDemoDigest(ctx, brokers)
		if err != nil {
			t.Fatal(err)
		}
		return n, d
	}
	n1, d1 := digest(false)
	n2, d2 := digest(true)
	if n1 != 10_000 || n1 != n2 || d1 != d2 {
		t.Fatalf("uninterrupted: %d records, digest %s; interrupted: %d, %s (want 10000 records, equal digests)", n1, d1, n2, d2)
	}
	if got := splitBrokers(" a:1, b:2,"); len(got) != 2 || got[1] != "b:2" {
		t.Fatalf("splitBrokers: %q", got)
	}
}
