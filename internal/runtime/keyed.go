package runtime

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/internal/changelog"
	"github.com/eddyflow/eddy/internal/errs"
	"github.com/eddyflow/eddy/internal/restore"
	"github.com/eddyflow/eddy/internal/timers"
	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
	"github.com/eddyflow/eddy/state/pebble"
)

// Keyed is the runtime of one keyed operator in one subtask: its state
// backend, timers and watermark.
type Keyed struct {
	sc          *Subtask
	uid         string
	backend     *state.Backend
	procTimers  *timers.Service
	eventTimers *timers.Service
	watermark   int64
	fireEvent   func(kb []byte, kg int, at int64) error
	fireProc    func(kb []byte, kg int, at int64) error
	onWatermark func(wm int64) error // OnWatermark
	procNext    func() int64         // OnProcessingTime
	procFire    func(now int64) error
	end         func() error
	cl          *changelog.Operator // with the changelog state backend

	// Buffers of heap snapshots whose uploads are done (snapshotBuf).
	snapMu   sync.Mutex
	snapFree []*[]byte

	// With the Pebble state backend (pebble.go):
	db       *pebble.DB         // where the state lives
	openErr  error              // opening or restoring db failed; Start returns it
	prev     *pebble.Checkpoint // the last uploaded checkpoint of db, whose files the next reuses
	uploaded chan struct{}      // closed once the last checkpoint's upload is over
}

// OpenKeyed creates the state backend of keyed operator uid in subtask sc,
// for keys of schema ksch. Declare the operator's state on State, then
// call Start. With the Pebble state backend it opens the operator's
// database, restoring it from the checkpoint's Pebble files if there are.
func OpenKeyed(sc *Subtask, uid string, ksch serde.Schema) *Keyed {
	kgs, kge := sc.keyGroups()
	maxPar := sc.job.env.cfg.MaxParallelism
	k := &Keyed{sc: sc, uid: uid, watermark: math.MinInt64}
	if sc.job.pebble != nil {
		began := time.Now()
		db, err := sc.openStore(uid, kgs, kge)
		if err == nil {
			k.db, k.prev = db, db.Restored()
			k.backend = state.NewStoreBackend(maxPar, kgs, kge, ksch, db)
			k.backend.SetCacheBytes(sc.job.pebble.run.pool.ValueCacheBytes())
			if sc.job.restored != nil {
				storeMax(&sc.job.env.stats.recovery, int64(time.Since(began)))
				rs := db.RestoreStats()
				sc.job.env.stats.restoredLocal.Add(rs.LocalBytes)
				sc.job.env.stats.restoredDownloaded.Add(rs.DownloadedBytes)
				sc.job.env.cfg.Logger.Info("restored Pebble state", "operator", uid, "subtask", sc.subtask,
					"local_files", rs.LocalFiles, "local_bytes", rs.LocalBytes, "downloaded_files", rs.DownloadedFiles, "downloaded_bytes", rs.DownloadedBytes)
			}
			return k
		}
		k.openErr = err // the state is declared on a heap backend, unused
	}
	k.backend = state.NewBackend(maxPar, kgs, kge, ksch)
	return k
}

// State is the backend the operator's state is declared on.
func (k *Keyed) State() *state.Backend { return k.backend }

// OnTimer sets what fires an event-time and a processing-time timer of the
// operator: the key's bytes, its key group and the time.
func (k *Keyed) OnTimer(event, proc func(kb []byte, kg int, at int64) error) {
	k.fireEvent, k.fireProc = event, proc
}

// OnWatermark sets what runs each time the operator's watermark advances
// to wm, before its event-time timers due by wm fire: for an operator that
// keeps its own index of what is due instead of a timer per key (event-time
// tumbling and sliding windows).
func (k *Keyed) OnWatermark(fn func(wm int64) error) { k.onWatermark = fn }

// OnProcessingTime sets what the operator fires from its own index of what
// is due in processing time, instead of a timer per key (processing-time
// tumbling and sliding windows): next is when its earliest entry is due (0
// if none), which the subtask wakes up for as for a timer, and fire runs
// what is due by now, before the operator's processing-time timers due by
// now fire. At the end of the input fire runs with now = math.MaxInt64.
func (k *Keyed) OnProcessingTime(next func() int64, fire func(now int64) error) {
	k.procNext, k.procFire = next, fire
}

// OnEnd sets what runs once the operator's input has ended, after every
// event-time timer has fired.
func (k *Keyed) OnEnd(end func() error) { k.end = end }

// Watermark is the operator's event-time watermark (math.MinInt64 before
// the first one).
func (k *Keyed) Watermark() int64 { return k.watermark }

// ProcessingTime is the operator's processing time (ns since the epoch):
// the wall clock when the subtask took the batch of records, or the timer,
// being handled. It is read once per batch, so records of one batch share
// it.
func (k *Keyed) ProcessingTime() int64 { return k.sc.processingTime() }

// RegisterTimer adds a timer of key kb (key group kg) at (ns) in the event
// time domain, or the processing time one.
func (k *Keyed) RegisterTimer(eventTime bool, kb []byte, kg int, at int64) {
	if eventTime {
		k.eventTimers.Register(kb, kg, at)
	} else {
		k.procTimers.Register(kb, kg, at)
	}
}

