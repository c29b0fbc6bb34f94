package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/internal/changelog"
	"github.com/eddyflow/eddy/internal/errs"
	"github.com/eddyflow/eddy/internal/restore"
	"github.com/eddyflow/eddy/internal/snapshot"
	"github.com/eddyflow/eddy/state"
	"github.com/eddyflow/eddy/state/pebble"
)

// PebbleConfig turns on the Pebble state backend: every keyed operator
// subtask keeps its state in a Pebble database of its own under Dir, all
// of them sharing one pebble.Pool per Run.
type PebbleConfig struct {
	Dir  string              // the local directory the databases go under
	Pool []pebble.PoolOption // the pool's memory; MaxDBs defaults to the job's keyed subtasks
}

// pebbleRun is the Pebble state of one Run: the pool every database of
// every attempt takes its memory from, and the Run's directory, locked for
// as long as the Run lasts.
type pebbleRun struct {
	pool   *pebble.Pool
	dir    string // <Dir>/run-<token>; each attempt's databases under <dir>/<attempt>
	unlock func()

	// Local recovery: directories of databases a restore may take
	// checkpoint files from instead of downloading them — the Run
	// directories killed processes left (locked by this Run now) and the
	// attempt directories of this Run's failed attempts. They are removed
	// once a checkpoint completes after them, or when the Run ends.
	mu    sync.Mutex
	local []localCopy
}

// localCopy is a directory kept for local recovery.
type localCopy struct {
	dir    string
	unlock func() // nil: not locked on its own
}

// runDirPrefix starts the name of a Run's directory under PebbleConfig.Dir.
const runDirPrefix = "run-"

// openPebble creates the pool and the directory of a Run of graph g. The
// directories that Runs of killed processes left under cfg.Dir (their
// lock is free) are kept for local recovery until the Run's first
// checkpoint: the databases are never reopened from them, but a restore
// takes the checkpoint files it finds there intact (pebble.Pool's
// SetLocalCopies) instead of downloading them.
func openPebble(cfg *PebbleConfig, stages []*Stage) (*pebbleRun, error) {
	if cfg.Dir == "" {
		return nil, errors.New("eddy: the Pebble state backend needs a local directory")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("eddy: Pebble state directory: %w", err)
	}
	stale := staleRuns(cfg.Dir)
	fail := func() {
		for _, c := range stale {
			c.unlock()
		}
	}
	dbs := 0
	for _, st := range stages {
		dbs += st.parallelism * st.keyedOps
	}
	dbs = max(dbs, 1)
	opts := append([]pebble.PoolOption{pebble.MaxDBs(dbs), pebble.Memory(max(pebble.DefaultMemory, pebble.MinMemory(dbs)))}, cfg.Pool...)
	pool, err := pebble.NewPool(opts...)
	if err != nil {
		fail()
		return nil, errs.Kind(errs.Permanent, fmt.Errorf("eddy: the job has %d keyed operator subtasks: %w", dbs, err), true)
	}
	dir, err := os.MkdirTemp(cfg.Dir, runDirPrefix)
	if err != nil {
		fail()
		pool.Close()
		return nil, fmt.Errorf("eddy: Pebble state directory: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		fail()
		pool.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("eddy: Pebble state directory: %w", err)
	}
	p := &pebbleRun{pool: pool, dir: dir, unlock: unlock, local: stale}
	p.setLocal()
	return p, nil
}

// close releases the pool and removes the Run's directory and what it
// kept for local recovery.
func (p *pebbleRun) close() {
	p.dropLocal()
	p.pool.Close()
	os.RemoveAll(p.dir)
	p.unlock()
}

// keep adds a failed attempt's directory to the local copies.
func (p *pebbleRun) keep(dir string) {
	p.mu.Lock()
	p.local = append(p.local, localCopy{dir: dir})
	p.mu.Unlock()
	p.setLocal()
}

func (p *pebbleRun) setLocal() {
	p.mu.Lock()
	dirs := make([]string, len(p.local))
	for i, c := range p.local {
		dirs[i] = c.dir
	}
	p.mu.Unlock()
	p.pool.SetLocalCopies(dirs...)
}

// dropLocal removes the local copies: a checkpoint completed after every
// restore that could use them.
func (p *pebbleRun) dropLocal() {
	p.mu.Lock()
	local := p.local
	p.local = nil
	p.mu.Unlock()
	if len(local) == 0 {
		return
	}
	p.pool.SetLocalCopies()
	for _, c := range local {
		os.RemoveAll(c.dir)
		if c.unlock != nil {
			c.unlock()
		}
	}
}

// staleRuns locks and returns the Run directories under dir whose lock no
// process holds: those of killed processes.
func staleRuns(dir string) []localCopy {
	if !dirLocks {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []localCopy
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), runDirPrefix) {
			continue
		}
		d := filepath.Join(dir, e.Name())
		unlock, err := lockDir(d)
		if err != nil {
			continue // held: a Run of another process uses it
		}
		out = append(out, localCopy{dir: d, unlock: unlock})
	}
	return out
}

