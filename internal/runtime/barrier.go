package runtime

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/internal/bufpool"
	"github.com/eddyflow/eddy/internal/errs"
	"github.com/eddyflow/eddy/internal/manifest"
)

// checkpoint runs at an aligned barrier: snapshot keyed state, pre-commit
// sinks, forward the barrier, and acknowledge to the coordinator. State is
// written to storage in the background; the ack follows the write.
func (sc *Subtask) checkpoint(id uint64, final bool, splits []checkpoint.SplitState) error {
	syncStart := time.Now()
	a := ack{Stage: sc.st.id, Subtask: sc.subtask, ID: id, Splits: splits, Parallelism: sc.par, SinkTxns: map[string][]byte{}, Barrier: syncStart}
	if sc.st.source != nil {
		a.Source = sc.st.source.name
	}
	type pending struct {
		op   *Keyed
		data *[]byte // from snapshotBufs, returned once uploaded
	}
	var snaps []pending
	var size int64 // bytes of the keyed state at its last snapshot or restore
	var waits []func(context.Context) error
	for _, k := range sc.keyed {
		if err := k.backend.Err(); err != nil {
			return fmt.Errorf("eddy: %s subtask %d: writing the changelog: %w", k.uid, sc.subtask, err)
		}
		if k.watermark != math.MinInt64 {
			k.backend.SetWatermark(k.watermark)
		}
		a.Entries += int64(k.backend.Entries())
		start, end := k.backend.KeyGroups()
		for kg := start; kg < end; kg++ {
			size += int64(k.backend.GroupBytes(kg))
		}
		if k.cl != nil {
			waits = append(waits, sc.changelogCheckpoint(k, &a))
			continue
		}
		buf := snapshotBufs.Get(0) // AppendSnapshot sizes it
		data, err := k.backend.AppendSnapshot((*buf)[:0])
		if err != nil {
			return fmt.Errorf("eddy: snapshot of %s subtask %d: %w", k.uid, sc.subtask, err)
		}
		*buf = data
		snaps = append(snaps, pending{k, buf})
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
	if err := sc.controlOut(msg{kind: msgBarrier, id: id, batch: final}); err != nil {
		return err
	}
	sc.flushCounters()
	a.SyncDur = time.Since(syncStart)
	job := sc.job
	// A subtask's acks reach the coordinator in barrier order: its sink
	// transactions travel with them, and a later checkpoint completing
	// before an earlier (aborted) one's ack arrived would leave that
	// transaction out of its manifest, and a restore from it would abort
	// output that precedes its barrier.
	prev := sc.acked
	prevSent := prev == nil
	if !prevSent {
		select {
		case <-prev:
			prevSent = true
		default:
		}
	}
	if job.storage == nil {
		for _, p := range snaps {
			snapshotBufs.Put(p.data)
		}
		snaps, waits = nil, nil
	}
	if len(snaps) == 0 && len(waits) == 0 && prevSent {
		sc.acked = nil
		return job.sendAck(sc.ctx, a)
	}
	sent := make(chan struct{})
	sc.acked = sent
	send := func() {
		defer close(sent)
		if prev != nil {
			select {
			case <-prev:
			case <-sc.ctx.Done():
				return
			}
		}
		_ = job.sendAck(sc.ctx, a)
	}
	job.wg.Add(1)
	go func() {
		defer job.wg.Done()
		defer func() {
			for _, p := range snaps {
				snapshotBufs.Put(p.data)
			}
		}()
		for _, wait := range waits {
			if err := wait(sc.ctx); err != nil {
				// The log could not be made durable: it is broken, and
				// only a restart from the last checkpoint repairs it.
				a.Err, a.Fatal = err, true
				send()
				return
			}
		}
		for _, p := range snaps {
			start, end := p.op.backend.KeyGroups()
			// The attempt's run token in the name: a fenced writer still
			// uploading its part of the same id cannot replace this one.
			name := job.storage.PartBlobName(id, p.op.uid, sc.subtask, job.runID)
			data := *p.data
			if err := job.blobs.Put(sc.ctx, name, data); err != nil {
				a.Err = errs.Kind(errs.Storage, fmt.Errorf("writing state of %s subtask %d to %s: %w", p.op.uid, sc.subtask, name, err), false)
				break
			}
			a.Parts = append(a.Parts, manifest.OpPart{UID: p.op.uid, Part: checkpoint.StatePart{Subtask: uint32(sc.subtask),
				KeyGroupStart: uint32(start), KeyGroupEnd: uint32(end), Blob: name, Size: int64(len(data)), CRC: blob.Checksum(data)}})
			a.Bytes += int64(len(data))
		}
		send()
	}()
	return nil
}

// snapshotBufs recycles the buffers that synchronous checkpoints serialize
// state into, whatever their size: one is back once its upload's Put has
// returned, and the next checkpoint would allocate as much again.
var snapshotBufs = &bufpool.Pool{}
