package errs

import (
	"errors"

	"github.com/eddyflow/eddy/connector"
)

// The kinds. Permanent and Fenced are the connector package's, so that
// connectors can report them without importing the runtime.
var (
	IncompatibleState = errors.New("incompatible state")
	CorruptCheckpoint = errors.New("corrupt checkpoint")
	Storage           = errors.New("storage failure")
	UserFunction      = errors.New("user function failed")
	DuplicateID       = errors.New("duplicate id")
	Permanent         = connector.ErrPermanent
	Fenced            = connector.ErrFenced
)

// Kind returns err marked with kind (and with Permanent too when permanent
// is set): errors.Is(result, kind) holds, the message is err's, and
// errors.As still reaches err's chain. Kind(kind, nil) is nil.
func Kind(kind, err error, permanent bool) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: kind, err: err, permanent: permanent}
}

type kindError struct {
	kind      error
	err       error
	permanent bool
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }
func (e *kindError) Is(target error) bool {
	return target == e.kind || (e.permanent && target == Permanent)
}

// IsPermanent reports whether a restart cannot fix err.
func IsPermanent(err error) bool { return errors.Is(err, Permanent) }
