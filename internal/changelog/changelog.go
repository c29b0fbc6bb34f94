package changelog

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/internal/bufpool"
	"github.com/eddyflow/eddy/internal/manifest"
	"github.com/eddyflow/eddy/state"
)

// state.ChangeOp and dstl.Op number the operations alike (a compile error
// here says they drifted apart).
var (
	_ = [1]struct{}{}[dstl.OpPut-dstl.Op(state.ChangePut)]
	_ = [1]struct{}{}[dstl.OpDelete-dstl.Op(state.ChangeDelete)]
	_ = [1]struct{}{}[dstl.OpPutElem-dstl.Op(state.ChangePutElem)]
	_ = [1]struct{}{}[dstl.OpDeleteElem-dstl.Op(state.ChangeDeleteElem)]
)

// Config turns on the changelog state backend.
type Config struct {
	Materialize time.Duration // the interval between materializations
	// MinInterval is the least time between the starts of two
	// materializations of a subtask that the log's size, not the
	// interval, starts: a tiny, busy state would otherwise be rewritten
	// (on S3, PUT) many times a second. Capped at Materialize.
	MinInterval time.Duration
	LogRatio    float64 // materialize early once the log since the base exceeds this share of it
	Log         dstl.Options
	StepBytes   int // bytes of entries a materialization step serializes between records
	PartBytes   int // a materialized part ends at the first key group boundary past this size
	Uploads     int // materialization uploads in flight per subtask
}

// DefaultMinInterval is Config.MinInterval unless set.
const DefaultMinInterval = 2 * time.Second

// NewConfig returns the defaults, materializing every materialize (10
// minutes if not positive).
func NewConfig(materialize time.Duration) *Config {
	if materialize <= 0 {
		materialize = 10 * time.Minute
	}
	return &Config{Materialize: materialize, MinInterval: DefaultMinInterval, StepBytes: 1 << 20, PartBytes: 4 << 20,
		LogRatio: 0.25, Uploads: 2}
}

// Env is what an operator's changelog uses of the job it runs in.
type Env struct {
	Config *Config
	Store  blob.Store   // where materialized parts go
	Hedger *blob.Hedger // when to hedge a part's upload
	// Attempts is how many times a part's upload is tried.
	Attempts int
	// PartName names a materialized part of this operator subtask (suffix
	// is unique among them) in the checkpoint being built.
	PartName func(suffix string) string
	RunID    string          // names this attempt's parts apart from an earlier attempt's
	Uploads  *sync.WaitGroup // the attempt waits for every upload started
	Logger   *slog.Logger
	// Stall records that a materialization step held the subtask's records
	// for d; Materialized that a materialization completed, d after its
	// start. Either may be nil.
	Stall, Materialized func(d time.Duration)
	// TakeStore, set for a backend whose state lives in a store
	// (state.NewStoreBackend on state/pebble), materializes the state as a
	// checkpoint of the store instead of serializing it: between two
	// batches of records it flushes the backend and starts the checkpoint
	// of materialization number count, which holds every change logged so
	// far (and maybe later ones).
	TakeStore func(count int) (*StoreSnapshot, error)
}

// StoreSnapshot is a materialization of a store-backed backend: a
// checkpoint of its store started between two batches of records
// (state/pebble: the memtables' flush started) and taken and uploaded in
// the background.
type StoreSnapshot struct {
	// Upload takes the snapshot, then names the objects it may write and
	// passes the function that names them to keep, then writes them. It
	// returns the snapshot's part (StatePart.Pebble lists its files), the
	// bytes it uploaded (files the previous materialization holds are not
	// uploaded again) and the bytes of the whole state it holds.
	//
	// keep runs objects and, until the materialization is the base that
	// checkpoints list, each checkpoint keeps what it returned from
	// pruning (checkpoint.Manifest.Keep). A barrier is never processed
	// while objects runs: objects named under the id of the checkpoint
	// being built (read in objects) are listed by that checkpoint and each
	// after it, and no checkpoint before it prunes them.
	Upload func(ctx context.Context, keep func(objects func() []string)) (part checkpoint.StatePart, uploaded, size int64, err error)
	// Release drops the local snapshot, after Upload or instead of it.
	Release func()
}

