package connector

import (
	"context"
	"errors"
	"path/filepath"
)

// Source is a partitioned, replayable input: a fixed number of splits, each
// read in order from a position that a checkpoint can store. Split s is read
// by source subtask s % parallelism, so a job can be restored with another
// parallelism.
type Source[T any] interface {
	// Name identifies the source in checkpoints and errors.
	Name() string
	// Splits is the number of splits; it must not change between runs of a job.
	Splits() int
	// OpenSplit opens split s at pos, a value returned by an earlier reader's
	// Position (nil: the beginning).
	OpenSplit(ctx context.Context, split int, pos []byte) (SplitReader[T], error)
}

// ReadStatus says what SplitReader.Next produced.
type ReadStatus int

const (
	// Record means *rec holds the next record.
	Record ReadStatus = iota
	// Idle means no record is available now; the runtime calls Next again
	// after a short wait, handling checkpoints in between.
	Idle
	// End means the split is exhausted (bounded input).
	End
)

// SplitReader reads one split. The runtime calls it from one goroutine.
type SplitReader[T any] interface {
	// Next fills *rec with the next record. *rec may hold the previous
	// record's memory for reuse.
	Next(rec *T) (ReadStatus, error)
	// Position is where reading would resume after the last record Next
	// returned; it is stored in checkpoints.
	Position() []byte
	// Close releases the reader.
	Close() error
}

// Lagger is a SplitReader that knows how far behind its input it is: Lag
// returns the records the split holds that the reader has not returned yet
// (Kafka: the partition's high watermark minus the next offset), and false
// while it does not know. The runtime publishes it as the source lag
// metric; it is called between records, not per record.
type Lagger interface {
	Lag() (records int64, known bool)
}

// Sink is an output that takes part in checkpoints with a two-phase commit:
// writes become durable but invisible at each checkpoint barrier (PreCommit)
// and visible once the checkpoint is complete (Commit). An exactly-once sink
// commits exactly the output of completed checkpoints.
type Sink[T any] interface {
	// Name identifies the sink in checkpoints and errors.
	Name() string
	// Recover runs once when a job starts, before any writer opens: commit
	// the transactions that the restored checkpoint recorded as
	// pre-committed (they may be committed already), and abort every other
	// pending transaction of this sink.
	Recover(ctx context.Context, committed [][]byte) error
	// OpenWriter opens the writer of one subtask.
	OpenWriter(ctx context.Context, subtask, parallelism int) (SinkWriter[T], error)
	// Commit makes pre-committed transactions visible. It must be idempotent:
	// after a crash it may be called again for the same transactions.
	Commit(ctx context.Context, txns [][]byte) error
}

// SinkWriter writes the records of one sink subtask.
type SinkWriter[T any] interface {
	// Write adds one record to the current transaction.
	Write(rec *T) error
	// PreCommit ends the current transaction at the barrier of a checkpoint:
	// its records become durable but not visible. It returns a handle that
	// Sink.Commit understands, or nil when the transaction is empty.
	PreCommit(checkpointID uint64) ([]byte, error)
	// Close aborts the open transaction and releases the writer.
	Close() error
}

// ErrFenced is the kind of error a connector returns when another writer
// took over what it writes (a Kafka producer fenced by a newer one with the
// same transactional id): retrying cannot help this writer, and the job must
// stop without committing. Test for it with errors.Is.
var ErrFenced = errors.New("fenced by another writer")

// Permanent marks err as one that a restart cannot fix (a malformed input
// line, an output path that is a file): the job fails at once instead of
// retrying. errors.Is(Permanent(err), ErrPermanent) is true, and the message
// is err's.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err}
}

// ErrPermanent is the kind of the errors Permanent marks.
var ErrPermanent = errors.New("permanent error")

type permanent struct{ err error }

func (p *permanent) Error() string        { return p.err.Error() }
func (p *permanent) Unwrap() error        { return p.err }
func (p *permanent) Is(target error) bool { return target == ErrPermanent }

// CanonicalPath is the form of a file system path that a connector puts in
// its Name: absolute, cleaned, with symbolic links resolved as far as the
// path exists, so "out", "./out/" and "/abs/out" (or a link to it) name
// one thing and a job resumed with another spelling finds its checkpointed
// positions and transactions.
func CanonicalPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	dir, rest := abs, ""
	for {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// RollbackSink is implemented by sinks that can undo what they committed.
// When a restore has to fall back past checkpoints (their manifest or
// state is corrupt or missing), the output those checkpoints committed
// would be produced again: a RollbackSink removes it first, so the
// fallback stays exactly-once. A fallback past committed output of a sink
// that is not one is refused unless the job allows duplicates.
type RollbackSink interface {
	// CommittedAfter describes the output committed by checkpoints after
	// id (after 0: any), or returns "" if there is none.
	CommittedAfter(ctx context.Context, id uint64) (string, error)
	// RollBack removes the output committed by checkpoints after id.
	RollBack(ctx context.Context, id uint64) error
}
