package eddy

import (
	"time"

	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/internal/runtime"
)

// MaterializeAtLogRatio starts a materialization early, before the interval
// has passed, once the redundant bytes a checkpoint carries exceed ratio
// times the live state (default 0.25, and at least 256 KiB of log): the
// materialized state and the log since it beyond the state the backend
// holds now, estimated from the materialized bytes per entry. It keeps
// the full size of a checkpoint near the state size when most writes
// update existing keys (windows), while a state that grows by new keys is
// not rewritten early for its growth; 0 turns it off.
func MaterializeAtLogRatio(ratio float64) ChangelogOption {
	return func(c *runtime.ChangelogConfig) { c.LogRatio = ratio }
}

// ChangelogOption configures Changelog.
type ChangelogOption func(*runtime.ChangelogConfig)

// LogOptions sets the durable short-term log's options (batching, hedged
// uploads, compression, local copies).
func LogOptions(o dstl.Options) ChangelogOption {
	return func(c *runtime.ChangelogConfig) { c.Log = o }
}

// Changelog turns on the changelog state backend: every keyed state write
// goes to the state and, as the new value (of the changed element only for
// Map and List state), to a durable short-term log
// shared by the process and uploaded continuously. A checkpoint is then the
// last materialized snapshot plus the log since it, so it uploads only the
// last few milliseconds of changes whatever the state size. State is
// materialized in the background every materializeEvery (default 10 min;
// the first one jittered per subtask), a megabyte of entries at a time
// between records (and while the subtask waits for them) so processing
// never stalls for more than a few milliseconds, however large a key group.
func Changelog(materializeEvery time.Duration, opts ...ChangelogOption) Option {
	return func(c *config) {
		cc := runtime.NewChangelogConfig(materializeEvery)
		for _, o := range opts {
			o(cc)
		}
		c.Changelog = cc
	}
}