// Operator is one keyed operator subtask's changelog: its log writer, the
// base its checkpoints build on, and the materializations in progress. It
// is used from the subtask's goroutine; its uploads run in the background.
type Operator struct {
	cfg     *Config
	env     Env
	uid     string
	subtask int
	backend *state.Backend
	w       *dstl.Writer
	// The base: materialized parts, plus log parts carried over from the
	// restored checkpoint until this attempt's first materialization, and
	// the sequence number of w after which its changes are needed.
	base     []checkpoint.StatePart
	baseSize int64 // the bytes of base, kept as base changes
	// The state entries when base's materialization started (0 if not
	// known): with baseSize, the bytes per entry that estimate the live
	// state (logHeavy).
	baseEntries int64
	baseLogs    []checkpoint.LogPart
	after       uint64
	// The materializations in progress, oldest first: at most
	// maxMaterializations, all but the newest only waiting for uploads.
	runs      []*materialization
	count     int       // materializations started by this subtask
	lastStart time.Time // when the newest materialization started
	nextAt    time.Time
	failures  int
	lastDur   time.Duration
	// Bytes appended to the log (before deduplication), by the subtask's
	// goroutine: in all, and when the base's materialization started.
	// Their difference is the log a checkpoint would carry now, known at
	// once rather than when a checkpoint has persisted it.
	appended, appendedAtBase int64
	// The last persisted log range, to report only new bytes per
	// checkpoint; under mu, as checkpoints persist in the background.
	mu        sync.Mutex
	lastAfter uint64
	lastSize  int64
	newBytes  int64 // materialized bytes not yet reported by a checkpoint
}

// materialization is one snapshot of a subtask's state being written as
// parts: serialized a step at a time on the subtask's goroutine, between
// which the state changes (the snapshot is fuzzy; the log since its start,
// which its checkpoints carry, makes it exact), each part uploaded in the
// background.
type materialization struct {
	count    int                  // its number among the subtask's materializations
	next     int                  // the first key group not in a part yet
	snap     *state.GroupSnapshot // serializing from next on; nil before the first step and once done
	seq      uint64               // the writer's last sequence number at its start: its checkpoints carry the log after it
	parts    []checkpoint.StatePart
	size     int64 // the bytes of parts
	started  time.Time
	appended int64 // the Operator's appended at its start
	entries  int64 // the backend's state entries at its start
	// ... and once all its key groups were serialized: from then on it
	// only waits for uploads.
	serialized int64
	// store marks a store's materialization (Env.TakeStore); under mu,
	// the objects its upload may write, and, once the upload is done, its
	// part and the bytes it uploaded.
	store     bool
	keep      []string
	storePart checkpoint.StatePart
	uploaded  int64
	inFlight  atomic.Int32
	mu        sync.Mutex
	putErr    error
	crcs      map[string]uint32 // the parts' checksums by blob, as their uploads compute them (under mu)
}

// maxMaterializations is how many materializations of a subtask may run at
// once. A second one starts only while the newest has serialized all its
// key groups and has waited for its uploads long enough for a heavy log:
// one upload stuck in the store's latency tail must not hold the log a
// checkpoint carries back.
const maxMaterializations = 2

// Attach makes backend, the state of keyed operator uid in subtask, write
// every change to w too, on top of the base it was restored from
// (restoredParts and restoredLogs, none for a fresh start).
func Attach(env Env, w *dstl.Writer, uid string, subtask int, backend *state.Backend, restoredParts []checkpoint.StatePart,
	restoredLogs []checkpoint.LogPart) *Operator {
	cfg := env.Config
	o := &Operator{cfg: cfg, env: env, uid: uid, subtask: subtask, backend: backend, w: w, base: withDBKeyGroups(restoredParts),
		baseSize: partsSize(restoredParts), baseLogs: restoredLogs}
	now := time.Now()
	if len(restoredParts) > 0 || len(restoredLogs) > 0 {
		o.nextAt = now // a restored base is replaced at once
	} else {
		// Spread the subtasks' first materializations over the interval.
		h := fnv.New32a()
		fmt.Fprintf(h, "%s/%d/%s", uid, subtask, env.RunID)
		o.nextAt = now.Add(time.Duration(uint64(h.Sum32()) % uint64(cfg.Materialize)))
	}
	backend.SetChangeLog(func(kg, st uint32, op state.ChangeOp, key, sub, value []byte) error {
		o.appended += int64(len(key)+len(sub)+len(value)) + 8
		return w.AppendOp(kg, st, dstl.Op(op), key, sub, value)
	})
	return o
}

