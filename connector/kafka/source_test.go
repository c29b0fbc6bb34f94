package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/connector/discard"
	"github.com/eddyflow/eddy/connector/kafka"
	"github.com/eddyflow/eddy/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// readSplit reads a split until it has n records or end/timeout.
func readSplit(t *testing.T, r eddy.SplitReader[Event], n int) ([]Event, eddy.ReadStatus) {
	t.Helper()
	var out []Event
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		var e Event
		st, err := r.Next(&e)
		if err != nil {
			t.Fatal(err)
		}
		switch st {
		case eddy.Record:
			out = append(out, e)
		case eddy.End:
			return out, st
		case eddy.Idle:
			if time.Now().After(deadline) {
				t.Fatalf("split idle after %d of %d records", len(out), n)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	return out, eddy.Record
}

func TestSourcePositionsResume(t *testing.T) {
	c := newCluster(t, 1, "in")
	addrs := c.ListenAddrs()
	produceEvents(t, addrs, "in", 0, 100, 3)
	ctx := testCtx(t)
	src := kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("in"), kafka.MaxPartitions(2))
	if src.Splits() != 2 {
		t.Fatalf("Splits = %d", src.Splits())
	}
	r, err := src.OpenSplit(ctx, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := readSplit(t, r, 40)
	pos := r.Position()
	r.Close()
	r, err = src.OpenSplit(ctx, 0, pos)
	if err != nil {
		t.Fatal(err)
	}
	rest, _ := readSplit(t, r, 60)
	r.Close()
	for i, e := range append(got, rest...) {
		if e.Seq != int64(i) {
			t.Fatalf("record %d has seq %d", i, e.Seq)
		}
	}
}

// TestSourceReadCommitted: records of aborted transactions are not read,
// and the source stops behind an open one.
func TestSourceReadCommitted(t *testing.T) {
	c := newCluster(t, 1, "in")
	addrs := c.ListenAddrs()
	ctx := testCtx(t)
	codec := serde.MustFor[Event]()
	txn := client(t, addrs, kgo.TransactionalID("writer"), kgo.DefaultProduceTopic("in"))
	write := func(seq int64, commit bool) {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v, _ := codec.Append(nil, &Event{Key: "k", Seq: seq})
		if err := txn.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	write(0, true)
	write(-1, false)
	write(1, true)
	src := kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("in"), kafka.MaxPartitions(1), kafka.Bounded())
	r, err := src.OpenSplit(ctx, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, st := readSplit(t, r, 10)
	if st != eddy.End || len(got) != 2 || got[0].Seq != 0 || got[1].Seq != 1 {
		t.Fatalf("read %v, %v; want seqs 0 and 1, then End", got, st)
	}
}

func TestSourceStartOptions(t *testing.T) {
	c := newCluster(t, 1, "in")
	addrs := c.ListenAddrs()
	ctx := testCtx(t)
	produceEvents(t, addrs, "in", 0, 10, 1)
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	produceEvents(t, addrs, "in", 10, 10, 1)
	adm := kadm.NewClient(client(t, addrs))
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "in", Partition: 0, At: 15, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "g", os); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		opt   kafka.SourceOpt
		first int64
	}{
		{"earliest", kafka.StartEarliest(), 0},
		{"at", kafka.StartAt(mid), 10},
		{"committed", kafka.StartCommitted("g"), 15},
		{"committed-missing", kafka.StartCommitted("nobody"), 0},
		{"latest", kafka.StartLatest(), 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("in"), kafka.MaxPartitions(1), tc.opt)
			r, err := src.OpenSplit(ctx, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			pos := r.Position() // pinned before any record
			if tc.first == 20 {
				produceEvents(t, addrs, "in", 20, 1, 1)
			}
			got, _ := readSplit(t, r, 1)
			if got[0].Seq != tc.first {
				t.Fatalf("first record %d, want %d", got[0].Seq, tc.first)
			}
			r2, err := src.OpenSplit(ctx, 0, pos)
			if err == nil {
				t.Fatal("the same split opened twice")
			}
			_ = r2
		})
	}
}

