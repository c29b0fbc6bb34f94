package kafka

import (
	"fmt"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Opt configures both sources and sinks: where the brokers are and how to
// talk to them.
type Opt interface {
	SourceOpt
	SinkOpt
}

// SourceOpt configures a Source.
type SourceOpt interface{ applySource(*sourceConfig) }

// SinkOpt configures a Sink.
type SinkOpt interface{ applySink(*sinkConfig) }

// common is the part of the configuration both sides share.
type common struct {
	brokers        []string
	clientOpts     []kgo.Opt
	connectTimeout time.Duration
}

func defaultCommon() common {
	return common{brokers: []string{"localhost:9092"}, connectTimeout: 10 * time.Second}
}

type commonOpt func(*common)

func (o commonOpt) applySource(c *sourceConfig) { o(&c.common) }
func (o commonOpt) applySink(c *sinkConfig)     { o(&c.common) }

type sourceOpt func(*sourceConfig)

func (o sourceOpt) applySource(c *sourceConfig) { o(c) }

type sinkOpt func(*sinkConfig)

func (o sinkOpt) applySink(c *sinkConfig) { o(c) }

// Brokers sets the seed brokers, "host:port" each (default
// "localhost:9092").
func Brokers(addrs ...string) Opt {
	return commonOpt(func(c *common) { c.brokers = append([]string(nil), addrs...) })
}

// ClientOpts adds franz-go options to every client the source or sink
// creates: SASL, TLS, timeouts, logging. Options that the connector sets
// itself (consumed partitions, isolation level, transactional id) are
// overridden.
func ClientOpts(opts ...kgo.Opt) Opt {
	return commonOpt(func(c *common) { c.clientOpts = append(c.clientOpts, opts...) })
}

// ConnectTimeout bounds how long opening a source split or a sink waits for
// the brokers to answer its first metadata request (default 10 s). After
// it, the job fails with the broker addresses and the last connection error.
func ConnectTimeout(d time.Duration) Opt {
	return commonOpt(func(c *common) {
		if d > 0 {
			c.connectTimeout = d
		}
	})
}

// startKind is where a split without a checkpointed position starts.
type startKind int

const (
	startEarliest startKind = iota
	startLatest
	startAt
	startCommitted
)

type sourceConfig struct {
	common
	topics        []string
	maxPartitions int
	partitions    []int32 // read only these; nil: every partition up to maxPartitions
	start         startKind
	startAt       time.Time
	startGroup    string
	commitGroup   string
	bounded       bool
	metadataEvery time.Duration
	bufferRecords int
	decoder       any // Decoder[T]
	deadLetter    func(*kgo.Record, error) error
	deadTopic     string
	name          string
}

// Topics sets the topics to read (required). Their order matters: it
// numbers the splits, so it must not change between runs of a job.
func Topics(topics ...string) SourceOpt {
	return sourceOpt(func(c *sourceConfig) { c.topics = append([]string(nil), topics...) })
}

// MaxPartitions sets the number of splits per topic (default 64): the
// highest partition count a topic may reach while the job runs. Split s reads
// partition s / len(topics) of topic s % len(topics), so raising it between
// runs keeps every existing partition's split (and checkpointed position);
// the topic list must not change.
func MaxPartitions(n int) SourceOpt {
	return sourceOpt(func(c *sourceConfig) {
		if n > 0 {
			c.maxPartitions = n
		}
	})
}

// Partitions makes the source read only the given partitions of each
// topic: split s reads partition ps[s / len(topics)] of topic
// s % len(topics). A job that runs as one task per input partition (the
// processes of a job sharing a consumer group) reads its task's partition
// so. A partition that does not exist yet is idle until it appears, as
// with MaxPartitions, which it replaces. The list, like the topics, must
// not change between runs of a job. Partitions panics, as Source does on
// a job built wrong, on no partition and on a negative or repeated one.
func Partitions(ps ...int32) SourceOpt {
	if len(ps) == 0 {
		panic("kafka.Partitions: no partitions (leave the option out to read every partition)")
	}
	seen := map[int32]bool{}
	for _, p := range ps {
		if p < 0 || seen[p] {
			panic(fmt.Sprintf("kafka.Partitions: partition %d negative or repeated in %v", p, ps))
		}
		seen[p] = true
	}
	return sourceOpt(func(c *sourceConfig) { c.partitions = append([]int32(nil), ps...) })
}

// StartEarliest starts splits without a checkpointed position at the
// partition's first offset (the default).
func StartEarliest() SourceOpt {
	return sourceOpt(func(c *sourceConfig) { c.start = startEarliest })
}

// StartLatest starts splits without a checkpointed position at the
// partition's last stable offset: only records committed after the split
// opened are read.
func StartLatest() SourceOpt {
	return sourceOpt(func(c *sourceConfig) { c.start = startLatest })
}

// StartAt starts splits without a checkpointed position at the first record
// whose timestamp is t or later (at the partition's end when there is none).
func StartAt(t time.Time) SourceOpt {
	return sourceOpt(func(c *sourceConfig) { c.start, c.startAt = startAt, t })
}

// StartCommitted starts splits without a checkpointed position at the
// offsets consumer group group committed, and partitions the group has no
// offset for at their first offset. Eddy reads the group's offsets only
// then: from the first checkpoint on, positions come from checkpoints.
func StartCommitted(group string) SourceOpt {
	return sourceOpt(func(c *sourceConfig) { c.start, c.startGroup = startCommitted, group })
}

// CommitGroup commits, every few seconds, the positions the source had at
// its latest checkpoint barrier as the offsets of consumer group group, for
// monitoring tools (lag) and for StartCommitted. The committed offsets may be
// ahead of the last complete checkpoint: Eddy never reads them back except
// through StartCommitted.
func CommitGroup(group string) SourceOpt {
	return sourceOpt(func(c *sourceConfig) { c.commitGroup = group })
}

// Bounded makes the source end: each partition is read up to the last stable
// offset it had when the job first opened its split (stored in checkpoints,
// so a restored job ends at the same offsets). Partitions that did not exist
// then are not read.
func Bounded() SourceOpt {
	return sourceOpt(func(c *sourceConfig) { c.bounded = true })
}

// MetadataInterval sets how often the source looks for new partitions
// (default 5 s).
func MetadataInterval(d time.Duration) SourceOpt {
	return sourceOpt(func(c *sourceConfig) {
		if d > 0 {
			c.metadataEvery = d
		}
	})
}

// BufferRecords sets how many fetched records a partition may buffer
// (default 4096): while one buffer is that full, the source stops fetching
// until its reader has taken half of them.
func BufferRecords(n int) SourceOpt {
	return sourceOpt(func(c *sourceConfig) {
		if n > 0 {
			c.bufferRecords = n
		}
	})
}

// WithDecoder sets how record values become T (default Values[T]()). The
// decoder's type must match the source's: Source[T] panics otherwise.
func WithDecoder[T any](d Decoder[T]) SourceOpt {
	return sourceOpt(func(c *sourceConfig) { c.decoder = d })
}

// DeadLetter routes records that do not decode (including records with an
// unknown schema fingerprint) to fn instead of failing the job. fn receives
// the record as fetched and the decoding error; when it returns nil the
// record is skipped, when it returns an error the job fails with it. After a
// restore, records since the last checkpoint are read again, so fn may see a
// record more than once.
func DeadLetter(fn func(rec *kgo.Record, err error) error) SourceOpt {
	return sourceOpt(func(c *sourceConfig) { c.deadLetter = fn })
}

// DeadLetterTopic produces records that do not decode to topic, with their
// key, value and headers, plus the headers "eddy-error" (the decoding error)
// and "eddy-source" ("topic/partition/offset"). Delivery is at least once:
// after a restore a record may be routed again. It is DeadLetter with a
// producer; the topic must exist.
func DeadLetterTopic(topic string) SourceOpt {
	return sourceOpt(func(c *sourceConfig) { c.deadTopic = topic })
}

// SourceName sets the source's name in checkpoints (default
// "kafka:" followed by the topics, comma-separated).
func SourceName(name string) SourceOpt {
	return sourceOpt(func(c *sourceConfig) { c.name = name })
}

// Guarantee is what a Sink promises about its output after failures.
type Guarantee int

const (
	// ExactlyOnce makes every record of a completed checkpoint visible to
	// read_committed consumers exactly once, and nothing else.
	ExactlyOnce Guarantee = iota
	// AtLeastOnce produces records as they come and flushes at every
	// checkpoint: after a restore, records since the last checkpoint are
	// written again.
	AtLeastOnce
	// None produces records as they come without waiting at checkpoints:
	// records buffered when a job fails may be lost, others may repeat.
	None
)

// String returns the guarantee's name.
func (g Guarantee) String() string {
	switch g {
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	case None:
		return "none"
	}
	return fmt.Sprintf("Guarantee(%d)", int(g))
}

type sinkConfig struct {
	common
	name         string
	guarantee    Guarantee
	key          any // func(*T) []byte
	encoder      any // Encoder[T]
	schemaHeader bool
	maxBuffered  int
	txnTimeout   time.Duration
}

// DeliveryGuarantee sets the sink's guarantee (default ExactlyOnce).
func DeliveryGuarantee(g Guarantee) SinkOpt {
	return sinkOpt(func(c *sinkConfig) { c.guarantee = g })
}

// SinkName names the sink (default: the topic). The sink's Name is
// "kafka:" followed by it, and it determines the transactional ids and
// marker groups "eddy-<name>-<subtask>": sinks and jobs writing to one
// cluster need distinct names.
func SinkName(name string) SinkOpt {
	return sinkOpt(func(c *sinkConfig) { c.name = name })
}

// Key sets the function that gives each record its Kafka key (default: no
// key, records spread over partitions). Records with equal keys go to the
// same partition, in order. The function's type must match the sink's:
// Sink[T] panics otherwise.
func Key[T any](fn func(*T) []byte) SinkOpt {
	return sinkOpt(func(c *sinkConfig) { c.key = fn })
}

// WithEncoder sets how T becomes a record value (default ProtoEncoder[T]()).
// The encoder's type must match the sink's: Sink[T] panics otherwise.
func WithEncoder[T any](e Encoder[T]) SinkOpt {
	return sinkOpt(func(c *sinkConfig) { c.encoder = e })
}

// SchemaHeader adds the header "eddy-schema" to every record: the
// fingerprint of T's serde schema (serde.Schema.Fingerprint), which Values
// checks when reading. Use it with the default protobuf encoding.
func SchemaHeader() SinkOpt {
	return sinkOpt(func(c *sinkConfig) { c.schemaHeader = true })
}

// MaxBufferedBytes bounds the encoded records an ExactlyOnce writer holds
// between two checkpoints (default 64 MiB). Going over it fails the job with
// an error saying so: checkpoint more often, or raise the limit. The records
// of an epoch are also stored in the checkpoint's manifest.
func MaxBufferedBytes(n int) SinkOpt {
	return sinkOpt(func(c *sinkConfig) {
		if n > 0 {
			c.maxBuffered = n
		}
	})
}

// TransactionTimeout sets the Kafka transaction timeout of ExactlyOnce
// commits (default 1 minute): a transaction left open by a process that died
// and never restarted is aborted by the broker after it.
func TransactionTimeout(d time.Duration) SinkOpt {
	return sinkOpt(func(c *sinkConfig) {
		if d > 0 {
			c.txnTimeout = d
		}
	})
}

// typed returns v as a U, or panics naming the option: typed options are
// generic functions whose type parameter must match the connector's.
func typed[U any](v any, option, connector string) (U, bool) {
	var zero U
	if v == nil {
		return zero, false
	}
	u, ok := v.(U)
	if !ok {
		panic(fmt.Sprintf("kafka: option %s has type %T, but the %s needs %v", option, v, connector, reflect.TypeFor[U]()))
	}
	return u, true
}