// withDBKeyGroups returns parts with the key groups of each Pebble part's
// database recorded (checkpoint.PebblePart.KeyGroupStart), as a part
// carried narrowed to a subtask's key groups must say which key groups its
// files hold: a part from before they were recorded held its own. The
// parts' PebbleParts are copied where changed, not modified.
func withDBKeyGroups(parts []checkpoint.StatePart) []checkpoint.StatePart {
	out := slices.Clone(parts)
	for i, p := range out {
		if p.Pebble != nil && p.Pebble.KeyGroupEnd == 0 {
			pp := *p.Pebble
			pp.KeyGroupStart, pp.KeyGroupEnd = p.KeyGroupStart, p.KeyGroupEnd
			out[i].Pebble = &pp
		}
	}
	return out
}

// Step advances the materialization by one step: a few key groups
// serialized and uploaded in the background (with ctx), with the
// operator's watermark wm (math.MinInt64 if none). It fails after three
// consecutive failed materializations.
func (o *Operator) Step(ctx context.Context, wm int64) error {
	now := time.Now()
	start, end := o.backend.KeyGroups()
	if o.env.TakeStore != nil {
		return o.storeStep(ctx, now, end, wm)
	}
	entries := int64(o.backend.Entries())
	if o.shouldStart(now, end, entries) {
		o.count++
		o.lastStart = now
		o.runs = append(o.runs, &materialization{count: o.count, next: start, seq: o.w.Seq(), started: now,
			appended: o.appended, entries: entries})
	}
	if err := o.finishMaterializations(now, end); err != nil {
		return err
	}
	if n := len(o.runs); n > 0 && o.runs[n-1].next < end {
		return o.materializeStep(ctx, o.runs[n-1], end, wm)
	}
	return nil
}

// shouldStart reports whether a materialization starts now, with the
// backend holding entries state entries: when none runs and the interval
// has passed or the log since the base is heavy; or when fewer than
// maxMaterializations run, the newest has serialized all of its key
// groups (up to end), and the log appended while it only waited for
// uploads is itself heavy: its uploads, not its size, hold it back. (A
// large state's materialization, seconds of serializing followed by its
// last uploads, is not doubled.) The log starts one at most every
// MinInterval.
func (cl *Operator) shouldStart(now time.Time, end int, entries int64) bool {
	early := now.Sub(cl.lastStart) >= min(cl.cfg.MinInterval, cl.cfg.Materialize)
	if len(cl.runs) == 0 {
		return !now.Before(cl.nextAt) || early && cl.logHeavy(cl.appendedAtBase, cl.baseSize, cl.baseEntries, entries)
	}
	if cl.env.TakeStore != nil {
		// A store's materialization uploads the files the previous one
		// does not hold: one at a time, each on top of the last.
		return false
	}
	newest := cl.runs[len(cl.runs)-1]
	if len(cl.runs) >= maxMaterializations || newest.next < end || !early {
		return false
	}
	// Against the larger of the base and the state the newest has
	// serialized: a fresh job has no base yet, and the state may have
	// grown since it.
	if newest.size > cl.baseSize {
		return cl.logHeavy(newest.serialized, newest.size, newest.entries, entries)
	}
	return cl.logHeavy(newest.serialized, cl.baseSize, cl.baseEntries, entries)
}

