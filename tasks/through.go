package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/kafka"
	"github.com/eddyflow/eddy/internal/runtime"
)

// KeyBy partitions s by key across the job's tasks, where eddy.KeyBy
// partitions only within one task: use it when the key is not the one
// the input topic is partitioned by, so the records of one key, read by
// several tasks, meet in one task with that key's state.
//
// The records go through the job's internal topic for this edge,
// RepartitionTopic(t.Job, name), with as many partitions as the input
// topic: each task writes its records there, a record to the partition
// its key hashes to (Kafka's murmur2 of the key's bytes, as eddy.KeyBy
// serializes them), and task t reads partition t of it. KeyBy creates the
// topic if it is missing and fails if it exists with another partition
// count.
//
// Exactly once: the writing side is a Kafka sink of the task (its own
// transactional ids, SinkName(t.Job, t.ID, topic)), whose records of a
// checkpoint are kept in that checkpoint before they are produced and
// committed in one transaction once the checkpoint is complete; the
// reading side is a Kafka source whose positions are in the task's
// checkpoints and which reads read_committed. A crash between a
// checkpoint and its transaction loses nothing (the restore commits what
// the checkpoint holds, once), and a task that moves hands its records
// over like its other output. Records cross the edge when the writing
// task's checkpoint commits, so the edge adds up to a checkpoint interval
// of latency, and every record of an interval is held in its checkpoint
// (kafka.MaxBufferedBytes bounds that).
//
// Values cross the topic as serde bytes with the schema header. Event
// time does not cross it by itself: pass eddy.Watermarks (and other
// source options) in opts to assign timestamps on the reading side.
// name names the edge; it must be unique in the job, stable across its
// versions, and a valid part of a Kafka topic name.
func KeyBy[K comparable, T any](s *eddy.Stream[T], t Task, name string, key func(*T) K, opts ...eddy.SourceOption) (*eddy.KeyedStream[K, T], error) {
	if err := checkEdgeName(name); err != nil {
		return nil, err
	}
	enc, err := runtime.KeyEncoder[K]()
	if err != nil {
		return nil, fmt.Errorf("tasks: edge %q: %w", name, err)
	}
	topic := RepartitionTopic(t.Job, name)
	if err := ensureInternalTopic(t.Brokers, topic, t.Partitions); err != nil {
		return nil, err
	}
	// Kafka's default hasher of keyed records, named here so that every
	// writer of the topic places a key alike whatever the client's
	// defaults become.
	partitioner := kafka.ClientOpts(kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	eddy.ToSink(s, kafka.Sink[T](topic, kafka.Brokers(t.Brokers...), kafka.SinkName(t.SinkName(topic)), kafka.SchemaHeader(), partitioner,
		kafka.Key(func(v *T) []byte {
			k := key(v)
			return enc(nil, &k)
		})), eddy.Named(name+".out"))
	in := eddy.FromSource(s.Env(), kafka.Source[T](kafka.Brokers(t.Brokers...), kafka.Topics(topic), kafka.Partitions(t.ID)), append([]eddy.SourceOption{eddy.Named(name + ".in")}, opts...)...)
	return eddy.KeyBy(in, key), nil
}

// RepartitionTopic is the name of the job's internal topic of the edge
// name (see KeyBy).
func RepartitionTopic(job, name string) string { return job + "-" + name + "-repartition" }

// checkEdgeName refuses names that cannot be part of a Kafka topic name.
func checkEdgeName(name string) error {
	if name == "" {
		return errors.New("tasks: an edge between tasks needs a name")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-", r)) {
			return fmt.Errorf("tasks: edge name %q: %q cannot be part of a Kafka topic name (letters, digits, '.', '_' and '-' can)", name, r)
		}
	}
	return nil
}

// ensured holds the internal topics this process found or created with
// the right partition count, so that each task's build does not ask the
// brokers again.
var ensured sync.Map // brokers + "\x00" + topic → struct{}

// ensureInternalTopic creates topic with partitions partitions unless it
// exists, and fails if it exists with another count.
func ensureInternalTopic(brokers []string, topic string, partitions int32) error {
	if partitions < 1 {
		return fmt.Errorf("tasks: internal topic %q: no partition count (a Task made by Run has one)", topic)
	}
	id := strings.Join(brokers, ",") + "\x00" + topic
	if _, ok := ensured.Load(id); ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafka.EnsureTopics(ctx, brokers, partitions, topic); err != nil {
		return fmt.Errorf("tasks: internal topic %q: %w", topic, err)
	}
	n, err := kafka.PartitionCount(ctx, topic, kafka.Brokers(brokers...))
	if err != nil {
		return fmt.Errorf("tasks: internal topic %q after creating it: %w", topic, err)
	}
	if n != partitions {
		return fmt.Errorf("tasks: internal topic %q has %d partitions, the input topic %d: the job's tasks could not each read one (delete the topic, or give the edge another name)", topic, n, partitions)
	}
	ensured.Store(id, struct{}{})
	return nil
}
