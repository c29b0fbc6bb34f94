package checkpoint

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// savepointsDir holds one marker per retained checkpoint (a savepoint),
// outside checkpointsDir so that pruning never deletes a marker: deleting
// savepoints/<id> releases the checkpoint to retention again.
const savepointsDir = "savepoints/"

// SavepointName is the marker blob that retains checkpoint id.
func SavepointName(id uint64) string { return fmt.Sprintf("%s%0*d", savepointsDir, idDigits, id) }

// Retain marks complete checkpoint id as a savepoint: pruning keeps it, and
// every file it uses, whatever the number of checkpoints retained, until
// its marker (SavepointName) is deleted.
func (s *Storage) Retain(ctx context.Context, id uint64) error {
	if err := s.store.Put(ctx, SavepointName(id), []byte(strconv.FormatUint(id, 10)+"\n")); err != nil {
		return fmt.Errorf("checkpoint: retaining checkpoint %d as a savepoint: %w", id, err)
	}
	return nil
}

// Savepoints returns the ids of the checkpoints marked by Retain, in order.
func (s *Storage) Savepoints(ctx context.Context) ([]uint64, error) {
	names, err := s.list(ctx, savepointsDir)
	if err != nil {
		return nil, err
	}
	return savepointIDs(names), nil
}

// savepointIDs are the ids of the savepoint markers among names, in the
// order listed.
func savepointIDs(names []string) []uint64 {
	var ids []uint64
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, savepointsDir)
		if !ok {
			continue
		}
		if len(rest) != idDigits {
			continue
		}
		if id, err := strconv.ParseUint(rest, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}