// materializeStep serializes the next step of m (about stepBytes of
// entries) and uploads in the background the part it completed, if any,
// unless the subtask's materializations (m and an older one still
// uploading) already have the configured uploads in flight.
func (o *Operator) materializeStep(ctx context.Context, m *materialization, end int, wm int64) error {
	if o.paced(m) {
		return nil
	}
	if m.snap == nil {
		m.snap = o.backend.NewGroupSnapshot(m.next, end, o.cfg.PartBytes)
	}
	if wm != math.MinInt64 {
		o.backend.SetWatermark(wm)
	}
	stepStart := time.Now()
	p, err := m.snap.Step(o.cfg.StepBytes)
	if o.env.Stall != nil {
		o.env.Stall(time.Since(stepStart))
	}
	if err != nil {
		return fmt.Errorf("eddy: materializing %s: %w", o.uid, err)
	}
	if p == nil {
		return nil
	}
	// Unique per materialization: two in one checkpoint interval must not
	// overwrite parts an earlier checkpoint refers to.
	name := o.env.PartName(fmt.Sprintf("m%d-%d-%s", m.count, p.From, o.env.RunID))
	size := int64(p.Size())
	m.parts = append(m.parts, checkpoint.StatePart{Subtask: uint32(o.subtask), KeyGroupStart: uint32(p.From),
		KeyGroupEnd: uint32(p.To), Blob: name, Size: size})
	m.size += size
	m.next = p.To
	if m.next >= end {
		m.serialized = o.appended
		m.snap = nil
	}
	o.env.Uploads.Add(1) // the attempt waits for its uploads
	m.inFlight.Add(1)
	go func() {
		defer o.env.Uploads.Done()
		defer m.inFlight.Add(-1)
		// Hedged like the log's uploads, after a delay learned from the
		// parts uploaded before: a part stuck in the store's latency
		// tail would hold the whole materialization back while the log
		// keeps growing.
		buf := partBufs.Get(p.Size())
		defer partBufs.Put(buf)
		*buf = p.AppendTo((*buf)[:0])
		crc := blob.Checksum(*buf)
		m.mu.Lock()
		if m.crcs == nil {
			m.crcs = map[string]uint32{}
		}
		m.crcs[name] = crc
		m.mu.Unlock()
		if err := o.env.Hedger.Put(ctx, o.env.Store, name, *buf, o.env.Attempts); err != nil {
			m.mu.Lock()
			if m.putErr == nil {
				m.putErr = err
			}
			m.mu.Unlock()
		}
	}()
	return nil
}

// storeStep is Step for a store-backed backend: a materialization is a
// checkpoint of the store, started at once (Env.TakeStore), taken and
// uploaded in the background. The entries of a store are not counted (that would read
// all of it): a log heavier than Config.LogRatio of the store's size
// starts one early.
func (o *Operator) storeStep(ctx context.Context, now time.Time, end int, wm int64) error {
	if o.shouldStart(now, end, 0) {
		if wm != math.MinInt64 {
			o.backend.SetWatermark(wm) // in the snapshot's state header
		}
		o.count++
		o.lastStart = now
		snap, err := o.env.TakeStore(o.count)
		if o.env.Stall != nil {
			o.env.Stall(time.Since(now))
		}
		if err != nil {
			return fmt.Errorf("eddy: materializing %s subtask %d: %w", o.uid, o.subtask, err)
		}
		m := &materialization{count: o.count, next: end, seq: o.w.Seq(), started: now, appended: o.appended,
			serialized: o.appended, store: true}
		o.runs = append(o.runs, m)
		o.env.Uploads.Add(1) // the attempt waits for its uploads
		m.inFlight.Add(1)
		go func() {
			defer o.env.Uploads.Done()
			defer m.inFlight.Add(-1)
			defer snap.Release()
			part, uploaded, size, err := snap.Upload(ctx, func(objects func() []string) {
				m.mu.Lock()
				defer m.mu.Unlock()
				m.keep = objects()
			})
			m.mu.Lock()
			defer m.mu.Unlock()
			if err != nil {
				m.putErr = err
				return
			}
			m.storePart, m.uploaded, m.size = part, uploaded, size
		}()
	}
	return o.finishMaterializations(now, end)
}

// partBufs recycles the buffers that materialized parts are joined into for
// their upload (Put has returned, with every attempt, before one is put
// back), but not a part of one huge key group.
var partBufs = &bufpool.Pool{Max: 64 << 20}

// materializeIdleStep is how soon a subtask waiting for records steps a
// materialization that is serializing.
const materializeIdleStep = time.Millisecond

// paced reports whether m waits for uploads before its next step: the
// subtask's materializations have the configured uploads in flight,
// leaving bandwidth to the log; m always gets one, so an older run's
// stuck uploads do not hold it back.
func (cl *Operator) paced(m *materialization) bool {
	inFlight := 0
	for _, r := range cl.runs {
		inFlight += int(r.inFlight.Load())
	}
	return inFlight >= cl.cfg.Uploads && m.inFlight.Load() > 0
}

