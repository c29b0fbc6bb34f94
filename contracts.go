package eddy

import "github.com/eddyflow/eddy/connector"

// The connector contracts, defined in package connector so that a connector
// does not import the runtime; these aliases let a job name them from here.
type (
	// Source is connector.Source: a partitioned, replayable input.
	Source[T any] = connector.Source[T]
	// SplitReader is connector.SplitReader: the reader of one split.
	SplitReader[T any] = connector.SplitReader[T]
	// ReadStatus is connector.ReadStatus: what SplitReader.Next produced.
	ReadStatus = connector.ReadStatus
	// Sink is connector.Sink: an output with a two-phase commit.
	Sink[T any] = connector.Sink[T]
	// SinkWriter is connector.SinkWriter: the writer of one sink subtask.
	SinkWriter[T any] = connector.SinkWriter[T]
)

// The values of ReadStatus.
const (
	Record = connector.Record
	Idle   = connector.Idle
	End    = connector.End
)
