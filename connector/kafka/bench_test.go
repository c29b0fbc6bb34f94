package kafka_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/kafka"
)

// BenchmarkKafkaKeyedCount runs Kafka → KeyBy → count → Kafka against an
// in-process kfake broker, over the same pre-produced input (200,000 events,
// 1,000 keys, 4 partitions), once at-least-once and once exactly-once per
// iteration (interleaved, so both see the same machine load). It reports
// records/s of each (alo-rec/s, eos-rec/s) and their ratio (eos/alo), from
// the summed wall time of each guarantee's jobs. Checkpoints every 100 ms,
// parallelism 2. One op = one job of each.
//
//	go test ./connector/kafka -run '^$' -bench KafkaKeyedCount -benchtime 5x
func BenchmarkKafkaKeyedCount(b *testing.B) {
	const n, keys = 200_000, 1000
	c := newCluster(b, 4, "in")
	addrs := c.ListenAddrs()
	produceEvents(b, addrs, "in", 0, n, keys)
	busy := map[kafka.Guarantee]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, g := range []kafka.Guarantee{kafka.AtLeastOnce, kafka.ExactlyOnce} {
			b.StopTimer()
			out := fmt.Sprintf("out-%s-%d", g, i)
			if err := kafka.EnsureTopics(context.Background(), addrs, 4, out); err != nil {
				b.Fatal(err)
			}
			env := eddy.New(eddy.Parallelism(2), eddy.Restarts(0, 0),
				eddy.Checkpoints(filepath.Join(b.TempDir(), "data"), 100*time.Millisecond), eddy.LogOutput(testLog{b}))
			events := eddy.FromSource(env, kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("in"), kafka.Bounded(), kafka.MaxPartitions(4)))
			byKey := eddy.KeyBy(events, func(e *Event) string { return e.Key })
			counts := eddy.Process[string, Event, Count](byKey, &countFn{}, eddy.Named("count"))
			eddy.ToSink(counts, kafka.Sink[Count](out, kafka.Brokers(addrs...), kafka.DeliveryGuarantee(g),
				kafka.Key(func(c *Count) []byte { return []byte(c.Key) })))
			b.StartTimer()
			start := time.Now()
			if err := env.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			busy[g] += time.Since(start)
			if got := env.Stats().RecordsOut; got != n {
				b.Fatalf("%s: wrote %d records, want %d", g, got, n)
			}
		}
	}
	alo := float64(n) * float64(b.N) / busy[kafka.AtLeastOnce].Seconds()
	eos := float64(n) * float64(b.N) / busy[kafka.ExactlyOnce].Seconds()
	b.ReportMetric(alo, "alo-rec/s")
	b.ReportMetric(eos, "eos-rec/s")
	b.ReportMetric(eos/alo, "eos/alo")
}