// TestSourcePicksUpNewPartitions: a running job starts reading partitions
// added to its topic.
func TestSourcePicksUpNewPartitions(t *testing.T) {
	c := newCluster(t, 1, "in")
	addrs := c.ListenAddrs()
	produceEvents(t, addrs, "in", 0, 10, 1)
	counter := discard.New[Event]()
	env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(testLog{t}))
	events := eddy.FromSource(env, kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("in"),
		kafka.MaxPartitions(4), kafka.MetadataInterval(50*time.Millisecond)))
	eddy.ToSink(events, counter)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Run(ctx) }()
	waitFor := func(n int64) {
		for counter.Count() < n {
			if ctx.Err() != nil {
				t.Fatalf("read %d records, want %d", counter.Count(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(10)
	adm := kadm.NewClient(client(t, addrs))
	if _, err := adm.CreatePartitions(ctx, 3, "in"); err != nil {
		t.Fatal(err)
	}
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	v, _ := serde.MustFor[Event]().Append(nil, &Event{Key: "new", Seq: 99})
	for p := int32(1); p < 3; p++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: p, Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(12)
	cancel()
	<-done
}

func TestSourceTooManyPartitions(t *testing.T) {
	c := newCluster(t, 5, "in")
	src := kafka.Source[Event](kafka.Brokers(c.ListenAddrs()...), kafka.Topics("in"), kafka.MaxPartitions(4))
	_, err := src.OpenSplit(context.Background(), 0, nil)
	if err == nil || !strings.Contains(err.Error(), "MaxPartitions") {
		t.Fatalf("want a MaxPartitions error, got %v", err)
	}
}

// badJob reads "in" (bounded) into a discarding sink.
func badJob(t *testing.T, addrs []string, opts ...kafka.SourceOpt) (*eddy.Env, *discard.Counter[Event]) {
	counter := discard.New[Event]()
	env := eddy.New(eddy.Parallelism(1), eddy.Restarts(0, 0), eddy.LogOutput(testLog{t}))
	base := []kafka.SourceOpt{kafka.Brokers(addrs...), kafka.Topics("in"), kafka.Bounded(), kafka.MaxPartitions(2)}
	events := eddy.FromSource(env, kafka.Source[Event](append(base, opts...)...))
	eddy.ToSink(events, counter)
	return env, counter
}

func produceRaw(t *testing.T, addrs []string, topic string, recs ...*kgo.Record) {
	t.Helper()
	cl := client(t, addrs, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestBadRecordFailsTheJob(t *testing.T) {
	c := newCluster(t, 2, "in")
	addrs := c.ListenAddrs()
	produceRaw(t, addrs, "in", &kgo.Record{Partition: 1, Value: []byte{0xff, 0xff, 0xff}})
	produceEvents(t, addrs, "in", 0, 5, 1)
	env, _ := badJob(t, addrs)
	err := env.Run(testCtx(t))
	if err == nil {
		t.Fatal("the job ran through an undecodable record")
	}
	if !strings.Contains(err.Error(), `topic "in" partition 1 offset 0`) {
		t.Fatalf("the error does not name topic, partition and offset: %v", err)
	}
	t.Logf("job error: %v", err)
}

func TestBadRecordDeadLetter(t *testing.T) {
	c := newCluster(t, 2, "in", "dlq")
	addrs := c.ListenAddrs()
	produceRaw(t, addrs, "in", &kgo.Record{Partition: 1, Key: []byte("bad"), Value: []byte{0xff, 0xff, 0xff}})
	produceEvents(t, addrs, "in", 0, 10, 1)

	t.Run("func", func(t *testing.T) {
		var mu sync.Mutex
		var dead []string
		env, counter := badJob(t, addrs, kafka.DeadLetter(func(rec *kgo.Record, err error) error {
			mu.Lock()
			defer mu.Unlock()
			dead = append(dead, fmt.Sprintf("%s/%d/%d", rec.Topic, rec.Partition, rec.Offset))
			return nil
		}))
		if err := env.Run(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if counter.Count() != 10 || !slices.Equal(dead, []string{"in/1/0"}) {
			t.Fatalf("good %d (want 10), dead %v", counter.Count(), dead)
		}
	})
	t.Run("topic", func(t *testing.T) {
		env, counter := badJob(t, addrs, kafka.DeadLetterTopic("dlq"))
		if err := env.Run(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if counter.Count() != 10 {
			t.Fatalf("good %d, want 10", counter.Count())
		}
		dead := readCommitted(t, addrs, "dlq")
		if len(dead) != 1 || string(dead[0].Key) != "bad" {
			t.Fatalf("dead-letter topic holds %v", dead)
		}
		hdr := map[string]string{}
		for _, h := range dead[0].Headers {
			hdr[h.Key] = string(h.Value)
		}
		if hdr["eddy-source"] != "in/1/0" || !strings.Contains(hdr["eddy-error"], "cannot decode") {
			t.Fatalf("dead-letter headers %v", hdr)
		}
	})
}

// EventV2 adds a field: readable by Event as it is.
type EventV2 struct {
	Key  string `proto:"1"`
	Seq  int64  `proto:"2"`
	Note string `proto:"3"`
}

// EventBad changes the type of field 2: not readable by Event.
type EventBad struct {
	Key string `proto:"1"`
	Seq string `proto:"2"`
}

func TestSchemaFingerprint(t *testing.T) {
	c := newCluster(t, 1, "in")
	addrs := c.ListenAddrs()
	ctx := testCtx(t)
	// Write with the sink: the header carries EventV2's fingerprint.
	s := kafka.Sink[EventV2]("in", kafka.Brokers(addrs...), kafka.SchemaHeader())
	if err := s.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	w, _ := s.OpenWriter(ctx, 0, 1)
	w.Write(&EventV2{Key: "a", Seq: 1, Note: "x"})
	h, _ := w.PreCommit(1)
	if err := s.Commit(ctx, [][]byte{h}); err != nil {
		t.Fatal(err)
	}
	v2, _ := serde.SchemaOf[EventV2]()
	bad, _ := serde.SchemaOf[EventBad]()
	read := func(dec kafka.Decoder[Event]) (Event, error) {
		src := kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("in"), kafka.MaxPartitions(1), kafka.Bounded(), kafka.WithDecoder(dec))
		r, err := src.OpenSplit(ctx, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var e Event
		for {
			st, err := r.Next(&e)
			if err != nil || st == eddy.Record {
				return e, err
			}
			if st == eddy.End {
				t.Fatal("no record")
			}
			time.Sleep(time.Millisecond)
		}
	}
	if _, err := read(kafka.Values[Event]()); err == nil || !strings.Contains(err.Error(), "neither the schema of") {
		t.Fatalf("unknown fingerprint: want a rejection, got %v", err)
	} else {
		t.Logf("unknown: %v", err)
	}
	if _, err := read(kafka.Values[Event](bad)); err == nil || !strings.Contains(err.Error(), "neither") {
		t.Fatalf("a different known schema must not help: %v", err)
	}
	if e, err := read(kafka.Values[Event](v2)); err != nil || e.Seq != 1 {
		t.Fatalf("known compatible schema: %v, %v", e, err)
	}
	// A reader that knows EventBad's schema and gets its fingerprint says why
	// it cannot read it.
	sb := kafka.Sink[EventBad]("in", kafka.Brokers(addrs...), kafka.SchemaHeader(), kafka.SinkName("bad"))
	if err := sb.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	wb, _ := sb.OpenWriter(ctx, 0, 1)
	wb.Write(&EventBad{Key: "b", Seq: "x"})
	hb, _ := wb.PreCommit(1)
	if err := sb.Commit(ctx, [][]byte{hb}); err != nil {
		t.Fatal(err)
	}
	src := kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("in"), kafka.MaxPartitions(1), kafka.Bounded(),
		kafka.WithDecoder(kafka.Values[Event](v2, bad)))
	r, err := src.OpenSplit(ctx, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var e Event
	if _, err := r.Next(&e); err != nil {
		// the first record may not be there yet; the loop below settles it
	}
	for {
		st, err := r.Next(&e)
		if err != nil {
			if !strings.Contains(err.Error(), "cannot read as it is") {
				t.Fatalf("want the incompatibility reasons, got %v", err)
			}
			t.Logf("incompatible: %v", err)
			break
		}
		if st == eddy.End {
			t.Fatal("the incompatible record was read")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestUnreachableBroker(t *testing.T) {
	addrs := []string{"127.0.0.1:1"} // nothing listens there
	start := time.Now()
	src := kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("in"), kafka.ConnectTimeout(time.Second))
	_, err := src.OpenSplit(context.Background(), 0, nil)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "within 1s") {
		t.Fatalf("source: want an unreachable-broker error naming the address, got %v", err)
	}
	t.Logf("source: %v (%v)", err, time.Since(start).Round(time.Millisecond))
	s := kafka.Sink[Count]("out", kafka.Brokers(addrs...), kafka.ConnectTimeout(time.Second))
	err = s.Recover(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("sink: want an unreachable-broker error, got %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
	// The whole job fails the same way.
	env := eddy.New(eddy.Restarts(0, 0), eddy.LogOutput(testLog{t}))
	eddy.ToSink(eddy.FromSource(env, src), discard.Sink[Event]())
	if err := env.Run(testCtx(t)); err == nil || !strings.Contains(err.Error(), "no answer from brokers 127.0.0.1:1") {
		t.Fatalf("job: %v", err)
	}
}

func TestMissingTopic(t *testing.T) {
	c := newCluster(t, 1, "in")
	addrs := c.ListenAddrs()
	src := kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("nope"))
	_, err := src.OpenSplit(context.Background(), 0, nil)
	if err == nil || !strings.Contains(err.Error(), `topic "nope" does not exist`) || !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("source: %v", err)
	}
	s := kafka.Sink[Count]("gone", kafka.Brokers(addrs...))
	if err := s.Recover(context.Background(), nil); err == nil || !strings.Contains(err.Error(), `topic "gone" does not exist`) {
		t.Fatalf("sink: %v", err)
	}
	// Missing dead-letter topic, too.
	src = kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("in"), kafka.DeadLetterTopic("dlq-nope"))
	if _, err := src.OpenSplit(context.Background(), 0, nil); err == nil || !strings.Contains(err.Error(), `"dlq-nope"`) {
		t.Fatalf("dead-letter topic: %v", err)
	}
}

func TestAuthorizationFailures(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "secret"),
		kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", "admin", "admin"),
		kfake.User("PLAIN", "app", "pw",
			kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "in", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAll, Allow: true},
			kfake.ACL{Resource: kmsg.ACLResourceTypeCluster, Name: "kafka-cluster", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationDescribe, Allow: true},
		))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	as := func(user, pass string) kafka.Opt {
		return kafka.ClientOpts(kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	}
	ctx := testCtx(t)
	src := kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("secret"), as("app", "pw"), kafka.ConnectTimeout(3*time.Second))
	_, err = src.OpenSplit(ctx, 0, nil)
	if err == nil || !strings.Contains(err.Error(), `not authorized to use topic "secret"`) {
		t.Fatalf("topic ACL: %v", err)
	}
	t.Logf("topic ACL: %v", err)
	src = kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("in"), as("app", "wrong"), kafka.ConnectTimeout(3*time.Second))
	_, err = src.OpenSplit(ctx, 0, nil)
	if err == nil || !(strings.Contains(err.Error(), "authentication failed") || strings.Contains(err.Error(), "closed the connection")) {
		t.Fatalf("bad password: %v", err)
	}
	t.Logf("bad password: %v", err)
	// Writing "in" exactly once needs a transactional id the user may not use.
	s := kafka.Sink[Event]("in", kafka.Brokers(addrs...), as("app", "pw"), kafka.ConnectTimeout(3*time.Second))
	if err := s.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.OpenWriter(ctx, 0, 1)
	if err == nil || !strings.Contains(err.Error(), `not authorized to use transactional id "eddy-in-0"`) {
		t.Fatalf("transactional id ACL: %v", err)
	}
	t.Logf("transactional id ACL: %v", err)
}

var _ = filepath.Join

// TestCommitGroup: the positions of the last checkpoint are committed to
// the monitoring group, and StartCommitted starts from them.
func TestCommitGroup(t *testing.T) {
	c := newCluster(t, 2, "in")
	addrs := c.ListenAddrs()
	produceEvents(t, addrs, "in", 0, 100, 10)
	env, counter := badJob(t, addrs, kafka.CommitGroup("mon"))
	if err := env.Run(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if counter.Count() != 100 {
		t.Fatalf("read %d", counter.Count())
	}
	adm := kadm.NewClient(client(t, addrs))
	ctx := testCtx(t)
	got, err := adm.FetchOffsets(ctx, "mon")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, "in")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if c, ok := got.Lookup("in", o.Partition); !ok || c.At != o.Offset {
			t.Errorf("partition %d: committed %v, end %d", o.Partition, c.At, o.Offset)
		}
	})
	// A new job starting from the group reads only what came after.
	produceEvents(t, addrs, "in", 100, 7, 10)
	env, counter = badJob(t, addrs, kafka.StartCommitted("mon"))
	if err := env.Run(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if counter.Count() != 7 {
		t.Fatalf("read %d records after the committed offsets, want 7", counter.Count())
	}
}

func TestTypedOptionMismatchPanics(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "option Key") {
			t.Fatalf("want a panic naming the option, got %v", r)
		}
	}()
	kafka.Sink[Count]("out", kafka.Key(func(e *Event) []byte { return nil }))
}

// TestSourceLag: a split reader reports the records of its partition it
// has not returned yet (high watermark minus position), following the
// records it returns and those produced later.
func TestSourceLag(t *testing.T) {
	c := newCluster(t, 1, "in")
	addrs := c.ListenAddrs()
	ctx := testCtx(t)
	produceEvents(t, addrs, "in", 0, 20, 1)
	src := kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("in"), kafka.MaxPartitions(1), kafka.StartEarliest())
	r, err := src.OpenSplit(ctx, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	lagger, ok := r.(connector.Lagger)
	if !ok {
		t.Fatalf("the Kafka split reader %T is no connector.Lagger", r)
	}
	readSplit(t, r, 5)
	if n, known := lagger.Lag(); !known || n != 15 {
		t.Fatalf("Lag after 5 of 20 records = %d, %v; want 15", n, known)
	}
	produceEvents(t, addrs, "in", 20, 10, 1)
	readSplit(t, r, 15)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The high watermark is learnt from fetches, which follow reads.
		if n, known := lagger.Lag(); known && n == 10 {
			break
		}
		if time.Now().After(deadline) {
			n, known := lagger.Lag()
			t.Fatalf("Lag after 20 of 30 records = %d, %v; want 10", n, known)
		}
		time.Sleep(5 * time.Millisecond)
	}
	readSplit(t, r, 10)
	if n, known := lagger.Lag(); !known || n != 0 {
		t.Fatalf("Lag after every record = %d, %v; want 0", n, known)
	}
}

