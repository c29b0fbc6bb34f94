package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/internal/errs"
)

// settleFallback makes restoring m (nil: starting from scratch) keep the
// exactly-once promise. Output committed after m (by checkpoints found
// unusable, or by one whose manifest is gone) would be produced again:
// sinks that can roll it back do, loudly; for a sink that cannot, the
// restore is refused, naming the checkpoints and why they are unusable,
// unless the job allows duplicates. The unusable checkpoints are
// quarantined, not pruned.
func (e *runner) settleFallback(ctx context.Context, storage *checkpoint.Storage, m *checkpoint.Manifest) error {
	after := uint64(0)
	if m != nil {
		after = m.ID
	}
	var bad []uint64
	for id := range e.unusable {
		if id > after {
			bad = append(bad, id)
		}
	}
	slices.Sort(bad)
	var why []string
	for _, id := range bad {
		why = append(why, fmt.Sprintf("checkpoint %d: %s", id, e.unusable[id]))
	}
	restored := "the beginning (no usable checkpoint is left)"
	if m != nil {
		restored = fmt.Sprintf("checkpoint %d", m.ID)
	}
	var cannot []string
	for _, s := range e.sinks {
		if s.rollback == nil {
			if len(bad) > 0 {
				cannot = append(cannot, s.name)
			}
			continue
		}
		desc, err := s.rollback.CommittedAfter(ctx, after)
		if err != nil {
			return fmt.Errorf("eddy: sink %s: before restoring %s: %w", s.name, restored, err)
		}
		if desc == "" {
			continue
		}
		e.cfg.Logger.Warn("rolling back output committed after the checkpoint restored from, so that it is not committed twice",
			"sink", s.name, "restoring", restored, "output", desc, "unusable", strings.Join(why, "; "))
		if err := s.rollback.RollBack(ctx, after); err != nil {
			return fmt.Errorf("eddy: sink %s: rolling back what was committed after %s: %w", s.name, restored, err)
		}
	}
	if len(cannot) > 0 {
		if !e.cfg.AllowDuplicates {
			return errs.Kind(errs.CorruptCheckpoint, fmt.Errorf("eddy: restoring %s would commit again what newer checkpoints committed to sinks %s, which cannot roll it back; the newer ones are unusable (%s). "+
				"Repair or restore them, or accept duplicates with eddy.AllowDuplicatesOnFallback",
				restored, strings.Join(cannot, ", "), strings.Join(why, "; ")), true)
		}
		e.cfg.Logger.Error("falling back past committed output: the sinks will get it again (duplicates allowed)",
			"sinks", strings.Join(cannot, ", "), "restoring", restored, "unusable", strings.Join(why, "; "))
	}
	for _, id := range bad {
		if err := storage.Quarantine(ctx, id, e.unusable[id]); err != nil {
			return errs.Kind(errs.Storage, err, false)
		}
	}
	return nil
}
