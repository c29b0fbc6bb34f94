package taskchain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/eddyflow/eddy/blob"
)

// ErrFenced is matched (errors.Is) by the error of Commit, Settle and
// Prune once a newer owner has claimed the task: the caller must commit
// no output of the checkpoint it was committing, and stop running the
// task. The error is a *FencedError naming the newer owner.
var ErrFenced = errors.New("fenced by a newer owner of the task")

// ErrUnknownOutcome is matched by Commit's error when the store did not
// say whether the commit record was written (every attempt failed without
// an answer, or the context ended): the record may be in the chain, and a
// new owner would then restore from it. The caller must neither commit nor
// abort that checkpoint's output until Settle says which it is.
var ErrUnknownOutcome = errors.New("the outcome of the commit is unknown")

// ErrNotOwner is matched by Commit's and Prune's error on a Chain that has
// not claimed the task.
var ErrNotOwner = errors.New("not the owner of the task; Claim it first")

// FencedError says that a newer owner holds the task: the record this
// owner tried to write next was already written by someone else.
type FencedError struct {
	Task   string // the task
	Store  string // where its chain is (never credentials)
	Object string // the record this owner tried to write
	Epoch  uint64 // this owner's epoch
	Newer  uint64 // the epoch of the record found there; 0 if it could not be read
	Holder string // that record's owner, or why it could not be read
}

// Error says who took the task over.
func (e *FencedError) Error() string {
	if e.Newer == 0 {
		return fmt.Sprintf("taskchain: task %q in %s: fenced: %s was written by another owner (%s); this owner (epoch %d) must commit nothing and stop",
			e.Task, e.Store, e.Object, e.Holder, e.Epoch)
	}
	return fmt.Sprintf("taskchain: task %q in %s was taken over by %s (epoch %d, record %s); this owner (epoch %d) must commit nothing and stop",
		e.Task, e.Store, e.Holder, e.Newer, e.Object, e.Epoch)
}

// Is makes a *FencedError match ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// Chain is the commit chain of one task in a store. Open reads it; Claim
// makes the caller its owner; Commit appends the owner's checkpoints;
// Prune bounds its length. A Chain is safe for concurrent use; its
// methods are serialized, but Prune's deletes do not hold up a Commit.
type Chain struct {
	store  blob.Store
	task   string
	where  string // the store, for errors
	writes *blob.Hedger
	reads  *blob.Hedger
	dels   *blob.Hedger

	mu      sync.Mutex
	newest  Record          // the newest record known; zero for an empty chain
	commit  Record          // the newest commit at or before newest, once read or written
	owner   string          // set by Claim
	epoch   uint64          // this owner's epoch; 0 until Claim
	fenced  error           // sticky: once fenced, always fenced
	pending *pending        // a record whose create has an unknown outcome
	seqs    []uint64        // records known to exist, ascending
	links   map[uint64]link // what is known of records read or written
	floor   uint64          // every record below it but the claims is pruned

	pruneMu sync.Mutex // serializes Prune
}

// pending is a record Commit wrote with an unknown outcome.
type pending struct {
	rec  Record
	data []byte
}

// link is what Prune needs to know of a record.
type link struct {
	kind                  Kind
	prevClaim, prevCommit uint64
}

// attempts bounds the attempts of each request: on an object store one
// request in a few hundred fails, and a commit must not fail for that.
const attempts = 3

// When requests are hedged: the same as a checkpoint manifest's (see
// checkpoint.ManifestHedgeAfter). Variables, so that a test counting
// requests can turn hedging off.
var (
	hedgeP90   = 3.0
	hedgeAfter = time.Second
)

// claimTries bounds how often Claim retries after losing seq+1 to another
// writer (a claimant, or the owner committing): each loss is another
// writer's success, so with n claimants at once n tries suffice unless the
// owner keeps committing meanwhile.
const claimTries = 32