// TestSourcePartitions: a source limited to some partitions has a split
// per listed partition and reads exactly their records, none of the
// others, beyond MaxPartitions too.
func TestSourcePartitions(t *testing.T) {
	c := newCluster(t, 6, "in")
	addrs := c.ListenAddrs()
	produceEvents(t, addrs, "in", 0, 600, 40)
	// Where each event went, as a consumer of the whole topic sees it.
	want := map[int32]map[int64]bool{}
	for _, r := range readCommitted(t, addrs, "in") {
		var e Event
		if err := serde.MustFor[Event]().Decode(r.Value, &e); err != nil {
			t.Fatal(err)
		}
		if want[r.Partition] == nil {
			want[r.Partition] = map[int64]bool{}
		}
		want[r.Partition][e.Seq] = true
	}
	src := kafka.Source[Event](kafka.Brokers(addrs...), kafka.Topics("in"), kafka.Partitions(5, 1), kafka.MaxPartitions(2), kafka.Bounded())
	if src.Splits() != 2 {
		t.Fatalf("Splits = %d, want 2", src.Splits())
	}
	for split, p := range []int32{5, 1} {
		r, err := src.OpenSplit(testCtx(t), split, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, st := readSplit(t, r, len(want[p])+1) // to the end of the bounded partition
		r.Close()
		if st != eddy.End {
			t.Fatalf("split %d (partition %d) did not end after %d records", split, p, len(got))
		}
		for _, e := range got {
			if !want[p][e.Seq] {
				t.Fatalf("split %d (partition %d) read event %d, which is not in that partition", split, p, e.Seq)
			}
			delete(want[p], e.Seq)
		}
		if len(want[p]) != 0 {
			t.Fatalf("split %d (partition %d): %d events not read", split, p, len(want[p]))
		}
	}
	if _, err := src.OpenSplit(testCtx(t), 2, nil); err == nil {
		t.Error("split 2 of a source of two partitions opened")
	}
}
