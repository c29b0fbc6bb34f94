package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/internal/errs"
	"github.com/eddyflow/eddy/state"
)

// restoreKeyed loads the keyed state of operator uid from the restored
// checkpoint, reading every part whose key groups overlap this subtask's.
func (sc *Subtask) restoreKeyed(uid string, b *state.Backend) ([]checkpoint.StatePart, []checkpoint.LogPart, error) {
	m := sc.job.restored
	if m == nil {
		return nil, nil, nil
	}
	start, end := b.KeyGroups()
	var usedParts []checkpoint.StatePart
	var usedLogs []checkpoint.LogPart
	for _, op := range m.Operators {
		if op.Name != uid {
			continue
		}
		if int(op.MaxParallelism) != b.MaxParallelism() {
			return nil, nil, errs.Kind(errs.IncompatibleState, fmt.Errorf("eddy: operator %s: checkpoint %d has %d key groups, the job %d; the max parallelism of a job cannot change", uid, m.ID, op.MaxParallelism, b.MaxParallelism()), true)
		}
		// The log's objects are fetched while the snapshot parts load.
		var opLogs []checkpoint.LogPart
		for _, l := range op.Changelog {
			if int(l.KeyGroupEnd) <= start || int(l.KeyGroupStart) >= end {
				continue
			}
			opLogs = append(opLogs, l)
		}
		prefetch := sc.prefetchChangelog(opLogs)
		var opParts []checkpoint.StatePart
		for _, p := range op.Parts {
			if int(p.KeyGroupEnd) <= start || int(p.KeyGroupStart) >= end {
				continue
			}
			usedParts = append(usedParts, p)
			if p.Blob != "" {
				opParts = append(opParts, p)
			}
		}
		if err := sc.loadParts(uid, b, opParts); err != nil {
			var re *state.RestoreError
			if errors.As(err, &re) {
				return nil, nil, errs.Kind(errs.IncompatibleState, fmt.Errorf("eddy: cannot restore operator %s from checkpoint %d (the checkpoint is left as it is): %w", uid, m.ID, err), true)
			}
			return nil, nil, restoreFailure(m.ID, fmt.Errorf("operator %s: %w", uid, err))
		}
		usedLogs = append(usedLogs, opLogs...)
		objs, err := prefetch()
		if err != nil {
			return nil, nil, restoreFailure(m.ID, fmt.Errorf("operator %s: reading the changelog: %w", uid, err))
		}
		err = sc.replayChangelog(uid, b, opLogs, objs)
		sc.job.logShared.Release(objs)
		if err != nil {
			return nil, nil, restoreFailure(m.ID, fmt.Errorf("operator %s: replaying the changelog: %w", uid, err))
		}
		// The watermark at the checkpoint, not the parts' older one: the
		// least of the subtasks whose key groups this one takes.
		if wm, ok := checkpointWatermark(op.Watermarks, start, end); ok {
			b.SetWatermark(wm)
		}
	}
	return usedParts, usedLogs, nil
}

// partFetches is how many state parts a subtask fetches at once while
// restoring: a changelog checkpoint has many parts of a few MiB, and object
// storage serves them in parallel far faster than one after another.
const partFetches = 8

// loadParts fetches parts, up to partFetches at a time, and loads each into
// b as it arrives. A part counts only for the key groups it is listed for
// (a changelog subtask may carry a wider old part for its own range); the
// parts of a checkpoint list disjoint key groups, so the order they load in
// does not matter. Each fetcher reuses its buffer once its part is loaded,
// so a restore of many parts holds partFetches of them, not all.
func (sc *Subtask) loadParts(uid string, b *state.Backend, parts []checkpoint.StatePart) error {
	if len(parts) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(sc.ctx)
	defer cancel()
	type fetched struct {
		i      int
		data   []byte
		err    error
		loaded chan struct{} // receives when data may be overwritten
	}
	todo := make(chan int, len(parts))
	for i := range parts {
		todo <- i
	}
	close(todo)
	out := make(chan fetched)
	var wg sync.WaitGroup
	for range min(partFetches, len(parts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			loaded := make(chan struct{})
			for i := range todo {
				if ctx.Err() != nil {
					return
				}
				var data []byte
				var err error
				if parts[i].Size <= maxHedgedPart {
					data, err = sc.job.partReader.GetInto(ctx, sc.job.blobs, parts[i].Blob, &buf, 3)
				} else {
					data, err = blob.GetInto(ctx, sc.job.blobs, parts[i].Blob, &buf)
				}
				select {
				case out <- fetched{i: i, data: data, err: err, loaded: loaded}:
				case <-ctx.Done():
					return
				}
				<-loaded
			}
		}()
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	var first error
	for f := range out {
		if first == nil {
			p, err := parts[f.i], f.err
			if err == nil && p.CRC != 0 {
				if got := blob.Checksum(f.data); got != p.CRC {
					// A valid blob, but not the one the checkpoint wrote.
					err = &blob.CorruptError{Name: p.Blob, Reason: fmt.Sprintf("the manifest records CRC-32C %08x, the blob holds %08x (replaced by another file?)", p.CRC, got)}
				}
			}
			if err == nil {
				err = b.RestorePart(f.data, int(p.KeyGroupStart), int(p.KeyGroupEnd))
			}
			if err != nil {
				first = fmt.Errorf("state part %s: %w", p.Blob, err)
				cancel() // the fetchers stop; out closes once they have
			}
		}
		f.loaded <- struct{}{}
	}
	if first == nil && sc.ctx.Err() != nil {
		return sc.ctx.Err()
	}
	return first
}

// maxHedgedPart is the largest state part whose read is hedged: a
// materialized part (a few MiB) waits on the store's latency, a whole
// subtask's snapshot on its bandwidth, which a second read would only
// share.
const maxHedgedPart = 16 << 20

// restoreError is a checkpoint that turned out unreadable while restoring;
// the job falls back to the one before it.
type restoreError struct {
	id  uint64
	err error
}

func (e *restoreError) Error() string {
	return fmt.Sprintf("restoring checkpoint %d: %v", e.id, e.err)
}

func (e *restoreError) Unwrap() error { return e.err }

// Is makes errors.Is(err, ErrCorruptCheckpoint) hold.
func (e *restoreError) Is(target error) bool { return target == errs.CorruptCheckpoint }

// checkpointWatermark returns the least watermark of those recorded for
// key groups overlapping [start, end), and whether there is one.
func checkpointWatermark(wms []checkpoint.Watermark, start, end int) (int64, bool) {
	wm, ok := int64(0), false
	for _, w := range wms {
		if int(w.KeyGroupEnd) <= start || int(w.KeyGroupStart) >= end {
			continue
		}
		if !ok || w.Nanos < wm {
			wm, ok = w.Nanos, true
		}
	}
	return wm, ok
}

// restoreFailure classifies an error reading checkpoint id: a corrupt or
// missing object makes the checkpoint unusable (fall back to the previous
// one); anything else, such as a network error, may pass, so the attempt
// fails and the restart strategy tries the same checkpoint again. Falling
// back needlessly would repeat output the newer checkpoint committed.
func restoreFailure(id uint64, err error) error {
	var ce *blob.CorruptError
	if errors.As(err, &ce) || errors.Is(err, blob.ErrNotFound) || errors.Is(err, dstl.ErrCorrupt) {
		return &restoreError{id: id, err: err}
	}
	return errs.Kind(errs.Storage, fmt.Errorf("eddy: restoring checkpoint %d: %w", id, err), false)
}
