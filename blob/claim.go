package blob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ClaimsDir is the prefix of the claim objects Claim writes, one per
// claimant: "writers/<epoch, 20 digits>", holding the claimant's owner
// string.
const ClaimsDir = "writers/"

// claimTries bounds how often Claim retries after losing the race for an
// epoch to another claimant.
const claimTries = 16

// Claim makes this process the one writer of a store that cannot be
// locked (an object store) but can create objects conditionally: it
// creates the claim object of the next epoch, one more than the newest
// it lists, with PutIfAbsent, so that of several processes claiming at
// once each gets an epoch of its own and exactly one the newest. The
// newest claim wins: the lease of every older claim fails its Check from
// then on, naming the newer owner.
//
// Unlike a lock (Locker), a claim does not refuse the second process; it
// fences the first, as a restarted job must be able to take its storage
// over from a process that is dead or cut off without waiting for a lease
// to expire. What keeps output exactly once is the order of the steps
// around it: the new owner claims before it reads the storage (to choose
// its checkpoint), and the old one checks its lease after writing a
// checkpoint's manifest and before committing that checkpoint's output.
// Either the old owner's manifest was written before the claim, and the
// new owner sees it and restores it (committing its output itself), or the
// old owner's check follows the claim and fails, and it commits nothing.
//
// Claims older than the new one are deleted (best effort); the newest is
// never deleted, Release included, so a zombie stays fenced.
func Claim(ctx context.Context, s Store, owner string) (Lease, error) {
	if _, ok := s.(Creator); !ok {
		return nil, fmt.Errorf("blob: claim %T: %w", s, ErrNoConditionalCreate)
	}
	record := []byte(owner + "\n")
	// A claim's requests are retried: one failed request in a few hundred
	// must not stop a job from starting. The record is unique to this
	// process (its owner names pid and time), so a create whose reply was
	// lost is recognised as this process's own.
	h := NewHedger(3, 0)
	for range claimTries {
		claims, err := listClaims(ctx, h, s)
		if err != nil {
			return nil, fmt.Errorf("blob: claim the store: %w", err)
		}
		var epoch uint64 = 1
		if n := len(claims); n > 0 {
			epoch = claims[n-1] + 1
		}
		err = h.PutIfAbsent(ctx, s, claimName(epoch), record, claimAttempts)
		if errors.Is(err, ErrExists) {
			continue // another claimant took this epoch first
		}
		if err != nil {
			return nil, fmt.Errorf("blob: claim the store (epoch %d): %w", epoch, err)
		}
		for _, old := range claims {
			_ = s.Delete(ctx, claimName(old)) // fenced anyway; a leftover is harmless
		}
		return &claim{s: s, h: h, epoch: epoch, owner: owner}, nil
	}
	return nil, fmt.Errorf("blob: claim the store: lost the race for an epoch %d times in a row; is a process restarting in a loop?", claimTries)
}

// ErrLeaseUnknown is matched by a Lease's Check error when the check could
// not find out whether the lease is still held (the storage did not
// answer): the caller must not act as the holder this time (commit
// nothing), but need not give up, as it would on a lost lease.
var ErrLeaseUnknown = errors.New("cannot tell whether the store is still held")

// FencedError is a claim's Check error once a newer claim exists.
type FencedError struct {
	Epoch  uint64 // this lease's epoch
	Newer  uint64 // the newest claim's epoch, 0 if this claim was deleted
	Holder string // the newest claim's owner, as it recorded it
}

// Error says who took the store over.
func (e *FencedError) Error() string {
	if e.Newer == 0 {
		return fmt.Sprintf("blob: the claim of epoch %d on the store was deleted; another process may be writing it", e.Epoch)
	}
	return fmt.Sprintf("blob: the store was taken over by %s (epoch %d, this process holds epoch %d); this process must stop writing it", e.Holder, e.Newer, e.Epoch)
}

// claim is the Lease Claim returns.
type claim struct {
	s     Store
	h     *Hedger // hedges and retries the claim's requests
	epoch uint64
	owner string
}

// checkTimeout bounds a Check, which has no context of its own.
const checkTimeout = 30 * time.Second

// Check lists the claims and fails with a *FencedError when one is newer
// than this one or this one is gone.
func (l *claim) Check() error {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	claims, err := listClaims(ctx, l.h, l.s)
	if err != nil {
		return fmt.Errorf("blob: check the claim of epoch %d: %w: %w", l.epoch, ErrLeaseUnknown, err)
	}
	if n := len(claims); n > 0 && claims[n-1] > l.epoch {
		holder := "another process"
		var buf []byte
		if data, err := l.h.GetInto(ctx, l.s, claimName(claims[n-1]), &buf, claimAttempts); err == nil && len(strings.TrimSpace(string(data))) > 0 {
			holder = strings.TrimSpace(string(data))
		}
		return &FencedError{Epoch: l.epoch, Newer: claims[n-1], Holder: holder}
	}
	if !slices.Contains(claims, l.epoch) {
		return &FencedError{Epoch: l.epoch}
	}
	return nil
}

// Release keeps the claim: deleting it would let an older claimant pass
// its Check again.
func (l *claim) Release() error { return nil }

func claimName(epoch uint64) string { return fmt.Sprintf("%s%020d", ClaimsDir, epoch) }

// claimAttempts bounds the attempts of each request of a claim.
const claimAttempts = 3

// listClaims returns the epochs of the claims in s, ascending.
func listClaims(ctx context.Context, h *Hedger, s Store) ([]uint64, error) {
	names, err := h.List(ctx, s, ClaimsDir, claimAttempts)
	if err != nil {
		return nil, err
	}
	var epochs []uint64
	for _, n := range names {
		if e, err := strconv.ParseUint(strings.TrimPrefix(n, ClaimsDir), 10, 64); err == nil {
			epochs = append(epochs, e)
		}
	}
	slices.Sort(epochs)
	return epochs, nil
}
