package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/internal/bufpool"
	"github.com/eddyflow/eddy/internal/manifest"
	"github.com/eddyflow/eddy/internal/restore"
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

// ChangelogConfig turns on the changelog state backend.
type ChangelogConfig struct {
	Materialize time.Duration // the interval between materializations
	LogRatio    float64       // materialize early once the log since the base exceeds this share of it
	Log         dstl.Options
	StepBytes   int // bytes of entries a materialization step serializes between records
	PartBytes   int // a materialized part ends at the first key group boundary past this size
	Uploads     int // materialization uploads in flight per subtask
}

// NewChangelogConfig returns the defaults, materializing every
// materialize (10 minutes if not positive).
func NewChangelogConfig(materialize time.Duration) *ChangelogConfig {
	if materialize <= 0 {
		materialize = 10 * time.Minute
	}
	return &ChangelogConfig{Materialize: materialize, StepBytes: 1 << 20, PartBytes: 4 << 20, LogRatio: 0.25, Uploads: 2}
}

// changelogState is one keyed operator subtask's view of the changelog:
// its log writer, the base its checkpoints build on, and the
// materialization in progress.
type changelogState struct {
	cfg  *ChangelogConfig
	w    *dstl.Writer
	name string
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
	runs     []*materialization
	count    int // materializations started by this subtask
	nextAt   time.Time
	failures int
	lastDur  time.Duration
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
	appended int64 // the changelogState's appended at its start
	entries  int64 // the backend's state entries at its start
	// ... and once all its key groups were serialized: from then on it
	// only waits for uploads.
	serialized int64
	inFlight   atomic.Int32
	mu         sync.Mutex
	putErr     error
	crcs       map[string]uint32 // the parts' checksums by blob, as their uploads compute them (under mu)
}

// maxMaterializations is how many materializations of a subtask may run at
// once. A second one starts only while the newest has serialized all its
// key groups and has waited for its uploads long enough for a heavy log:
// one upload stuck in the store's latency tail must not hold the log a
// checkpoint carries back.
const maxMaterializations = 2

func newRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// openChangelog opens the attempt's log: objects are named under the id of
// the checkpoint being built, so the checkpoint store's garbage collection
// truncates the log once no retained checkpoint lists an object.
func (j *Job) openChangelog() error {
	cfg := j.env.cfg.Changelog
	if cfg == nil || j.blobs == nil {
		return nil
	}
	j.runID = newRunID()
	opts := cfg.Log
	opts.ObjectName = func(seq uint64) string {
		return fmt.Sprintf("checkpoints/%020d/dstl-%s-%d", j.building.Load(), j.runID, seq)
	}
	log, err := dstl.Open(j.blobs, opts)
	if err != nil {
		return fmt.Errorf("eddy: changelog: %w", err)
	}
	j.dlog = log
	o := log.Options()
	j.partHedger = blob.NewHedger(o.HedgeAfterP90, o.UploadTimeout)
	return nil
}

// attachChangelog makes rt's backend write every change to the log too.
func (sc *Subtask) attachChangelog(rt *Keyed, restoredParts []checkpoint.StatePart, restoredLogs []checkpoint.LogPart) {
	j := sc.job
	cfg := j.env.cfg.Changelog
	name := fmt.Sprintf("%s/%d/%s", rt.uid, sc.subtask, j.runID)
	cl := &changelogState{cfg: cfg, w: j.dlog.Writer(name), name: name, base: restoredParts, baseSize: partsSize(restoredParts),
		baseLogs: restoredLogs}
	now := time.Now()
	if len(restoredParts) > 0 || len(restoredLogs) > 0 {
		cl.nextAt = now // a restored base is replaced at once
	} else {
		h := fnv.New32a()
		h.Write([]byte(name))
		cl.nextAt = now.Add(time.Duration(uint64(h.Sum32()) % uint64(cfg.Materialize)))
	}
	w := cl.w
	rt.backend.SetChangeLog(func(kg, st uint32, op state.ChangeOp, key, sub, value []byte) error {
		cl.appended += int64(len(key)+len(sub)+len(value)) + 8
		return w.AppendOp(kg, st, dstl.Op(op), key, sub, value)
	})
	rt.cl = cl
}