// pebbleAttempt is the Pebble state of one attempt: its databases, closed
// when the attempt ends, and the local checkpoints kept for local
// recovery.
type pebbleAttempt struct {
	run    *pebbleRun
	dir    string
	mu     sync.Mutex
	dbs    []*pebble.DB
	locals []keptCheckpoint
}

// keptCheckpoint is a local checkpoint of a database, kept until a newer
// checkpoint of the job completes.
type keptCheckpoint struct {
	db *pebble.DB
	id uint64
	lc *pebble.LocalCheckpoint
}

// keepLocal keeps the local checkpoint id of db, uploaded (or given up).
func (a *pebbleAttempt) keepLocal(db *pebble.DB, id uint64, lc *pebble.LocalCheckpoint) {
	a.mu.Lock()
	a.locals = append(a.locals, keptCheckpoint{db: db, id: id, lc: lc})
	a.mu.Unlock()
}

// completed removes the local checkpoints that checkpoint id, now
// complete, makes useless: of each database, those older than its newest
// one up to id (the one a restore of id reads).
func (a *pebbleAttempt) completed(id uint64) {
	a.mu.Lock()
	newest := map[*pebble.DB]uint64{}
	for _, k := range a.locals {
		if k.id <= id && k.id > newest[k.db] {
			newest[k.db] = k.id
		}
	}
	var drop []*pebble.LocalCheckpoint
	kept := a.locals[:0]
	for _, k := range a.locals {
		if k.id < newest[k.db] {
			drop = append(drop, k.lc)
		} else {
			kept = append(kept, k)
		}
	}
	clear(a.locals[len(kept):])
	a.locals = kept
	a.mu.Unlock()
	for _, lc := range drop {
		_ = lc.Remove()
	}
}

// end closes the attempt's databases (once its subtasks and uploads are
// done) and keeps their directory for the local recovery of the next
// attempt, if one comes; the Run removes it.
func (a *pebbleAttempt) end(m *Metrics) {
	a.mu.Lock()
	dbs := a.dbs
	a.dbs = nil
	a.mu.Unlock()
	for _, db := range dbs {
		m.dropPebble(db)
		db.Close()
	}
	a.run.keep(a.dir)
}

