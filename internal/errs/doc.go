// Package errs owns the kinds of error the runtime reports, which the root
// package exports (eddy.ErrCorruptCheckpoint and the others) so callers can
// test a job's failure with errors.Is instead of matching strings. An error
// enters through Kind (or connector.Permanent), which adds the kind and keeps
// the message and the chain of the error it wraps: the root cause stays
// first.
package errs
