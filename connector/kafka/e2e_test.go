package kafka_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/kafka"
)

// countJob builds Kafka(in) → KeyBy → count → Kafka(out).
func countJob(t testing.TB, addrs []string, data string, guarantee kafka.Guarantee, opts ...eddy.Option) *eddy.Env {
	base := []eddy.Option{eddy.Parallelism(2), eddy.Restarts(0, 0), eddy.LogOutput(testLog{t})}
	if data != "" {
		base = append(base, eddy.Checkpoints(data, 20*time.Millisecond))
	}
	env := eddy.New(append(base, opts...)...)
	events := eddy.FromSource(env, kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("in"), kafka.Bounded(), kafka.MaxPartitions(8)))
	byKey := eddy.KeyBy(events, func(e *Event) string { return e.Key })
	counts := eddy.Process[string, Event, Count](byKey, &countFn{}, eddy.Named("count"))
	eddy.ToSink(counts, kafka.Sink[Count]("out", kafka.Brokers(addrs...), kafka.DeliveryGuarantee(guarantee),
		kafka.Key(func(c *Count) []byte { return []byte(c.Key) })))
	return env
}

func TestEndToEndUninterrupted(t *testing.T) {
	c := newCluster(t, 4, "in", "out")
	addrs := c.ListenAddrs()
	const n, keys = 5000, 50
	produceEvents(t, addrs, "in", 0, n, keys)
	env := countJob(t, addrs, filepath.Join(t.TempDir(), "data"), kafka.ExactlyOnce)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := env.Run(ctx); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, decodeCounts(t, readCommitted(t, addrs, "out")), n, keys)
}

// TestEndToEndExactlyOnceWithCancels cancels the job at random moments —
// while reading, checkpointing and committing — and resumes it each time;
// the output holds every expected record exactly once.
func TestEndToEndExactlyOnceWithCancels(t *testing.T) {
	c := newCluster(t, 4, "in", "out")
	addrs := c.ListenAddrs()
	const n, keys = 60000, 100
	produceEvents(t, addrs, "in", 0, n, keys)
	data := filepath.Join(t.TempDir(), "data")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	cancels := 0
	deadline := time.Now().Add(45 * time.Second)
	for run := 0; ; run++ {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not finish after %d runs", run)
		}
		env := countJob(t, addrs, data, kafka.ExactlyOnce)
		d := time.Duration(20+rng.IntN(150)) * time.Millisecond
		if run >= 10 {
			d = time.Minute // let it finish
		}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		err := env.Run(ctx)
		cancel()
		if err == nil {
			t.Logf("finished after %d cancelled runs", cancels)
			break
		}
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Fatalf("run %d: %v", run, err)
		}
		cancels++
	}
	if cancels < 3 {
		t.Logf("only %d runs were cancelled before the job finished", cancels)
	}
	checkCounts(t, decodeCounts(t, readCommitted(t, addrs, "out")), n, keys)
}