// openStore returns the database of keyed operator uid in subtask sc: the
// checkpoint's Pebble parts of the operator restored into it, or a new one.
// Heap snapshot parts of a checkpoint taken with the heap backend are
// loaded later, by Start, through the backend.
func (sc *Subtask) openStore(uid string, start, end int) (*pebble.DB, error) {
	j := sc.job
	a := j.pebble
	dir := filepath.Join(a.dir, fmt.Sprintf("%s-%d", sanitizeDir(uid), sc.subtask))
	maxPar := j.env.cfg.MaxParallelism
	parts, err := pebbleParts(j.restored, uid, maxPar, start, end)
	if err != nil {
		return nil, err
	}
	var db *pebble.DB
	if parts == nil {
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		db, err = a.run.pool.Open(dir, maxPar, start, end)
	} else {
		db, err = a.run.pool.Restore(sc.ctx, j.blobs, dir, maxPar, start, end, parts)
		if err != nil {
			id := j.restored.ID
			var ce *pebble.CorruptFileError
			if errors.As(err, &ce) {
				return nil, &restore.Error{ID: id, Err: fmt.Errorf("operator %s subtask %d: %w", uid, sc.subtask, err)}
			}
			var de *pebble.DirError
			if !errors.As(err, &de) {
				err = restore.Failure(id, fmt.Errorf("operator %s subtask %d: %w", uid, sc.subtask, err))
			}
		}
	}
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.dbs = append(a.dbs, db)
	a.mu.Unlock()
	j.env.metrics.addPebble(uid, sc.subtask, db)
	return db, nil
}

// pebbleParts returns the Pebble checkpoints of operator uid in m that
// overlap the key groups [start, end), or nil if m has none (no
// checkpoint, a new operator, heap snapshot parts only, or key groups of
// another max parallelism, which restore.Keyed refuses). Every part of the
// operator is returned, for Pool.Restore to plan with, each narrowed to
// the key groups it is listed for (with the changelog, a subtask lists the
// databases it was restored from for its own key groups); a heap snapshot
// part (a changelog checkpoint taken before every subtask of a run on
// Pebble materialized) is a part without files, whose key groups start
// empty and are loaded later from the snapshot, by Start; so are key
// groups no part lists (with the changelog, those of a subtask that had
// not materialized yet: its log holds all of their state). Consecutive
// entries of one database are joined, so that it is downloaded once.
func pebbleParts(m *checkpoint.Manifest, uid string, maxPar, start, end int) ([]pebble.Checkpoint, error) {
	if m == nil {
		return nil, nil
	}
	for _, op := range m.Operators {
		if op.Name != uid || int(op.MaxParallelism) != maxPar {
			continue
		}
		parts := slices.Clone(op.Parts)
		slices.SortFunc(parts, func(a, b checkpoint.StatePart) int { return cmp.Compare(a.KeyGroupStart, b.KeyGroupStart) })
		var out []pebble.Checkpoint
		overlap := false
		next := uint32(0) // the first key group no part before lists
		for _, p := range parts {
			if p.KeyGroupStart >= p.KeyGroupEnd {
				continue // holds no key groups
			}
			if p.KeyGroupStart > next {
				// Key groups no part lists: with the changelog, those of
				// a subtask that had not materialized yet, all in its log.
				out = append(out, pebble.Checkpoint{MaxParallelism: op.MaxParallelism, Start: next, End: p.KeyGroupStart})
			}
			next = max(next, p.KeyGroupEnd)
			c := pebble.Checkpoint{MaxParallelism: op.MaxParallelism, Start: p.KeyGroupStart, End: p.KeyGroupEnd}
			if p.Pebble != nil {
				if int(p.KeyGroupEnd) > start && int(p.KeyGroupStart) < end {
					overlap = true
				}
				c.Start, c.End = p.DBKeyGroups()
				c.OwnStart, c.OwnEnd = p.KeyGroupStart, p.KeyGroupEnd
				for _, f := range p.Pebble.Files {
					c.Files = append(c.Files, pebble.File(f))
				}
				if n := len(out); n > 0 && out[n-1].OwnEnd == c.OwnStart && sameDB(out[n-1], c) {
					out[n-1].OwnEnd = c.OwnEnd
					continue
				}
			}
			out = append(out, c)
		}
		if !overlap {
			return nil, nil
		}
		if next < op.MaxParallelism {
			out = append(out, pebble.Checkpoint{MaxParallelism: op.MaxParallelism, Start: next, End: op.MaxParallelism})
		}
		return out, nil
	}
	return nil, nil
}