// Due returns how soon a subtask waiting for records steps the operator's
// materializations, 0 if none has key groups left to serialize: at once
// (materializeIdleStep) if one may step, a little later if its uploads
// hold it back, to see whether they are done.
func (o *Operator) Due() time.Duration {
	if len(o.runs) == 0 {
		return 0
	}
	m := o.runs[len(o.runs)-1]
	if _, end := o.backend.KeyGroups(); m.next >= end {
		return 0
	}
	if !o.paced(m) {
		return materializeIdleStep
	}
	return 5 * materializeIdleStep
}

// Close releases the snapshots of materializations still serializing when
// the subtask ends.
func (o *Operator) Close() {
	for _, m := range o.runs {
		if m.snap != nil {
			m.snap.Close()
			m.snap = nil
		}
	}
}

// finishMaterializations settles the materializations whose uploads are
// done, newest first. One that succeeded becomes the base and drops the
// older ones, still uploading or failed: the base never goes back, and a
// failure older than a success does not count. It fails the job after
// three consecutive failed materializations.
func (cl *Operator) finishMaterializations(now time.Time, end int) error {
	for i := len(cl.runs) - 1; i >= 0; i-- {
		m := cl.runs[i]
		if m.next < end || m.inFlight.Load() > 0 {
			continue // still serializing or uploading
		}
		m.mu.Lock()
		err := m.putErr
		m.mu.Unlock()
		if err != nil {
			cl.runs = slices.Delete(cl.runs, i, i+1)
			cl.failures++
			if cl.env.Logger != nil {
				cl.env.Logger.Warn("materialization failed", "operator", cl.uid, "subtask", cl.subtask, "failures", cl.failures, "err", err)
			}
			if cl.failures >= 3 {
				return fmt.Errorf("eddy: materialization of %s subtask %d failed 3 times in a row: %w", cl.uid, cl.subtask, err)
			}
			cl.nextAt = now.Add(time.Second)
			continue
		}
		cl.failures = 0
		m.mu.Lock()
		if m.store {
			m.parts = []checkpoint.StatePart{m.storePart}
			cl.newBytes += m.uploaded
		} else {
			cl.newBytes += m.size
			for i := range m.parts {
				m.parts[i].CRC = m.crcs[m.parts[i].Blob]
			}
		}
		m.mu.Unlock()
		cl.base, cl.baseSize, cl.baseLogs, cl.after = m.parts, m.size, nil, m.seq
		cl.baseEntries = m.entries
		cl.appendedAtBase = m.appended
		// The log the next checkpoints carry starts here: it is empty,
		// whatever a checkpoint of the old base still reports.
		cl.mu.Lock()
		cl.lastAfter, cl.lastSize = cl.after, 0
		cl.mu.Unlock()
		cl.lastDur = now.Sub(m.started)
		cl.nextAt = now.Add(cl.cfg.Materialize)
		if cl.env.Materialized != nil {
			cl.env.Materialized(cl.lastDur)
		}
		// It and the older ones go: those still uploading would be a
		// step back.
		cl.runs = slices.Delete(cl.runs, 0, i+1)
		break
	}
	return nil
}

// minLogForRatio is the least log that starts a materialization early: a
// tiny state is not rewritten for every few kilobytes of log.
const minLogForRatio = 256 << 10

// logHeavy reports whether the log appended since appended was since,
// on top of a materialized state of state bytes that held stateEntries
// entries, makes a checkpoint carry more redundant bytes than the
// configured share of the live state: the bytes of that state and the
// log beyond the live state, which is estimated as the materialized bytes
// per entry times the entries the backend holds now (entries). Log that
// adds entries (a new key per event) is live state, not redundant; log
// that updates or deletes entries (windows) makes as many bytes redundant.
// So a growing state is not rewritten early for its growth, and the full
// size of a checkpoint stays near the state's. Without the entries of the
// materialized state, all of the log counts as redundant.
func (cl *Operator) logHeavy(since, state, stateEntries, entries int64) bool {
	if cl.cfg.LogRatio <= 0 {
		return false
	}
	logBytes := cl.appended - since
	if logBytes < minLogForRatio {
		return false
	}
	if state <= 0 || stateEntries <= 0 {
		return float64(logBytes) > cl.cfg.LogRatio*float64(state)
	}
	live := float64(state) * float64(entries) / float64(stateEntries)
	return float64(state+logBytes)-live > cl.cfg.LogRatio*live
}

