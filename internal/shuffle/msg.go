package shuffle

import "math"

// Kind is what a Msg carries.
type Kind uint8

const (
	Data      Kind = iota // Batch is a batch of records (*KeyedBatch)
	Barrier               // checkpoint barrier ID; Batch is true for the final one
	EndOfData             // the sender's inputs are exhausted; more barriers follow
	Terminate             // the sender is done; nothing follows
	Watermark             // event time has reached ID (an int64); to an Output only: it rides in batches
	Idle                  // the sender is idle (Batch true) or active again (false)
)

// Msg is what travels from a subtask to one subtask of the next stage.
type Msg struct {
	Kind  Kind
	ID    uint64
	Batch any
}

// NoTimestamp marks a record without event time.
const NoTimestamp = math.MinInt64

// Push hands one record, with its event time in nanoseconds (NoTimestamp
// when it has none), to the next operator.
type Push[T any] func(ts int64, rec *T) error

// KeyedPush hands one record of a keyed stream to the next operator, with
// its key, serialized key and key group.
type KeyedPush[K comparable, T any] func(key *K, kb []byte, kg int, ts int64, rec *T) error
