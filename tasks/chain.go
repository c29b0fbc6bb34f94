package tasks

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/internal/taskchain"
)

// chainKeep is how many commit records of a task's chain are kept; older
// ones are pruned at a run's first commit and every chainPruneEvery
// commits after it (claims stay: they fence).
const (
	chainKeep       = 4
	chainPruneEvery = 64
)

// claimTask returns the eddy.ClaimStore function of task id: each run of
// the task claims the task's commit chain (internal/taskchain) in the
// job's store, under "tasks/<id>/chain/", before it reads its
// checkpoints, and commits each checkpoint by writing the chain's next
// record. The claim fences every older owner: its next commit finds its
// seq taken and fails, so it commits nothing of that checkpoint.
func claimTask(root blob.Store, id int32) eddy.Option {
	return eddy.ClaimStore(func(ctx context.Context, _ blob.Store, owner string) (blob.Lease, error) {
		c, err := taskchain.Open(ctx, root, strconv.Itoa(int(id)))
		if err != nil {
			return nil, err
		}
		if _, err := c.Claim(ctx, owner); err != nil {
			return nil, err
		}
		return &chainLease{chain: c}, nil
	})
}

// chainLease is a task run's hold on its task: a blob.CommitLease over
// the task's chain.
type chainLease struct {
	chain   *taskchain.Chain
	mu      sync.Mutex // serializes commits
	commits int
}

// checkTimeout bounds a Check, which has no context of its own.
const checkTimeout = 30 * time.Second

// Check reads the seq after the run's last record: taken, the task has a
// newer owner.
func (l *chainLease) Check() error {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	return leaseErr(l.chain.Check(ctx))
}

// CommitCheckpoint writes the chain's next record, holding checkpoint
// id, after settling a commit whose outcome was unknown.
func (l *chainLease) CommitCheckpoint(ctx context.Context, id uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.chain.Settle(ctx); err != nil {
		return leaseErr(err)
	}
	if _, err := l.chain.Commit(ctx, binary.AppendUvarint(nil, id)); err != nil {
		return leaseErr(err)
	}
	l.commits++
	if l.commits%chainPruneEvery == 1 {
		// On a run's first commit too: a task that moves more often
		// than every chainPruneEvery checkpoints still prunes.
		// Best effort: a prune that fails leaves records for the next.
		_, _ = l.chain.Prune(ctx, chainKeep)
	}
	return nil
}

// Release keeps the chain as it is: its newest record fences whoever
// owned the task before.
func (l *chainLease) Release() error { return nil }

// leaseErr maps the chain's errors to the lease's: an unknown outcome
// fails one checkpoint (blob.ErrLeaseUnknown), anything else fences.
func leaseErr(err error) error {
	if err != nil && errors.Is(err, taskchain.ErrUnknownOutcome) {
		return fmt.Errorf("%w: %w", blob.ErrLeaseUnknown, err)
	}
	return err
}
