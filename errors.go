package eddy

import "github.com/eddyflow/eddy/internal/errs"

// The kinds of error Run reports, for errors.Is. The message of an error
// always starts with its root cause (the file and the ENOSPC, the fencing
// error); the kind says what a caller can do about it.
var (
	// ErrIncompatibleState: a checkpoint's state does not fit the job's
	// types (a serde compatibility rule failed). Permanent; the
	// checkpoint is left as it is.
	ErrIncompatibleState = errs.IncompatibleState
	// ErrCorruptCheckpoint: a checkpoint's manifest, state or log is
	// corrupt or missing.
	ErrCorruptCheckpoint = errs.CorruptCheckpoint
	// ErrStorage: reading or writing checkpoint storage failed (a full
	// disk, a read-only directory, an unreachable store).
	ErrStorage = errs.Storage
	// ErrFenced: another writer took over what the job writes (a second
	// process of the job, a Kafka producer with the same transactional
	// id). The job stops without committing.
	ErrFenced = errs.Fenced
	// ErrUserFunction: a function of the job (Open, Process, OnTimer, a
	// Map or KeyBy function, ...) returned an error or panicked.
	ErrUserFunction = errs.UserFunction
	// ErrDuplicateID: two checkpointed parts of the job have one id (see
	// UID). Permanent; reported by Run before anything starts.
	ErrDuplicateID = errs.DuplicateID
	// ErrPermanent: a restart cannot fix the error, so Run does not retry
	// it. Mark an error of your own with Permanent.
	ErrPermanent = errs.Permanent
)

// Permanent marks err as one that a restart cannot fix: a job function that
// returns it fails the job at once instead of restarting from the last
// checkpoint.
func Permanent(err error) error { return errs.Kind(errs.Permanent, err, true) }