// partsSize is the bytes of parts.
func partsSize(parts []checkpoint.StatePart) int64 {
	var n int64
	for _, p := range parts {
		n += p.Size
	}
	return n
}

// Checkpoint adds the changelog part of a checkpoint at a barrier to a,
// with the operator's watermark wm (math.MinInt64 if none): it ends the
// writer's batch here (so no later change can replace an earlier one in
// it), and returns what waits, in the background, until the log is durable
// up to the barrier. The checkpoint is the base plus that log range.
func (cl *Operator) Checkpoint(a *manifest.Ack, wm int64) func(ctx context.Context) error {
	upto := cl.w.Cut()
	start, end := cl.backend.KeyGroups()
	uid, subtask := cl.uid, uint32(cl.subtask)
	// Carried parts and logs (restored, possibly written by a subtask of
	// another parallelism) are listed for this subtask's key groups only,
	// so no two entries of one checkpoint claim the same key group.
	for _, p := range cl.base {
		p.Subtask = subtask
		p.KeyGroupStart, p.KeyGroupEnd = max(p.KeyGroupStart, uint32(start)), min(p.KeyGroupEnd, uint32(end))
		if p.KeyGroupStart < p.KeyGroupEnd {
			a.Parts = append(a.Parts, manifest.OpPart{UID: uid, Part: p})
		}
	}
	for _, l := range cl.baseLogs {
		l.Subtask = subtask
		l.KeyGroupStart, l.KeyGroupEnd = max(l.KeyGroupStart, uint32(start)), min(l.KeyGroupEnd, uint32(end))
		if l.KeyGroupStart < l.KeyGroupEnd {
			a.Logs = append(a.Logs, manifest.OpLog{UID: uid, Part: l})
		}
	}
	// The watermark now: the materialized parts carry the one of their
	// materialization, older.
	if wm != math.MinInt64 {
		a.Watermarks = append(a.Watermarks, manifest.OpWatermark{UID: uid, Watermark: checkpoint.Watermark{
			KeyGroupStart: uint32(start), KeyGroupEnd: uint32(end), Nanos: wm}})
	}
	a.Uploaded += cl.newBytes
	cl.newBytes = 0
	// The running materializations' blobs are not part of this
	// checkpoint, but must outlive its pruning.
	for _, m := range cl.runs {
		for _, p := range m.parts {
			a.ExtraFiles = append(a.ExtraFiles, p.Blob)
		}
		if m.store {
			// Under m.mu: an upload names its objects while no
			// barrier is processed (StoreSnapshot.Upload).
			m.mu.Lock()
			a.ExtraFiles = append(a.ExtraFiles, m.keep...)
			m.mu.Unlock()
		}
	}
	after := cl.after
	w := cl.w

	return func(ctx context.Context) error {
		if upto <= after {
			return nil
		}
		h, err := w.PersistUpto(ctx, after, upto)
		if err != nil {
			return fmt.Errorf("persisting the changelog of %s: %w", uid, err)
		}
		part := checkpoint.LogPart{Subtask: subtask,
			KeyGroupStart: uint32(start), KeyGroupEnd: uint32(end), Writer: h.Writer, After: after, Upto: upto,
			Objects: h.Objects, Size: h.Size, CRCs: h.CRCs}
		for _, u := range h.Uploads {
			part.Uploads = append(part.Uploads, checkpoint.LogUpload(u))
		}
		a.Logs = append(a.Logs, manifest.OpLog{UID: uid, Part: part})
		// Uploaded for this checkpoint: the log since the previous one, or
		// all of it after a new materialization.
		cl.mu.Lock()
		switch {
		case after < cl.lastAfter:
			// A checkpoint of an older base finishing late: its log is
			// not what the next checkpoints carry.
			a.Uploaded += h.Size
		case cl.lastAfter == after && h.Size >= cl.lastSize:
			a.Uploaded += h.Size - cl.lastSize
			cl.lastSize = h.Size
		default:
			a.Uploaded += h.Size
			cl.lastAfter, cl.lastSize = after, h.Size
		}
		cl.mu.Unlock()
		return nil
	}
}