// materialize advances the materialization of every changelog operator of
// the subtask by one step: a few key groups serialized and uploaded in the
// background. It fails the job after three consecutive failed
// materializations.
func (sc *Subtask) materialize() error {
	for _, rt := range sc.keyed {
		cl := rt.cl
		if cl == nil {
			continue
		}
		now := time.Now()
		start, end := rt.backend.KeyGroups()
		entries := int64(rt.backend.Entries())
		if cl.shouldStart(now, end, entries) {
			cl.count++
			cl.runs = append(cl.runs, &materialization{count: cl.count, next: start, seq: cl.w.Seq(), started: now,
				appended: cl.appended, entries: entries})
		}
		if err := sc.finishMaterializations(rt, now, end); err != nil {
			return err
		}
		if n := len(cl.runs); n > 0 && cl.runs[n-1].next < end {
			if err := sc.materializeStep(rt, cl.runs[n-1], end); err != nil {
				return err
			}
		}
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
// last uploads, is not doubled.)
func (cl *changelogState) shouldStart(now time.Time, end int, entries int64) bool {
	if len(cl.runs) == 0 {
		return !now.Before(cl.nextAt) || cl.logHeavy(cl.appendedAtBase, cl.baseSize, cl.baseEntries, entries)
	}
	newest := cl.runs[len(cl.runs)-1]
	if len(cl.runs) >= maxMaterializations || newest.next < end {
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
func (sc *Subtask) materializeStep(rt *Keyed, m *materialization, end int) error {
	cl := rt.cl
	if cl.paced(m) {
		return nil
	}
	if m.snap == nil {
		m.snap = rt.backend.NewGroupSnapshot(m.next, end, cl.cfg.PartBytes)
	}
	if rt.watermark != NoTimestamp {
		rt.backend.SetWatermark(rt.watermark)
	}
	stepStart := time.Now()
	p, err := m.snap.Step(cl.cfg.StepBytes)
	sc.job.env.stats.noteStall(time.Since(stepStart))
	if err != nil {
		return fmt.Errorf("eddy: materializing %s: %w", rt.uid, err)
	}
	if p == nil {
		return nil
	}
	// Unique per materialization: two in one checkpoint interval must not
	// overwrite parts an earlier checkpoint refers to.
	name := sc.job.storage.PartBlobName(sc.job.building.Load(), rt.uid, sc.subtask,
		fmt.Sprintf("m%d-%d-%s", m.count, p.From, sc.job.runID))
	size := int64(p.Size())
	m.parts = append(m.parts, checkpoint.StatePart{Subtask: uint32(sc.subtask), KeyGroupStart: uint32(p.From),
		KeyGroupEnd: uint32(p.To), Blob: name, Size: size})
	m.size += size
	m.next = p.To
	if m.next >= end {
		m.serialized = cl.appended
		m.snap = nil
	}
	sc.job.wg.Add(1) // the attempt waits for its uploads
	m.inFlight.Add(1)
	go func() {
		defer sc.job.wg.Done()
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
		if err := sc.job.partHedger.Put(sc.ctx, sc.job.blobs, name, *buf, sc.job.dlog.Options().MaxAttempts); err != nil {
			m.mu.Lock()
			if m.putErr == nil {
				m.putErr = err
			}
			m.mu.Unlock()
		}
	}()
	return nil
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
func (cl *changelogState) paced(m *materialization) bool {
	inFlight := 0
	for _, r := range cl.runs {
		inFlight += int(r.inFlight.Load())
	}
	return inFlight >= cl.cfg.Uploads && m.inFlight.Load() > 0
}

// materializeDue returns how soon a subtask waiting for records steps its
// materializations, 0 if none has key groups left to serialize: at once
// (materializeIdleStep) if one may step, a little later if its uploads
// hold it back, to see whether they are done.
func (sc *Subtask) materializeDue() time.Duration {
	due := time.Duration(0)
	for _, rt := range sc.keyed {
		if cl := rt.cl; cl != nil && len(cl.runs) > 0 {
			m := cl.runs[len(cl.runs)-1]
			if _, end := rt.backend.KeyGroups(); m.next < end {
				if !cl.paced(m) {
					return materializeIdleStep
				}
				due = 5 * materializeIdleStep
			}
		}
	}
	return due
}

// closeMaterializations releases the snapshots of materializations still
// serializing when the subtask ends.
func (sc *Subtask) closeMaterializations() {
	for _, rt := range sc.keyed {
		if rt.cl == nil {
			continue
		}
		for _, m := range rt.cl.runs {
			if m.snap != nil {
				m.snap.Close()
				m.snap = nil
			}
		}
	}
}

// finishMaterializations settles the materializations whose uploads are
// done, newest first. One that succeeded becomes the base and drops the
// older ones, still uploading or failed: the base never goes back, and a
// failure older than a success does not count. It fails the job after
// three consecutive failed materializations.
func (sc *Subtask) finishMaterializations(rt *Keyed, now time.Time, end int) error {
	cl := rt.cl
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
			sc.job.env.cfg.Logger.Warn("materialization failed", "operator", rt.uid, "subtask", sc.subtask, "failures", cl.failures, "err", err)
			if cl.failures >= 3 {
				return fmt.Errorf("eddy: materialization of %s subtask %d failed 3 times in a row: %w", rt.uid, sc.subtask, err)
			}
			cl.nextAt = now.Add(time.Second)
			continue
		}
		cl.failures = 0
		cl.newBytes += m.size
		m.mu.Lock()
		for i := range m.parts {
			m.parts[i].CRC = m.crcs[m.parts[i].Blob]
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
		sc.job.env.stats.materializations.Add(1)
		sc.job.env.stats.lastMaterialization.Store(int64(cl.lastDur))
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
func (cl *changelogState) logHeavy(since, state, stateEntries, entries int64) bool {
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

// changelogCheckpoint is the changelog part of a checkpoint at a barrier:
// end the writer's batch here (so no later change can replace an earlier
// one in it), and in the background wait until the log is durable up to the
// barrier. The checkpoint is the base plus that log range.
func (sc *Subtask) changelogCheckpoint(rt *Keyed, a *ack) func(ctx context.Context) error {
	cl := rt.cl
	upto := cl.w.Cut()
	start, end := rt.backend.KeyGroups()
	// Carried parts and logs (restored, possibly written by a subtask of
	// another parallelism) are listed for this subtask's key groups only,
	// so no two entries of one checkpoint claim the same key group.
	for _, p := range cl.base {
		p.Subtask = uint32(sc.subtask)
		p.KeyGroupStart, p.KeyGroupEnd = max(p.KeyGroupStart, uint32(start)), min(p.KeyGroupEnd, uint32(end))
		if p.KeyGroupStart < p.KeyGroupEnd {
			a.Parts = append(a.Parts, manifest.OpPart{UID: rt.uid, Part: p})
		}
	}
	for _, l := range cl.baseLogs {
		l.Subtask = uint32(sc.subtask)
		l.KeyGroupStart, l.KeyGroupEnd = max(l.KeyGroupStart, uint32(start)), min(l.KeyGroupEnd, uint32(end))
		if l.KeyGroupStart < l.KeyGroupEnd {
			a.Logs = append(a.Logs, manifest.OpLog{UID: rt.uid, Part: l})
		}
	}
	// The watermark now: the materialized parts carry the one of their
	// materialization, older.
	if rt.watermark != NoTimestamp {
		a.Watermarks = append(a.Watermarks, manifest.OpWatermark{UID: rt.uid, Watermark: checkpoint.Watermark{
			KeyGroupStart: uint32(start), KeyGroupEnd: uint32(end), Nanos: rt.watermark}})
	}
	a.Uploaded += cl.newBytes
	cl.newBytes = 0
	// The running materializations' blobs are not part of this
	// checkpoint, but must outlive its pruning.
	for _, m := range cl.runs {
		for _, p := range m.parts {
			a.ExtraFiles = append(a.ExtraFiles, p.Blob)
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
			return fmt.Errorf("persisting the changelog of %s: %w", rt.uid, err)
		}
		a.Logs = append(a.Logs, manifest.OpLog{UID: rt.uid, Part: checkpoint.LogPart{Subtask: uint32(sc.subtask),
			KeyGroupStart: uint32(start), KeyGroupEnd: uint32(end), Writer: h.Writer, After: after, Upto: upto,
			Objects: h.Objects, Size: h.Size, CRCs: h.CRCs}})
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

func (sc *Subtask) logReadOptions() dstl.ReadOptions {
	ro := dstl.ReadOptions{Shared: sc.job.logShared, Hedger: sc.job.readHedger}
	if cfg := sc.job.env.cfg.Changelog; cfg != nil {
		ro.LocalDir = cfg.Log.LocalDir
	}
	return ro
}

// restoreFrom is where and how this subtask restores keyed state: the
// attempt's restored checkpoint, with the changelog's objects fetched once
// for all subtasks of the process.
func (sc *Subtask) restoreFrom() restore.From {
	return restore.From{Manifest: sc.job.restored, Store: sc.job.blobs, PartReader: sc.job.partReader, Log: sc.logReadOptions()}
}