// DeleteEventTimer removes the event-time timer of key kb at (ns).
func (k *Keyed) DeleteEventTimer(kb []byte, kg int, at int64) { k.eventTimers.Delete(kb, kg, at) }

// Start finishes setting the operator up once its state is declared: its
// timers, the restore of its state from the restored checkpoint (the
// attempt's recovery time is its slowest subtask's), the changelog, and
// its watermark; from then on the subtask runs it.
func (k *Keyed) Start(sc *Subtask) error {
	if k.openErr != nil {
		return k.openErr
	}
	var err error
	if k.procTimers, err = timers.New(k.backend, "eddy.timers"); err != nil {
		return err
	}
	if k.eventTimers, err = timers.New(k.backend, "eddy.event-timers"); err != nil {
		return err
	}
	began := time.Now()
	restoredParts, restoredLogs, err := restore.Keyed(sc.ctx, sc.restoreFrom(), k.uid, k.backend)
	if err != nil {
		return err
	}
	if sc.job.restored != nil {
		storeMax(&sc.job.env.stats.recovery, int64(time.Since(began)))
	}
	if sc.job.dlog != nil {
		// Attached after the restore: replayed changes are already in the
		// checkpoint's log and must not be logged again.
		sc.attachChangelog(k, restoredParts, restoredLogs)
	}
	k.procTimers.Rebuild()
	k.eventTimers.Rebuild()
	if wm, ok := k.backend.Watermark(); ok {
		k.watermark = wm
		k.backend.SetEventTime(wm)
	}
	sc.keyed = append(sc.keyed, k)
	return nil
}

// KeySchema is the schema of keys of type K, or a permanent error naming
// operator uid.
func KeySchema[K comparable](uid string) (serde.Schema, error) {
	s, err := serde.SchemaOf[K]()
	if err != nil {
		return serde.Schema{}, errs.Kind(errs.Permanent, fmt.Errorf("eddy: %s: key type: %w", uid, err), true)
	}
	return s, nil
}

// UserError is err returned by method what of operator uid's function in
// subtask subtask: ErrUserFunction, and permanent if so marked or if
// permanent is set.
func UserError(uid string, subtask int, what string, err error, permanent bool) error {
	return errs.Kind(errs.UserFunction, fmt.Errorf("eddy: %s subtask %d %s: %w", uid, subtask, what, err), permanent)
}

// attachChangelog makes k's backend write every change to the attempt's
// log too, on top of the base it was restored from.
func (sc *Subtask) attachChangelog(k *Keyed, restoredParts []checkpoint.StatePart, restoredLogs []checkpoint.LogPart) {
	j := sc.job
	stats := j.env.stats
	env := changelog.Env{
		Config:   j.env.cfg.Changelog,
		Store:    j.blobs,
		Hedger:   j.partHedger,
		Attempts: j.dlog.Options().MaxAttempts,
		PartName: func(suffix string) string {
			return j.storage.PartBlobName(j.building.Load(), k.uid, sc.subtask, suffix)
		},
		RunID:   j.runID,
		Uploads: &j.wg,
		Logger:  j.env.cfg.Logger,
		Stall:   stats.noteStall,
		Materialized: func(d time.Duration) {
			stats.materializations.Add(1)
			stats.lastMaterialization.Store(int64(d))
		},
	}
	if k.db != nil {
		// A checkpoint of the database is the materialization.
		env.TakeStore = k.takeStore(sc)
	}
	w := j.dlog.Writer(fmt.Sprintf("%s/%d/%s", k.uid, sc.subtask, j.runID))
	k.cl = changelog.Attach(env, w, k.uid, sc.subtask, k.backend, restoredParts, restoredLogs)
}

// materialize advances the materialization of every changelog operator of
// the subtask by one step.
func (sc *Subtask) materialize() error {
	for _, k := range sc.keyed {
		if k.cl != nil {
			if err := k.cl.Step(sc.ctx, k.watermark); err != nil {
				return err
			}
		}
	}
	return nil
}

// materializeDue returns how soon a subtask waiting for records steps its
// materializations, 0 if none has key groups left to serialize.
func (sc *Subtask) materializeDue() time.Duration {
	due := time.Duration(0)
	for _, k := range sc.keyed {
		if k.cl == nil {
			continue
		}
		if d := k.cl.Due(); d > 0 && (due == 0 || d < due) {
			due = d
		}
	}
	return due
}

// closeMaterializations releases the snapshots of materializations still
// serializing when the subtask ends.
func (sc *Subtask) closeMaterializations() {
	for _, k := range sc.keyed {
		if k.cl != nil {
			k.cl.Close()
		}
	}
}

// restoreFrom is where and how this subtask restores keyed state: the
// attempt's restored checkpoint, with the changelog's objects fetched once
// for all subtasks of the process.
func (sc *Subtask) restoreFrom() restore.From {
	ro := dstl.ReadOptions{Shared: sc.job.logShared, Hedger: sc.job.readHedger}
	if cfg := sc.job.env.cfg.Changelog; cfg != nil {
		ro.LocalDir = cfg.Log.LocalDir
	}
	return restore.From{Manifest: sc.job.restored, Store: sc.job.blobs, PartReader: sc.job.partReader, Log: ro}
}
