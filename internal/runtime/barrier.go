package runtime

import (
	"fmt"
	"math"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/internal/shuffle"
	"github.com/eddyflow/eddy/internal/snapshot"
)

// checkpoint runs at an aligned barrier: snapshot keyed state, pre-commit
// sinks, forward the barrier, and acknowledge to the coordinator. State is
// written to storage in the background (internal/snapshot); the ack
// follows the write.
func (sc *Subtask) checkpoint(id uint64, final bool, splits []checkpoint.SplitState) error {
	syncStart := time.Now()
	a := ack{Stage: sc.st.id, Subtask: sc.subtask, ID: id, Splits: splits, Parallelism: sc.par, SinkTxns: map[string][]byte{}, Barrier: syncStart}
	if sc.st.source != nil {
		a.Source = sc.st.source.name
	}
	var parts []snapshot.Part
	var size int64 // bytes of the keyed state at its last snapshot or restore
	var waits []snapshot.Wait
	for _, k := range sc.keyed {
		if err := k.backend.Err(); err != nil && k.db == nil {
			return fmt.Errorf("eddy: %s subtask %d: writing the changelog: %w", k.uid, sc.subtask, err)
		}
		if k.watermark != math.MinInt64 {
			k.backend.SetWatermark(k.watermark)
		}
		if k.db != nil {
			// Counting a store's entries reads all of it: its size on
			// disk stands for the state's instead.
			size += int64(k.db.Health().DiskBytes)
			if k.cl != nil {
				// The last materialization (a checkpoint of the
				// database) and the log since it.
				waits = append(waits, k.cl.Checkpoint(&a, k.watermark))
				continue
			}
			if sc.job.storage == nil {
				if err := k.backend.Flush(); err != nil {
					return fmt.Errorf("eddy: %s subtask %d: %w", k.uid, sc.subtask, err)
				}
				continue
			}
			p, err := k.pebblePart(sc, id)
			if err != nil {
				return err
			}
			parts = append(parts, p)
			continue
		}
		a.Entries += int64(k.backend.Entries())
		start, end := k.backend.KeyGroups()
		for kg := start; kg < end; kg++ {
			size += int64(k.backend.GroupBytes(kg))
		}
		if k.cl != nil {
			waits = append(waits, k.cl.Checkpoint(&a, k.watermark))
			continue
		}
		buf := k.snapshotBuf() // AppendSnapshot sizes it
		data, err := k.backend.AppendSnapshot((*buf)[:0])
		if err != nil {
			k.releaseSnapshotBuf(buf)
			return fmt.Errorf("eddy: snapshot of %s subtask %d: %w", k.uid, sc.subtask, err)
		}
		*buf = data
		// The attempt's run token in the name: a fenced writer still
		// uploading its part of the same id cannot replace this one.
		var name string
		if sc.job.storage != nil {
			name = sc.job.storage.PartBlobName(id, k.uid, sc.subtask, sc.job.runID)
		}
		parts = append(parts, snapshot.Part{UID: k.uid, Subtask: sc.subtask, KeyGroupStart: start, KeyGroupEnd: end,
			Name: name, Data: data, Release: func() { k.releaseSnapshotBuf(buf) }})
	}
	if len(sc.keyed) > 0 {
		sc.m.StateEntries.Store(a.Entries)
		sc.m.StateSizeBytes.Store(size)
	}
	for _, s := range sc.sinks {
		txn, err := s.w.PreCommit(id)
		if err != nil {
			return fmt.Errorf("eddy: sink %s subtask %d pre-commit of checkpoint %d: %w", s.entry.name, sc.subtask, id, err)
		}
		if txn != nil {
			a.SinkTxns[s.entry.name] = txn
		}
	}
	if err := sc.controlOut(shuffle.Msg{Kind: shuffle.Barrier, ID: id, Batch: final}); err != nil {
		return err
	}
	sc.flushCounters()
	a.SyncDur = time.Since(syncStart)
	var store blob.Store
	if sc.job.storage != nil {
		store = sc.job.blobs
	}
	return sc.acker.Ack(sc.ctx, &a, store, parts, waits)
}

// keepSnapshotBufs is how many buffers of finished uploads an operator
// keeps for its next snapshots: one, and one more for a snapshot taken
// while the last one still uploads.
const keepSnapshotBufs = 2

// snapshotBuf returns a buffer for the operator's next heap snapshot: one
// of its earlier snapshots' whose upload is done, else a new one. An
// operator keeps its own, not a sync.Pool's, which every GC empties: a job
// that allocates collects several times between checkpoints, so each
// snapshot allocated and zeroed a buffer of the whole state anew (Nexmark
// q4: 70% of its checkpoints' CPU, BENCHMARKS.md). The price is a buffer
// of the serialized state held between checkpoints, which the snapshot
// needs at every checkpoint anyway.
func (k *Keyed) snapshotBuf() *[]byte {
	k.snapMu.Lock()
	defer k.snapMu.Unlock()
	if n := len(k.snapFree); n > 0 {
		b := k.snapFree[n-1]
		k.snapFree = k.snapFree[:n-1]
		return b
	}
	return new([]byte)
}

// releaseSnapshotBuf takes back a buffer of snapshotBuf once its upload is
// done (from the uploading goroutine).
func (k *Keyed) releaseSnapshotBuf(b *[]byte) {
	k.snapMu.Lock()
	defer k.snapMu.Unlock()
	if len(k.snapFree) < keepSnapshotBufs {
		*b = (*b)[:0]
		k.snapFree = append(k.snapFree, b)
	}
}
