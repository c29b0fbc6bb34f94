package eddy

import (
	"github.com/eddyflow/eddy/internal/runtime"
	"github.com/eddyflow/eddy/state/pebble"
)

// Backend is where a job keeps its keyed state: Heap (the default) or
// Pebble. Pass it to StateBackend.
type Backend interface{ applyBackend(*config) }

// StateBackend sets where every keyed operator of the job keeps its state.
func StateBackend(b Backend) Option { return b.applyBackend }

type heapBackend struct{}

func (heapBackend) applyBackend(c *config) { c.Pebble = nil }

// Heap keeps keyed state as Go values in memory (the default): the fastest
// state, as large as the process's memory allows. A checkpoint serializes
// all of it, unless Changelog is on.
func Heap() Backend { return heapBackend{} }

type pebbleBackend struct {
	dir  string
	opts []pebble.PoolOption
}

func (p pebbleBackend) applyBackend(c *config) {
	c.Pebble = &runtime.PebbleConfig{Dir: p.dir, Pool: p.opts}
}

// Pebble keeps keyed state in Pebble databases on local disk under dir
// (one per keyed operator subtask, in a directory of its own per run), so
// state may be far larger than memory. The memory of all of them is one
// budget, pebble.Memory (default 256 MiB, and at least 8 MiB per keyed
// operator subtask); see docs/pebble.md for how it relates to GOMEMLIMIT.
//
// Checkpoints are incremental: each uploads the database files the
// previous one did not, and retention deletes a file once no retained
// checkpoint lists it. The local databases are never reused after a
// failure: a restore downloads the checkpoint's files, at the same or
// another parallelism. A checkpoint taken with the Heap backend restores
// into Pebble; one taken with Pebble does not restore into the heap (the
// restore fails with ErrIncompatibleState). Not yet with Changelog.
func Pebble(dir string, opts ...pebble.PoolOption) Backend {
	return pebbleBackend{dir: dir, opts: opts}
}
