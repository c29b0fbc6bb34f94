package restore

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

// From is the checkpoint a restore reads, and how.
type From struct {
	Manifest *checkpoint.Manifest // nil: nothing to restore
	Store    blob.Store
	// PartReader hedges the reads of state parts up to MaxHedgedPart; nil:
	// no hedging.
	PartReader *blob.Hedger
	// Log is how the changelog's objects are read; with Log.Shared the
	// subtasks of a process fetch each object once between them.
	Log dstl.ReadOptions
}

// Keyed loads the keyed state of operator uid from the checkpoint into b,
// reading every part and log range whose key groups overlap b's, and
// returns the parts and log ranges it used.
func Keyed(ctx context.Context, from From, uid string, b *state.Backend) ([]checkpoint.StatePart, []checkpoint.LogPart, error) {
	m := from.Manifest
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
		// A store-backed backend replays its log object by object instead
		// (replayLog), so its memory does not grow with the log.
		prefetch := func() (map[string]*dstl.Batch, error) { return nil, nil }
		if !b.StoreBacked() {
			prefetch = prefetchLog(ctx, from, opLogs)
		}
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
		if err := LoadParts(ctx, from.Store, from.PartReader, b, opParts); err != nil {
			var re *state.RestoreError
			if errors.As(err, &re) {
				return nil, nil, errs.Kind(errs.IncompatibleState, fmt.Errorf("eddy: cannot restore operator %s from checkpoint %d (the checkpoint is left as it is): %w", uid, m.ID, err), true)
			}
			return nil, nil, Failure(m.ID, fmt.Errorf("operator %s: %w", uid, err))
		}
		usedLogs = append(usedLogs, opLogs...)
		objs, err := prefetch()
		if err != nil {
			return nil, nil, Failure(m.ID, fmt.Errorf("operator %s: reading the changelog: %w", uid, err))
		}
		err = replayLog(ctx, from, b, opLogs, objs)
		from.Log.Shared.Release(objs)
		if err != nil {
			return nil, nil, Failure(m.ID, fmt.Errorf("operator %s: replaying the changelog: %w", uid, err))
		}
		// The watermark at the checkpoint, not the parts' older one: the
		// least of the subtasks whose key groups this one takes.
		if wm, ok := Watermark(op.Watermarks, start, end); ok {
			b.SetWatermark(wm)
		}
	}
	return usedParts, usedLogs, nil
}

// PartFetches is how many state parts a subtask fetches at once while
// restoring: a changelog checkpoint has many parts of a few MiB, and object
// storage serves them in parallel far faster than one after another.
const PartFetches = 8

// MaxHedgedPart is the largest state part whose read is hedged: a
// materialized part (a few MiB) waits on the store's latency, a whole
// subtask's snapshot on its bandwidth, which a second read would only
// share.
const MaxHedgedPart = 16 << 20

// LoadParts fetches parts, up to PartFetches at a time, and loads each into
// b as it arrives. The part of a Pebble checkpoint is its state header
// only (Backend.RestoreHeader): the caller restored b's store from its
// files before. A part counts only for the key groups it is listed for
// (a changelog subtask may carry a wider old part for its own range); the
// parts of a checkpoint list disjoint key groups, so the order they load in
// does not matter. Each fetcher reuses its buffer once its part is loaded,
// so a restore of many parts holds PartFetches of them, not all.
func LoadParts(ctx context.Context, store blob.Store, hedger *blob.Hedger, b *state.Backend, parts []checkpoint.StatePart) error {
	if len(parts) == 0 {
		return nil
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
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
	for range min(PartFetches, len(parts)) {
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
				if hedger != nil && parts[i].Size <= MaxHedgedPart {
					data, err = hedger.GetInto(ctx, store, parts[i].Blob, &buf, 3)
				} else {
					data, err = blob.GetInto(ctx, store, parts[i].Blob, &buf)
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
			if err == nil && p.Pebble != nil {
				// The entries are in the Pebble files, which the runtime
				// restored into b's store before: the header's schemas
				// are checked and its watermark taken.
				err = b.RestoreHeader(f.data)
			} else if err == nil {
				err = b.RestorePart(f.data, int(p.KeyGroupStart), int(p.KeyGroupEnd))
			}
			if err != nil {
				first = fmt.Errorf("state part %s: %w", p.Blob, err)
				cancel() // the fetchers stop; out closes once they have
			}
		}
		f.loaded <- struct{}{}
	}
	if first == nil && parent.Err() != nil {
		return parent.Err()
	}
	return first
}

// handle is the dstl handle a log part lists.
func handle(l checkpoint.LogPart) dstl.Handle {
	h := dstl.Handle{Writer: l.Writer, After: l.After, Upto: l.Upto, Objects: l.Objects, Size: l.Size, CRCs: l.CRCs}
	for _, u := range l.Uploads {
		h.Uploads = append(h.Uploads, dstl.Upload(u))
	}
	return h
}

// prefetchLog starts fetching the objects of logs in the background and
// returns a function that waits for them. The objects come through
// from.Log.Shared; release the result there once replayed.
func prefetchLog(ctx context.Context, from From, logs []checkpoint.LogPart) func() (map[string]*dstl.Batch, error) {
	if len(logs) == 0 {
		return func() (map[string]*dstl.Batch, error) { return nil, nil }
	}
	hs := make([]dstl.Handle, len(logs))
	for i, l := range logs {
		hs[i] = handle(l)
	}
	var objs map[string]*dstl.Batch
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		objs, err = dstl.Fetch(ctx, from.Store, from.Log, hs)
	}()
	return func() (map[string]*dstl.Batch, error) {
		<-done
		return objs, err
	}
}

