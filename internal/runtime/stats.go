package runtime

import (
	"sync/atomic"
	"time"
)

// CheckpointStats describes one completed checkpoint.
type CheckpointStats struct {
	ID        uint64
	Completed time.Time     // when its sinks had committed
	Duration  time.Duration // trigger to manifest written
	// SyncDuration is the longest time a subtask spent at the barrier
	// (snapshotting, or cutting the log); the rest is asynchronous.
	SyncDuration time.Duration
	Bytes        int64 // state bytes written for this checkpoint (snapshots, or log with the changelog)
	FullSize     int64 // bytes of every state blob and log object the checkpoint refers to
	StateEntries int64 // keyed state entries (state, key) at the checkpoint
	Final        bool  // the checkpoint that ends a bounded job
	// Last is the subtask whose acknowledgement completed the checkpoint
	// and where its time went; with ManifestWrite it explains a slow one.
	Last AckTiming
	// ManifestWrite is the time spent writing the manifest, retries
	// included, after the last acknowledgement.
	ManifestWrite time.Duration
	// MaterializationStall is the longest time one step of a changelog
	// materialization held up a subtask's records since the previous
	// checkpoint completed (see Stats.MaterializationStall).
	MaterializationStall time.Duration
}

// AckTiming splits one subtask's part of a checkpoint: Barrier from the
// trigger until the barrier reached the subtask (aligned over its
// inputs), Sync at the barrier, Async after it (uploading state, or
// waiting for the log to be durable) until the coordinator had the
// acknowledgement.
type AckTiming struct {
	Stage, Subtask       int // the stage's position in the job graph, sources first
	Barrier, Sync, Async time.Duration
}

// Stats is a live view of a running job, safe to read from any goroutine.
type Stats struct {
	RecordsIn           int64         // records read from sources
	RecordsOut          int64         // records written to sinks
	StateEntries        int64         // keyed state entries at the last checkpoint
	Checkpoints         int64         // checkpoints completed
	LastCheckpoint      time.Duration // duration of the last completed checkpoint
	LastBytes           int64         // state bytes of the last completed checkpoint
	Restarts            int64         // restarts after failures
	LateRecords         int64         // records that arrived after their windows were gone
	LastUploaded        int64         // bytes uploaded for the last checkpoint (state parts and log)
	LastFullSize        int64         // bytes of everything the last checkpoint refers to
	Materializations    int64         // changelog materializations completed
	LastMaterialization time.Duration // duration of the last one
	// MaterializationStall is the longest time one step of a
	// materialization held up its subtask's records (serializing key
	// groups); the uploads run in the background.
	MaterializationStall time.Duration
	Recovery             time.Duration // time the current attempt spent restoring state: its slowest subtask's restore
	RestoredFrom         uint64        // checkpoint the current attempt restored from (0: none)
	// RestoredLocalBytes and RestoredDownloadedBytes are the bytes of
	// Pebble checkpoint files the current attempt's restore took from
	// local copies (local recovery) and downloaded.
	RestoredLocalBytes, RestoredDownloadedBytes int64
}

// Counters are the live counters of a job, updated by the runtime.
type Counters struct {
	recordsIn, recordsOut, stateEntries, checkpoints, lastDur, lastBytes, restarts, restored, lateRecords atomic.Int64
	lastUploaded, lastFull, materializations, lastMaterialization, recovery                               atomic.Int64
	materializationStall, stallSinceCheckpoint                                                            atomic.Int64
	restoredLocal, restoredDownloaded                                                                     atomic.Int64
}

// Stats returns the counters as they are now.
func (s *Counters) Stats() Stats {
	return Stats{RecordsIn: s.recordsIn.Load(), RecordsOut: s.recordsOut.Load(), StateEntries: s.stateEntries.Load(),
		Checkpoints: s.checkpoints.Load(), LastCheckpoint: time.Duration(s.lastDur.Load()), LastBytes: s.lastBytes.Load(),
		Restarts: s.restarts.Load(), RestoredFrom: uint64(s.restored.Load()), LateRecords: s.lateRecords.Load(),
		LastUploaded: s.lastUploaded.Load(), LastFullSize: s.lastFull.Load(), Materializations: s.materializations.Load(),
		LastMaterialization: time.Duration(s.lastMaterialization.Load()), Recovery: time.Duration(s.recovery.Load()),
		MaterializationStall: time.Duration(s.materializationStall.Load()),
		RestoredLocalBytes:   s.restoredLocal.Load(), RestoredDownloadedBytes: s.restoredDownloaded.Load()}
}

// noteStall records a materialization step that held its subtask for d.
func (s *Counters) noteStall(d time.Duration) {
	storeMax(&s.materializationStall, int64(d))
	storeMax(&s.stallSinceCheckpoint, int64(d))
}

// storeMax sets a to v if v is larger.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}
