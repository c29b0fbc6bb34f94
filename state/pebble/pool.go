package pebble

import (
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Pool is the memory of the Pebble state of one process: one block cache
// shared by all its DBs, and the budget of their memtables. Open DBs with
// Pool.Open or Pool.Restore.
type Pool struct {
	cache    *pebble.Cache
	memory   int64
	maxDBs   int
	memtable uint64 // MemTableSize of each DB
	// noCompactions turns Pebble's automatic compactions off (tests that
	// need the files of one checkpoint to outlive the next).
	noCompactions bool
	// wrapFS wraps each DB's file system (WrapFS).
	wrapFS func(vfs.FS) vfs.FS
	// onStall, if set, is called when a write of a DB of the pool begins
	// to wait for a flush or compaction (tests).
	onStall func()

	// uploads paces the uploads of background checkpoints' files
	// (BackgroundUploadRate); nil: unpaced.
	uploads *pacer

	mu    sync.Mutex
	nopen int

	localMu sync.Mutex
	local   *localCopies // where restores look for files first (SetLocalCopies)
}

// PoolOption configures a Pool.
type PoolOption func(*poolConfig)

type poolConfig struct {
	memory        int64
	maxDBs        int
	noCompactions bool
	wrapFS        func(vfs.FS) vfs.FS
	onStall       func()
	uploadRate    int64
}

// DefaultMemory is the memory of a Pool without a Memory option.
const DefaultMemory = 256 << 20

// DefaultMaxDBs is how many DBs a Pool without a MaxDBs option holds open.
const DefaultMaxDBs = 16

// minMemTable is the smallest memtable a DB gets: smaller ones flush so
// often that L0 fills with tiny files.
const minMemTable = 1 << 20

// memtablesPerDB is Pebble's MemTableStopWritesThreshold: a DB holds at
// most this many memtables (one filling, the others flushing).
const memtablesPerDB = 2

// Memory bounds the memory of the Pebble state of the pool, in bytes: half
// of it is the block cache shared by all DBs, in which Pebble also reserves
// their memtables (a quarter of Memory at most, split evenly among MaxDBs
// DBs); the other half holds decoded values, split evenly among MaxDBs DBs
// (ValueCacheBytes, for state.Backend.SetCacheBytes), so that a state that
// fits in it is read from and written to the DB only at checkpoints. It is
// the one knob of the state's memory; Pebble's index and filter blocks of
// open files live in the block cache too, and what comes on top is the
// file metadata and the Go heap's own overhead on the decoded values (with
// the default GOGC, a live heap may take up to twice its size).
//
// Relation to GOMEMLIMIT: built with cgo (the default where a C compiler
// is found), Pebble allocates the block cache and memtables with C
// malloc, outside the Go heap, so GOMEMLIMIT does not count them, but the
// decoded values are Go heap: set GOMEMLIMIT to the process's memory
// target minus half of Memory. Built without cgo (CGO_ENABLED=0), all of
// it is Go heap that GOMEMLIMIT counts: set GOMEMLIMIT to the target, at
// least Memory plus the job's own working set, or the garbage collector
// will run continuously trying to shrink memory it cannot free.
func Memory(bytes int64) PoolOption { return func(c *poolConfig) { c.memory = bytes } }

// BackgroundUploadRate paces the uploads of the pool's background
// checkpoints (CheckpointOptions.Background: the materializations of the
// changelog state backend) to at most bytesPerSecond in all; 0 leaves
// them unpaced. The default is DefaultBackgroundUploadRate. A
// materialization uploads the files compactions wrote since the last one,
// hundreds of megabytes at a few gigabytes of state; unpaced, it takes the
// disk's whole bandwidth while it reads them (and, to a store on the same
// disk, writes them), and the job's reads of its state and every small
// fsync of its checkpoints (the log, the manifest) queue behind it.
// Paced, it takes longer and leaves the disk to the job. The files a
// materialization must upload grow with the rate compactions write and
// the materialization interval: at 40 MiB/s, 2.3 GiB a minute. Checkpoints
// without the changelog, which the job waits for, are never paced.
func BackgroundUploadRate(bytesPerSecond int64) PoolOption {
	return func(c *poolConfig) { c.uploadRate = bytesPerSecond }
}

// DefaultBackgroundUploadRate is the pace of background uploads of a Pool
// without a BackgroundUploadRate option (BENCHMARKS.md: "Materializations
// paced").
const DefaultBackgroundUploadRate = 40 << 20

// MaxDBs sets how many DBs (keyed subtasks) the pool holds open at once,
// which sizes each DB's share of the memtable budget; Open fails past it.
func MaxDBs(n int) PoolOption { return func(c *poolConfig) { c.maxDBs = n } }

// WrapFS wraps the file system each DB of the pool works on (Pebble's
// vfs.FS, the operating system's unless wrapped): to observe its file
// operations, or to inject failures into them (Pebble's vfs/errorfs), as
// the tests of a full disk do.
func WrapFS(wrap func(vfs.FS) vfs.FS) PoolOption {
	return func(c *poolConfig) { c.wrapFS = wrap }
}

// MinMemory is the least Memory a pool of maxDBs DBs takes: each DB's
// memtables of at least 1 MiB, a quarter of the whole.
func MinMemory(maxDBs int) int64 {
	return 4 * memtablesPerDB * minMemTable * int64(max(maxDBs, 1))
}

// NewPool returns a pool. It fails if the memory is too small to give each
// of MaxDBs DBs its memtables of at least 1 MiB.
func NewPool(opts ...PoolOption) (*Pool, error) {
	c := poolConfig{memory: DefaultMemory, maxDBs: DefaultMaxDBs, uploadRate: DefaultBackgroundUploadRate}
	for _, o := range opts {
		o(&c)
	}
	if c.maxDBs < 1 {
		return nil, fmt.Errorf("pebble: MaxDBs(%d): need at least 1", c.maxDBs)
	}
	mem := uint64(c.memory/4) / uint64(c.maxDBs*memtablesPerDB)
	if c.memory <= 0 || mem < minMemTable {
		return nil, fmt.Errorf("pebble: Memory(%d) is too small for MaxDBs(%d): each DB needs %d bytes of memtables; give Memory at least %d bytes or lower MaxDBs",
			c.memory, c.maxDBs, memtablesPerDB*minMemTable, 4*memtablesPerDB*minMemTable*c.maxDBs)
	}
	if c.uploadRate < 0 {
		return nil, fmt.Errorf("pebble: BackgroundUploadRate(%d): need 0 (unpaced) or more bytes per second", c.uploadRate)
	}
	p := &Pool{cache: pebble.NewCache(c.memory / 2), memory: c.memory, maxDBs: c.maxDBs, memtable: mem, noCompactions: c.noCompactions, wrapFS: c.wrapFS, onStall: c.onStall}
	if c.uploadRate > 0 {
		p.uploads = &pacer{rate: float64(c.uploadRate)}
	}
	return p, nil
}

// ValueCacheBytes is the memory each DB's backend keeps decoded values in:
// half of Memory, split evenly among MaxDBs DBs.
func (p *Pool) ValueCacheBytes() int64 { return p.memory / 2 / int64(p.maxDBs) }

// Close releases the pool's cache once every DB of it is closed.
func (p *Pool) Close() {
	p.cache.Unref()
}

// acquire counts one more open DB, or fails if the pool is full.
func (p *Pool) acquire() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nopen >= p.maxDBs {
		return fmt.Errorf("pebble: the pool already holds %d DBs (MaxDBs); raise MaxDBs, and Memory with it", p.maxDBs)
	}
	p.nopen++
	return nil
}

