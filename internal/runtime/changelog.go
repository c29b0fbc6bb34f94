package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/internal/changelog"
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

// ChangelogConfig turns on the changelog state backend (internal/changelog).
type ChangelogConfig = changelog.Config

// NewChangelogConfig returns the defaults, materializing every
// materialize (10 minutes if not positive).
func NewChangelogConfig(materialize time.Duration) *ChangelogConfig {
	return changelog.NewConfig(materialize)
}

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

// attachChangelog makes k's backend write every change to the log too, on
// top of the base it was restored from.
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

// changelogCheckpoint is the changelog part of k's checkpoint at a barrier.
func (sc *Subtask) changelogCheckpoint(k *Keyed, a *ack) func(ctx context.Context) error {
	return k.cl.Checkpoint(a, k.watermark)
}