// sameDB reports whether a and b list the files of one database checkpoint.
func sameDB(a, b pebble.Checkpoint) bool {
	return a.Start == b.Start && a.End == b.End && slices.Equal(a.Files, b.Files)
}

// sanitizeDir makes an operator id a safe directory name.
func sanitizeDir(uid string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, uid)
}

// flushStores ends a batch of records of the keyed operators on Pebble:
// it commits their element writes and keeps their caches of decoded values
// within bounds (state.Backend.EndBatch). The heap backend has nothing to
// flush, and a subtask without a store-backed operator does not call it.
func (sc *Subtask) flushStores() error {
	for _, k := range sc.keyed {
		if k.db == nil {
			continue
		}
		if err := k.backend.EndBatch(); err != nil {
			return fmt.Errorf("eddy: %s subtask %d: %w", k.uid, sc.subtask, err)
		}
	}
	return nil
}

// pebblePart takes the synchronous half of a Pebble checkpoint of k at
// barrier id: the batch's writes flushed, the database's checkpoint taken
// (hard links) and the state header encoded. The upload runs in the
// background, after the previous checkpoint's of k, whose files it reuses.
func (k *Keyed) pebblePart(sc *Subtask, id uint64) (snapshot.Part, error) {
	j := sc.job
	if err := k.backend.Flush(); err != nil {
		return snapshot.Part{}, fmt.Errorf("eddy: %s subtask %d: %w", k.uid, sc.subtask, err)
	}
	header, err := k.backend.AppendHeader(nil)
	if err != nil {
		return snapshot.Part{}, fmt.Errorf("eddy: state header of %s subtask %d: %w", k.uid, sc.subtask, err)
	}
	lc, err := k.db.TakeCheckpoint(id)
	if err != nil {
		return snapshot.Part{}, fmt.Errorf("eddy: checkpoint of %s subtask %d: %w", k.uid, sc.subtask, err)
	}
	start, end := k.backend.KeyGroups()
	name := j.storage.PartBlobName(id, k.uid, sc.subtask, j.runID)
	opts := pebble.CheckpointOptions{Prefix: j.storage.PebblePrefix(id, k.uid, sc.subtask, j.runID), Run: j.runID, ID: id}
	prevDone := k.uploaded
	done := make(chan struct{})
	k.uploaded = done
	// done closes once this upload is over, or once the part is released
	// without one (an earlier part of the ack failed): the next waits.
	finish := sync.OnceFunc(func() { close(done) })
	upload := func(ctx context.Context, store blob.Store) (checkpoint.StatePart, int64, error) {
		defer finish()
		if prevDone != nil {
			select {
			case <-prevDone:
			case <-ctx.Done():
				return checkpoint.StatePart{}, 0, ctx.Err()
			}
		}
		// Only this goroutine touches k.prev now: the previous upload
		// closed prevDone after writing it, the next waits for done.
		opts.Prev = k.prev
		c, st, err := lc.Upload(ctx, store, opts)
		if err != nil {
			return checkpoint.StatePart{}, 0, err
		}
		if err := store.Put(ctx, name, header); err != nil {
			return checkpoint.StatePart{}, 0, err
		}
		k.prev = &c
		files := make([]checkpoint.PebbleFile, len(c.Files))
		for i, f := range c.Files {
			files[i] = checkpoint.PebbleFile(f)
		}
		return checkpoint.StatePart{Subtask: uint32(sc.subtask), KeyGroupStart: uint32(start), KeyGroupEnd: uint32(end),
			Blob: name, Size: int64(len(header)), CRC: blob.Checksum(header), Pebble: &checkpoint.PebblePart{Files: files}}, st.UploadedBytes + int64(len(header)), nil
	}
	return snapshot.Part{UID: k.uid, Subtask: sc.subtask, KeyGroupStart: start, KeyGroupEnd: end, Name: name,
		Upload: upload, Release: func() {
			finish()
			// The local checkpoint stays for a local recovery until a
			// newer checkpoint completes (hard links: they take no space
			// until compactions delete the files from the database).
			j.pebble.keepLocal(k.db, id, lc)
		}}, nil
}