// replayLog applies the restored log parts overlapping b's key groups. Each
// part counts only for the key groups it is listed for; parts listed for
// the same range are replayed together, in manifest order, so changes of a
// key apply in log order.
func replayLog(ctx context.Context, from From, b *state.Backend, logs []checkpoint.LogPart, prefetched map[string]*dstl.Batch) error {
	if len(logs) == 0 {
		return nil
	}
	start, end := b.KeyGroups()
	ro := from.Log
	ro.Prefetched = prefetched
	type span struct{ from, to uint32 }
	var order []span
	groups := map[span][]dstl.Handle{}
	for _, l := range logs {
		sp := span{max(l.KeyGroupStart, uint32(start)), min(l.KeyGroupEnd, uint32(end))}
		if sp.from >= sp.to {
			continue
		}
		if _, seen := groups[sp]; !seen {
			order = append(order, sp)
		}
		groups[sp] = append(groups[sp], handle(l))
	}
	apply := func(c *dstl.Change) error {
		return b.ApplyChange(c.KeyGroup, c.State, state.ChangeOp(c.Op), c.Key, c.Sub, c.Value)
	}
	for _, sp := range order {
		if b.StoreBacked() {
			// Object by object: the state is on disk, and holding the
			// whole log since the materialization in memory (as Read does
			// to apply only the last change of each key) would make the
			// restore's memory grow with the log.
			seq := ro
			seq.Fetches = 0
			err := dstl.ReadSequential(ctx, from.Store, seq, groups[sp], sp.from, sp.to, apply)
			if !errors.Is(err, dstl.ErrOutOfOrder) {
				if err != nil {
					return err
				}
				continue
			}
			// Every logged change sets a whole value or an element, so
			// applying all of them after the ones ReadSequential applied
			// leaves the same state as applying all of them once.
		}
		if err := dstl.Read(ctx, from.Store, ro, groups[sp], sp.from, sp.to, apply); err != nil {
			return err
		}
	}
	return nil
}

// Error is a checkpoint that turned out unreadable while restoring; the job
// falls back to the one before it.
type Error struct {
	ID  uint64
	Err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("restoring checkpoint %d: %v", e.ID, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, errs.CorruptCheckpoint) hold.
func (e *Error) Is(target error) bool { return target == errs.CorruptCheckpoint }

// Watermark returns the least watermark of those recorded for key groups
// overlapping [start, end), and whether there is one.
func Watermark(wms []checkpoint.Watermark, start, end int) (int64, bool) {
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

// Failure classifies an error reading checkpoint id: a corrupt or missing
// object makes the checkpoint unusable (*Error: fall back to the previous
// one); anything else, such as a network error, may pass, so the attempt
// fails and the restart strategy tries the same checkpoint again. Falling
// back needlessly would repeat output the newer checkpoint committed.
func Failure(id uint64, err error) error {
	var ce *blob.CorruptError
	if errors.As(err, &ce) || errors.Is(err, blob.ErrNotFound) || errors.Is(err, dstl.ErrCorrupt) {
		return &Error{ID: id, Err: err}
	}
	return errs.Kind(errs.Storage, fmt.Errorf("eddy: restoring checkpoint %d: %w", id, err), false)
}