func (p *Pool) release() {
	p.mu.Lock()
	p.nopen--
	p.mu.Unlock()
}

// The L0 thresholds of every DB; see options.
const (
	// L0CompactionThreshold is the number of L0 sublevels at which a DB
	// compacts L0: below it, its L0 is settled.
	L0CompactionThreshold = 12
	l0StopWritesThreshold = 48
)

// options returns the Pebble options of a DB of the pool.
func (p *Pool) options(bgErr func(error)) *pebble.Options {
	o := &pebble.Options{
		Cache:                       p.cache,
		DisableWAL:                  true,
		MemTableSize:                p.memtable,
		MemTableStopWritesThreshold: memtablesPerDB,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      quietLogger{fatal: bgErr},
		DisableAutomaticCompactions: p.noCompactions,
		// Every checkpoint flushes the memtables, so L0 gains a file per
		// DB every checkpoint interval, and with keys spread evenly each
		// covers the key space: an L0 compaction rewrites all of the base
		// level. Waiting for 12 sublevels rather than Pebble's 4 makes it
		// a third as often (keyed count, 1M keys: compactions were 40% of
		// the CPU time at 4), and the bloom filters keep the extra files
		// cheap for point reads. Writes stop at 48 sublevels (Pebble's
		// default 12 would stop them as soon as a compaction starts).
		L0CompactionThreshold: L0CompactionThreshold,
		L0StopWritesThreshold: l0StopWritesThreshold,
	}
	// Bloom filters let a point read (a key's first use in a while, or a
	// new key) skip the files that do not hold the key: with a checkpoint
	// flushing the memtable every few seconds, L0 holds several files
	// that each cover the whole key space. Their blocks live in the cache.
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	o.EventListener = &pebble.EventListener{
		BackgroundError: bgErr,
		// Pebble's default is to log a fatal error: a damaged file fails
		// the DB instead (the read that found it returns the error too).
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			bgErr(fmt.Errorf("file %s is corrupt: %w", info.Path, info.Details))
		},
	}
	if p.onStall != nil {
		o.EventListener.WriteStallBegin = func(pebble.WriteStallBeginInfo) { p.onStall() }
	}
	return o
}

// quietLogger drops Pebble's informational logs; errors reach the DB's
// caller as errors. A fatal one (a MANIFEST write that failed on a full
// disk, say) fails the DB through fatal instead of ending the process as
// Pebble's own logger does: the job fails with the cause and restores from
// its last checkpoint into a new directory, never reading this one again.
// Pebble returns the error after logging it where it can (the MANIFEST);
// the DB is not used after it either way.
type quietLogger struct{ fatal func(error) }

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (l quietLogger) Fatalf(format string, a ...any) {
	fe := &fatalError{msg: fmt.Sprintf(format, a...)}
	for _, v := range a {
		if err, ok := v.(error); ok {
			fe.cause = err
			break
		}
	}
	l.fatal(fe)
}

// fatalError is what Pebble logged as fatal; it unwraps to the first error
// among what was logged (the cause, as errors.Is sees it: ENOSPC).
type fatalError struct {
	msg   string
	cause error
}

func (e *fatalError) Error() string { return "pebble fatal error: " + e.msg }
func (e *fatalError) Unwrap() error { return e.cause }