// takeStore returns how the changelog materializes k's database: at a
// materialization, between two batches, the backend is flushed, the state
// header encoded and the flush of the database's memtables started; in the
// background the database's checkpoint is taken (hard links) once the
// flush is done, and the files the previous materialization (or the part
// the database was restored from) does not hold are uploaded, then the
// header. The objects are named under the id of the checkpoint being built
// when the checkpoint is taken, while no barrier is processed
// (changelog.StoreSnapshot): every checkpoint from that id on lists them in
// Keep until the materialization is the base, and none before it prunes
// them.
func (k *Keyed) takeStore(sc *Subtask) func(count int) (*changelog.StoreSnapshot, error) {
	j := sc.job
	var mu sync.Mutex
	prev := k.prev // the last uploaded materialization; guarded by mu
	return func(count int) (*changelog.StoreSnapshot, error) {
		if err := k.backend.Flush(); err != nil {
			return nil, err
		}
		header, err := k.backend.AppendHeader(nil)
		if err != nil {
			return nil, fmt.Errorf("state header: %w", err)
		}
		take, err := k.db.TakeCheckpointAsync(uint64(count))
		if err != nil {
			return nil, err
		}
		start, end := k.backend.KeyGroups()
		var lc *pebble.LocalCheckpoint
		upload := func(ctx context.Context, keep func(objects func() []string)) (checkpoint.StatePart, int64, int64, error) {
			var err error
			if lc, err = take(); err != nil {
				return checkpoint.StatePart{}, 0, 0, err
			}
			var name string
			var opts pebble.CheckpointOptions
			keep(func() []string {
				building := j.building.Load()
				tag := fmt.Sprintf("m%d-%s", count, j.runID)
				name = j.storage.PartBlobName(building, k.uid, sc.subtask, tag)
				opts = pebble.CheckpointOptions{Prefix: j.storage.PebblePrefix(building, k.uid, sc.subtask, tag), Run: j.runID, ID: uint64(count), Background: true}
				mu.Lock()
				opts.Prev = prev
				mu.Unlock()
				return append(lc.Objects(opts), name)
			})
			c, st, err := lc.Upload(ctx, j.blobs, opts)
			if err != nil {
				return checkpoint.StatePart{}, 0, 0, err
			}
			if err := j.blobs.Put(ctx, name, header); err != nil {
				return checkpoint.StatePart{}, 0, 0, err
			}
			mu.Lock()
			prev = &c
			mu.Unlock()
			files := make([]checkpoint.PebbleFile, len(c.Files))
			size := int64(len(header))
			for i, f := range c.Files {
				files[i] = checkpoint.PebbleFile(f)
				size += f.Size
			}
			return checkpoint.StatePart{Subtask: uint32(sc.subtask), KeyGroupStart: uint32(start), KeyGroupEnd: uint32(end),
				Blob: name, Size: int64(len(header)), CRC: blob.Checksum(header),
				Pebble: &checkpoint.PebblePart{Files: files, KeyGroupStart: uint32(start), KeyGroupEnd: uint32(end)}}, st.UploadedBytes + int64(len(header)), size, nil
		}
		release := func() {
			if lc != nil {
				_ = lc.Remove()
			}
		}
		return &changelog.StoreSnapshot{Upload: upload, Release: release}, nil
	}
}

// storeBacked reports whether some keyed operator of the subtask keeps its
// state in a store, which the subtask then flushes after each batch.
func (sc *Subtask) storeBacked() bool {
	for _, k := range sc.keyed {
		if k.db != nil {
			return true
		}
	}
	return false
}

var _ state.Store = (*pebble.DB)(nil)
