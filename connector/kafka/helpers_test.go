package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Event is an input record.
type Event struct {
	Key string `proto:"1" json:"key"`
	Seq int64  `proto:"2" json:"seq"`
}

// Count is an output record: the n-th event of its key.
type Count struct {
	Key string `proto:"1" json:"key"`
	Seq int64  `proto:"2" json:"seq"`
	N   int64  `proto:"3" json:"n"`
}

// countFn numbers each key's events in keyed state.
type countFn struct{ n *state.Value[int64] }

func (f *countFn) Open(ctx *eddy.OpenContext) error {
	var err error
	f.n, err = state.NewValue[int64](ctx.State, "n")
	return err
}

func (f *countFn) Process(ctx *eddy.Context[string, Count], e *Event) error {
	n, _ := f.n.Get()
	n++
	f.n.Update(n)
	ctx.Emit(Count{Key: e.Key, Seq: e.Seq, N: n})
	return nil
}

func newCluster(t testing.TB, partitions int32, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func client(t testing.TB, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceEvents writes n events with keys "k0".."k<keys-1>" to topic, keyed,
// protobuf-encoded.
func produceEvents(t testing.TB, addrs []string, topic string, from, n int64, keys int) {
	t.Helper()
	cl := client(t, addrs, kgo.DefaultProduceTopic(topic))
	codec := serde.MustFor[Event]()
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		e := Event{Key: fmt.Sprintf("k%d", i%int64(keys)), Seq: i}
		v, err := codec.Append(nil, &e)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Key: []byte(e.Key), Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readCommitted returns every record of topic a read_committed consumer
// sees, up to the partitions' last stable offsets.
func readCommitted(t testing.TB, addrs []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, addrs))
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl := client(t, addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))
	var out []*kgo.Record
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: timed out with partitions %v unread", topic, want)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return out
}

func decodeCounts(t testing.TB, recs []*kgo.Record) []Count {
	t.Helper()
	codec := serde.MustFor[Count]()
	out := make([]Count, len(recs))
	for i, r := range recs {
		if err := codec.Decode(r.Value, &out[i]); err != nil {
			t.Fatalf("output record %d: %v", i, err)
		}
	}
	return out
}

// checkCounts checks that counts holds, for each of events 0..n-1 with keys
// i % keys, exactly the record (key, seq, n) an uninterrupted run writes.
func checkCounts(t testing.TB, counts []Count, n int64, keys int) {
	t.Helper()
	want := map[Count]int{}
	perKey := map[string]int64{}
	for i := int64(0); i < n; i++ {
		k := fmt.Sprintf("k%d", i%int64(keys))
		perKey[k]++
		want[Count{Key: k, Seq: i, N: perKey[k]}]++
	}
	got := map[Count]int{}
	for _, c := range counts {
		got[c]++
	}
	bad := 0
	for c, g := range got {
		if want[c] != g {
			if bad < 10 {
				t.Errorf("record %+v written %d times, want %d", c, g, want[c])
			}
			bad++
		}
	}
	for c, w := range want {
		if got[c] == 0 {
			if bad < 10 {
				t.Errorf("record %+v missing (want %d)", c, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d wrong records of %d (want %d)", bad, len(counts), n)
	}
}

type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Helper()
	l.t.Log(string(p))
	return len(p), nil
}

// testCtx bounds a test's calls: a hang fails the test with its own
// deadline instead of holding the package until go test's timeout.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