// Open reads the chain of task in store: one LIST of its records and one
// GET of the newest. The store must create objects conditionally
// (blob.Creator). A newest record that cannot be read or is corrupt is an
// error naming it: it is never skipped, as a chain that forgot its newest
// commit would let the next owner commit that checkpoint's output again.
func Open(ctx context.Context, store blob.Store, task string) (*Chain, error) {
	if err := ValidateTask(task); err != nil {
		return nil, err
	}
	c := &Chain{store: store, task: task, where: describe(store),
		writes: blob.NewHedger(hedgeP90, hedgeAfter), reads: blob.NewHedger(hedgeP90, hedgeAfter),
		dels: blob.NewHedger(hedgeP90, hedgeAfter), links: make(map[uint64]link)}
	if _, ok := store.(blob.Creator); !ok {
		return nil, c.errorf("open: %w; use a store with conditional writes (file, s3)", blob.ErrNoConditionalCreate)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.refresh(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Task returns the task's id.
func (c *Chain) Task() string { return c.task }

// Newest returns the newest record the Chain knows of: read by Open or
// Claim, or written by this Chain since. It is the zero Record for an
// empty chain.
func (c *Chain) Newest() Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.newest
}

// Epoch returns the epoch this Chain owns, 0 before Claim.
func (c *Chain) Epoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// Claim makes owner the task's owner: it writes the next record, a claim
// of the next epoch, with a conditional create, so that of several
// claimants each gets an epoch of its own and exactly one the newest, and
// every older owner is fenced (its next Commit finds the seq taken). On
// losing the race for a seq it reads the chain again and retries.
//
// Claim returns the newest commit before its claim, from which the new
// owner restores (its Payload), or the zero Record if the task never
// committed. No older owner can commit after the claim, so that record is
// final. owner names the claimant for the errors of fenced owners (e.g.
// ProcessOwner's string); it must be unique to the claimant, as a create
// whose reply was lost is recognised as its own by its bytes.
//
// Requests: one PUT and one LIST (which checks that the claim is not in a
// gap left by a prune the Chain did not see); with the newest record a
// claim, one GET of the newest commit; after each lost race one LIST and
// two GETs more.
func (c *Chain) Claim(ctx context.Context, owner string) (Record, error) {
	if err := checkOwner(owner); err != nil {
		return Record{}, c.errorf("claim: %v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var listed []uint64 // the listing that showed the last try's claim in a gap
	for try := range claimTries {
		if listed != nil {
			err := c.readNewest(ctx, listed)
			if errors.Is(err, blob.ErrNotFound) {
				err = c.refresh(ctx) // pruned since the listing
			}
			if err != nil {
				return Record{}, err
			}
			listed = nil
		} else if try > 0 {
			if err := c.refresh(ctx); err != nil {
				return Record{}, err
			}
		}
		rec := c.next(KindClaim, c.newest.Epoch+1, owner, nil)
		err := ctx.Err()
		if err == nil {
			err = c.writes.PutIfAbsent(ctx, c.store, ObjectName(c.task, rec.Seq), appendRecord(nil, &rec), attempts)
		}
		if errors.Is(err, blob.ErrExists) {
			continue
		}
		if err != nil {
			return Record{}, c.errorf("claim epoch %d with %s: %w (the claim may have been written; claiming again is safe)",
				rec.Epoch, ObjectName(c.task, rec.Seq), err)
		}
		// The create succeeds in a gap too: if this Chain's view is older
		// than a prune, rec.Seq may have been written and deleted since,
		// and a claim there fences nobody. See "Protocol" in the package
		// documentation.
		seqs, void, err := c.checkClaim(ctx, rec.Seq)
		if err != nil {
			return Record{}, c.errorf("claim epoch %d with %s: %w (the claim was written but not checked; claiming again is safe)",
				rec.Epoch, ObjectName(c.task, rec.Seq), err)
		}
		if void {
			_ = c.dels.Delete(ctx, c.store, ObjectName(c.task, rec.Seq), attempts) // garbage, but harmless if it stays
			listed = slices.DeleteFunc(seqs, func(s uint64) bool { return s == rec.Seq })
			continue
		}
		c.wrote(rec)
		c.seqs = seqs
		c.owner, c.epoch, c.fenced, c.pending = owner, rec.Epoch, nil, nil
		return c.lastCommit(ctx)
	}
	return Record{}, c.errorf("claim: lost the race for the next record %d times in a row; are other processes claiming the task in a loop?", claimTries)
}

// Commit appends a commit record holding payload, as the owner of the
// epoch Claim took: one conditional create of the next seq, one PUT. If
// the seq is taken, a newer owner has claimed the task: Commit returns a
// *FencedError (matching ErrFenced) naming it, and so does every later
// Commit; the caller must commit nothing and stop. If the store does not
// answer, the error matches ErrUnknownOutcome and the caller must Settle
// before committing again. A create whose reply was lost is retried and
// recognised as this owner's own by its bytes.
func (c *Chain) Commit(ctx context.Context, payload []byte) (Record, error) {
	if len(payload) > MaxPayload {
		return Record{}, c.errorf("commit: payload of %d bytes, more than %d; keep the checkpoint elsewhere and commit a reference to it", len(payload), MaxPayload)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.fenced != nil:
		return Record{}, c.fenced
	case c.pending != nil:
		return Record{}, c.errorf("commit: the commit of %s has an unknown outcome; Settle it first",
			ObjectName(c.task, c.pending.rec.Seq))
	case c.epoch == 0:
		return Record{}, c.errorf("commit: %w", ErrNotOwner)
	}
	rec := c.next(KindCommit, c.epoch, c.owner, slices.Clone(payload))
	return c.create(ctx, rec, appendRecord(nil, &rec))
}

// Check reports whether this owner still owns the task, without writing:
// it reads the seq after this owner's last record, where the claim of a
// newer owner would be (one GET, answered "not found" while the task is
// this owner's). It returns a *FencedError once that seq is taken, and an
// error matching ErrUnknownOutcome when a commit's outcome is unknown or
// the store did not answer: the caller must then commit nothing this time.
func (c *Chain) Check(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.fenced != nil:
		return c.fenced
	case c.pending != nil:
		return c.errorf("check: the commit of %s has an unknown outcome: %w", ObjectName(c.task, c.pending.rec.Seq), ErrUnknownOutcome)
	case c.epoch == 0:
		return c.errorf("check: %w", ErrNotOwner)
	}
	seq := c.newest.Seq + 1
	var buf []byte
	_, err := c.reads.GetInto(ctx, c.store, ObjectName(c.task, seq), &buf, attempts)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return nil
	case err != nil:
		return c.errorf("check %s: %w: %w", ObjectName(c.task, seq), ErrUnknownOutcome, err)
	}
	c.fenced = c.fencedAt(ctx, seq)
	return c.fenced
}

// Settle finds out whether the commit whose outcome Commit could not tell
// was written, by creating its record again with the same bytes: it
// returns the record once it is in the chain (written then or before),
// a *FencedError if a newer owner took its seq (it was never written, and
// never will be), or again an error matching ErrUnknownOutcome. With no
// commit pending it returns the zero Record and nil.
func (c *Chain) Settle(ctx context.Context) (Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fenced != nil {
		return Record{}, c.fenced
	}
	if c.pending == nil {
		return Record{}, nil
	}
	return c.create(ctx, c.pending.rec, c.pending.data)
}

// create writes rec (encoded as data) as this owner and settles what the
// answer means for the chain.
func (c *Chain) create(ctx context.Context, rec Record, data []byte) (Record, error) {
	name := ObjectName(c.task, rec.Seq)
	err := ctx.Err()
	if err == nil {
		err = c.writes.PutIfAbsent(ctx, c.store, name, data, attempts)
	}
	switch {
	case err == nil:
		c.pending = nil
		c.wrote(rec)
		return rec, nil
	case errors.Is(err, blob.ErrExists):
		c.pending = nil
		c.fenced = c.fencedAt(ctx, rec.Seq)
		return Record{}, c.fenced
	}
	c.pending = &pending{rec: rec, data: data}
	return Record{}, c.errorf("commit %s (epoch %d): %w: %w; Settle it before committing again, and neither commit nor abort its output until then",
		name, rec.Epoch, ErrUnknownOutcome, err)
}

// fencedAt returns the *FencedError for the record at seq, which another
// writer created.
func (c *Chain) fencedAt(ctx context.Context, seq uint64) error {
	e := &FencedError{Task: c.task, Store: c.where, Object: ObjectName(c.task, seq), Epoch: c.epoch}
	r, err := c.get(ctx, seq)
	if err != nil {
		e.Holder = "who could not be read: " + err.Error()
		return e
	}
	e.Newer, e.Holder = r.Epoch, r.Owner
	return e
}

// Prune deletes the records older than the newest keep commits (at least
// one is kept), except the claims: a claim is what fences the owner of the
// epoch before it (that owner's next record would go at the claim's seq),
// so deleting one would let a zombie that wakes later "commit" into the
// gap. It returns how many records it deleted.
//
// Prune reads only what it cannot know: after Open it reads the commits
// it keeps and the claims since the last prune (the floor the newest
// record carries); from then on it knows every record it wrote, so
// pruning after each commit costs one DELETE and nothing else. A record it
// must read and cannot (corrupt, unreadable) fails it, naming the record,
// before it deletes anything; records it deletes are never read, so a
// corrupt old commit is deleted like any other. Only the owner prunes.
func (c *Chain) Prune(ctx context.Context, keep int) (int, error) {
	c.pruneMu.Lock()
	defer c.pruneMu.Unlock()
	c.mu.Lock()
	if err := c.fenced; err != nil {
		c.mu.Unlock()
		return 0, err
	}
	if c.epoch == 0 {
		c.mu.Unlock()
		return 0, c.errorf("prune: %w", ErrNotOwner)
	}
	doomed, cutoff, err := c.plan(ctx, max(keep, 1))
	c.mu.Unlock()
	if err != nil || len(doomed) == 0 {
		return 0, err
	}
	deleted := 0
	for _, seq := range doomed {
		if err = ctx.Err(); err == nil {
			err = c.dels.Delete(ctx, c.store, ObjectName(c.task, seq), attempts)
		}
		if err != nil {
			cutoff = seq
			err = c.errorf("prune: delete %s: %w", ObjectName(c.task, seq), err)
			break
		}
		deleted++
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget(doomed[:deleted], cutoff)
	return deleted, err
}

// plan returns the records Prune deletes (ascending) and the floor it
// reaches once they are gone: every record below the keep-th newest
// commit that is not a claim.
func (c *Chain) plan(ctx context.Context, keep int) (doomed []uint64, cutoff uint64, err error) {
	cutoff = c.newest.newestCommit()
	for i := 1; i < keep && cutoff != 0; i++ {
		l, err := c.link(ctx, cutoff)
		if errors.Is(err, blob.ErrNotFound) {
			return nil, 0, nil // older commits were pruned already, with a smaller keep
		}
		if err != nil {
			return nil, 0, c.errorf("prune: %w", err)
		}
		cutoff = l.prevCommit
	}
	if cutoff <= c.floor {
		return nil, 0, nil
	}
	claims := map[uint64]bool{}
	for x := c.newest.newestClaim(); x != 0 && x >= c.floor; {
		claims[x] = true
		l, err := c.link(ctx, x)
		if err != nil {
			return nil, 0, c.errorf("prune: %w", err)
		}
		x = l.prevClaim
	}
	for _, s := range c.seqs {
		if s >= c.floor && s < cutoff && !claims[s] {
			doomed = append(doomed, s)
		}
	}
	return doomed, cutoff, nil
}

// forget drops deleted records from what the Chain knows and raises the
// floor to cutoff.
func (c *Chain) forget(deleted []uint64, cutoff uint64) {
	gone := make(map[uint64]bool, len(deleted))
	for _, s := range deleted {
		gone[s] = true
		delete(c.links, s)
	}
	c.seqs = slices.DeleteFunc(c.seqs, func(s uint64) bool { return gone[s] })
	c.floor = max(c.floor, cutoff)
	for s := range c.links {
		if s < c.floor {
			delete(c.links, s) // a kept claim below the floor is never walked again
		}
	}
}

// next returns the record that follows the newest one.
func (c *Chain) next(kind Kind, epoch uint64, owner string, payload []byte) Record {
	return Record{Seq: c.newest.Seq + 1, Epoch: epoch, Kind: kind, Owner: owner, Time: time.Now().UTC(), Payload: payload,
		prevClaim: c.newest.newestClaim(), prevCommit: c.newest.newestCommit(), floor: c.floor}
}

// wrote records that rec is now the newest record.
func (c *Chain) wrote(rec Record) {
	c.newest = rec
	c.seqs = append(c.seqs, rec.Seq)
	c.links[rec.Seq] = link{rec.Kind, rec.prevClaim, rec.prevCommit}
	if rec.Kind == KindCommit {
		c.commit = rec
	}
}

// refresh lists the chain and reads its newest record.
//
// The newest record is never deleted, but the newest of a listing may be
// by the time it is read: an owner committing meanwhile prunes it once
// newer records exist. Then the listing is stale, and refresh lists again
// (at most claimTries times).
func (c *Chain) refresh(ctx context.Context) error {
	for try := 1; ; try++ {
		seqs, err := c.list(ctx)
		if err != nil {
			return err
		}
		err = c.readNewest(ctx, seqs)
		if !errors.Is(err, blob.ErrNotFound) || try == claimTries {
			return err
		}
	}
}

// list returns the seqs of the records in the store, ascending.
func (c *Chain) list(ctx context.Context) ([]uint64, error) {
	prefix := chainPrefix(c.task)
	if err := ctx.Err(); err != nil { // a store may not look at ctx before it answers
		return nil, c.errorf("list %s: %w", prefix, err)
	}
	names, err := c.reads.List(ctx, c.store, prefix, attempts)
	if err != nil {
		return nil, c.errorf("list %s: %w", prefix, err)
	}
	seqs := make([]uint64, 0, len(names))
	for _, n := range names {
		if s, ok := parseSeq(prefix, n); ok {
			seqs = append(seqs, s)
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

// readNewest takes seqs for the records in the store and reads the
// newest.
func (c *Chain) readNewest(ctx context.Context, seqs []uint64) error {
	c.seqs = seqs
	if len(seqs) == 0 {
		c.newest = Record{}
		return nil
	}
	r, err := c.get(ctx, seqs[len(seqs)-1])
	if err != nil {
		return err
	}
	c.newest = r
	c.floor = max(c.floor, r.floor)
	if r.Kind == KindCommit {
		c.commit = r
	}
	return nil
}

// checkClaim lists the chain after this Chain created the claim at seq
// and says whether the claim is void, made in a gap that a prune left:
// then a record after it existed before it (the newest record is never
// deleted). A record after it written later is the claim of another
// claimant who saw this one as the newest; anything else at seq+1, or
// nothing there while newer records exist, means a gap.
func (c *Chain) checkClaim(ctx context.Context, seq uint64) (seqs []uint64, void bool, err error) {
	seqs, err = c.list(ctx)
	if err != nil {
		return nil, false, err
	}
	if n := len(seqs); n == 0 || seqs[n-1] < seq {
		return seqs, true, nil // deleted, as only a void claim is; nothing newer: cannot happen
	} else if seqs[n-1] == seq {
		return seqs, false, nil
	}
	next, err := c.get(ctx, seq+1)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return seqs, true, nil
	case err != nil:
		return nil, false, err
	}
	return seqs, !(next.Kind == KindClaim && next.prevClaim == seq), nil
}

// lastCommit returns the newest commit at or before the newest record.
func (c *Chain) lastCommit(ctx context.Context) (Record, error) {
	seq := c.newest.newestCommit()
	if seq == 0 {
		return Record{}, nil
	}
	if c.commit.Seq == seq {
		return c.commit, nil
	}
	r, err := c.get(ctx, seq)
	if err != nil {
		return Record{}, fmt.Errorf("%w (the newest commit, from which the task restores)", err)
	}
	if r.Kind != KindCommit {
		return Record{}, c.errorf("record %s is a %v, but %s says it is the newest commit",
			ObjectName(c.task, seq), r.Kind, ObjectName(c.task, c.newest.Seq))
	}
	c.commit = r
	return r, nil
}

// link returns the links of record seq, reading it if the Chain does not
// know them.
func (c *Chain) link(ctx context.Context, seq uint64) (link, error) {
	if l, ok := c.links[seq]; ok {
		return l, nil
	}
	if _, err := c.get(ctx, seq); err != nil {
		return link{}, err
	}
	return c.links[seq], nil
}

// get reads and decodes record seq.
func (c *Chain) get(ctx context.Context, seq uint64) (Record, error) {
	name := ObjectName(c.task, seq)
	var buf []byte
	data, err := c.reads.GetInto(ctx, c.store, name, &buf, attempts)
	if err != nil {
		return Record{}, c.errorf("read %s: %w", name, err)
	}
	r, err := decodeRecord(name, seq, data)
	if err != nil {
		return Record{}, c.errorf("read %s: %w", name, err)
	}
	c.links[seq] = link{r.Kind, r.prevClaim, r.prevCommit}
	return r, nil
}

// errorf returns an error naming the task and the store, then what
// format says.
func (c *Chain) errorf(format string, args ...any) error {
	return fmt.Errorf("taskchain: task %q in %s: %w", c.task, c.where, fmt.Errorf(format, args...))
}

// describe names a store for errors: its String (blob/s3 names endpoint,
// bucket and prefix, never credentials), its directory, or its type.
func describe(s blob.Store) string {
	switch v := s.(type) {
	case fmt.Stringer:
		return v.String()
	case interface{ Dir() string }:
		return "directory " + v.Dir()
	}
	return fmt.Sprintf("%T", s)
}

// started is when this process loaded the package, for ProcessOwner.
var started = time.Now()

// ProcessOwner returns an owner string for this process: name (the job,
// say), the host, the pid and the process's start time to the
// nanosecond, unique to the process and never a secret.
func ProcessOwner(name string) string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s pid %d on %s since %s", name, os.Getpid(), host, started.UTC().Format(time.RFC3339Nano))
}
