package runtime

import (
	"context"

	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/internal/shuffle"
	"github.com/eddyflow/eddy/internal/source"
)

// WatermarkSpec is a source's bounded-out-of-orderness watermark strategy.
type WatermarkSpec[T any] = source.WatermarkSpec[T]

// RunSource is the loop of a source subtask (internal/source): it reads
// the subtask's splits of src, restored from the attempt's checkpoint, and
// pushes their records into the chain; with reuse, into one record whose
// memory the readers reuse.
func RunSource[T any](sc *Subtask, entry *SourceEntry, src connector.Source[T], push Push[T], wm *WatermarkSpec[T], reuse bool) error {
	defer sc.closeSinks()
	var restored []checkpoint.SplitState
	if m := sc.job.restored; m != nil {
		for _, s := range m.Sources {
			if s.Name == entry.name {
				restored = append(restored, s.Splits...)
			}
		}
	}
	l := &source.Loop[T]{Name: entry.name, Splits: entry.splits, Subtask: sc.subtask, Parallelism: sc.par, Source: src,
		Restored: restored, Push: push, Watermarks: wm, Reuse: reuse,
		Triggers: sc.job.triggers[entry.index][sc.subtask], Slots: sc.job.wmSlots[entry.index],
		RecordsIn: &sc.recordsIn, Idle: &sc.clk.idle, Watermark: &sc.m.Watermark, Lag: &sc.m.SourceLag}
	return l.Run(sourceHost{sc})
}

// sourceHost is a source subtask as its loop sees it.
type sourceHost struct{ sc *Subtask }

func (h sourceHost) Context() context.Context { return h.sc.ctx }
func (h sourceHost) Running()                 { h.sc.running() }
func (h sourceHost) Checkpoint(id uint64, final bool, splits []checkpoint.SplitState) error {
	return h.sc.checkpoint(id, final, splits)
}
func (h sourceHost) Control(m shuffle.Msg) error { return h.sc.controlOut(m) }
func (h sourceHost) FlushOut() error             { return h.sc.flushOut() }
func (h sourceHost) FlushCounters()              { h.sc.flushCounters() }
func (h sourceHost) Finished() error             { return h.sc.job.sourceFinished(h.sc.ctx) }
