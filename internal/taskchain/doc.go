// Package taskchain owns the commit chain of one task: the part of a job
// that reads one source partition, with its keyed state, which checkpoints
// on its own to a store shared by every process of the job (the "Beyond one
// machine" part of DESIGN.md). The chain says who owns the task and which
// of its checkpoints are committed; it fences an owner that was replaced.
//
// # Records
//
// The chain of task T is the sequence of objects
//
//	tasks/T/chain/<seq, 20 digits>
//
// each written once with a conditional create (blob.Creator: link(2) on
// files, If-None-Match on S3) and never changed. Seqs are dense from 1. A
// record holds its seq, its owner's epoch, its kind (claim or commit), the
// owner string (process, pid, start time: never a secret), the writer's
// time and, for a commit, an opaque payload that this package does not
// interpret (the runtime keeps there the reference to the task's
// checkpoint manifest, its source positions and its sinks' transaction
// handles). It also links back to the newest claim and the newest commit
// before it and carries the prune floor (see Retention), so a reader needs
// the newest record only. The store's trailer checksums each object (a
// damaged one reads as a *blob.CorruptError); the record's own encoding
// (magic, version, varints, lengths) is checked field by field and must
// name the seq its object name says, so a record copied under another name
// is refused too.
//
// # Protocol
//
// Claim writes record newest+1, of kind claim, with epoch newest's + 1.
// Commit, by the owner of epoch e whose last record is s, writes s+1 with
// epoch e. Both are conditional creates of one name, so of the writers of
// one seq exactly one wins. That is what fences: an owner only ever writes
// the seq after its own last record, and the claim that replaced it was
// written at exactly that seq (the chain is linear, so the record after an
// owner's last one is the next owner's claim). Its next Commit therefore
// finds the seq taken and fails with a *FencedError naming the newer
// owner; it must commit nothing of that checkpoint and stop. Every commit
// of the old owner either precedes the claim in the chain, and the new
// owner restores from it (Claim returns the newest commit before the claim,
// final because nothing older can be written after it), or fails. Epochs
// never decrease along the chain, and a claim is the only record that
// opens an epoch, so an epoch names one owner.
//
// Pruning leaves gaps below the newest record, and a create into a gap
// succeeds. An owner never writes into one (it writes after its own last
// record, and the next record, if any, is a claim, which is kept: see
// Retention). A claimant might, when its view of the chain is older than
// a prune: so after its create Claim lists the chain. If the seq was a
// gap, a record after it existed before the claim (the newest record is
// never deleted), and record seq+1, if still there, does not link to the
// claim. A record written after the claim is another claimant's, made
// with the claim as its newest record: a claim at seq+1 linking back to
// it. So a claim with newer records and no such successor fenced nobody:
// Claim deletes it and claims again after the true newest record. A void claim that
// stays behind (its deletion failed) is harmless: no record links to it
// and it is below the newest, so it costs only a name in the listing.
//
// A create whose reply was lost (the PUT landed, the response did not) is
// retried, and the retry finds the object and compares its bytes with its
// own (blob.Hedger.PutIfAbsent, as blob.Claim does): a record is unique to
// its writer (owner, epoch, seq and time), so equal bytes mean this
// writer's own record. When no attempt gets an answer, Commit returns an
// error matching ErrUnknownOutcome and remembers the record; Settle creates
// the same bytes again, which ends either with the record in the chain or
// with the seq taken by a newer owner (then it never landed and never
// will: the name is taken). The runtime must neither commit nor abort the
// output of that checkpoint until Settle tells it which.
//
// # Requests
//
// Open: one LIST and one GET (the newest record). Claim: one PUT and one
// LIST (the gap check above), plus one GET of the newest commit when the
// newest record is a claim (a new owner after an owner that never
// committed); each race lost to another writer
// costs a LIST and two GETs more (reading the winner back, reading the new
// newest record). Commit: one PUT; being fenced costs two GETs (compare,
// then read the winner to name it). Prune after each commit: one DELETE
// and nothing else, since the Chain knows every record it wrote; its
// first call after Open reads the commits it keeps and the claims above
// the floor (a GET each, usually one or two).
//
// # Retention
//
// Prune(keep) deletes the records older than the newest keep commits except
// the claims. A claim is kept because it is the fence of the epoch before
// it: if it were deleted, the zombie of that epoch would find its next seq
// free, "commit" into the gap and go on to commit its output. (Checking
// the previous record after each create would catch that too, at a GET per
// commit; keeping claims costs an object per change of owner instead.)
// The records a chain keeps are thus its last keep commits plus one small
// object per claim ever made, and Open's LIST grows with the number of
// ownership changes (rebalances, restarts), not with commits: a task with
// under a thousand claims lists in one S3 request.
//
// Each record carries the floor: every record below it but the claims has
// been deleted. Prune deletes only records at or above the floor, which
// it knows from the LIST of Open or Claim and from what it wrote, so it
// never lists, and it reads only the claims at or above the floor to know
// which to keep.
//
// # What a reader does with damage
//
// Open and Claim read the newest record and the newest commit; damage to
// either is an error naming the object and what is wrong, never skipped:
// skipping the newest commit would restore an older checkpoint and commit
// its output a second time. Older records are read only by Prune (the
// commits it keeps, the claims above the floor); damage there fails the
// Prune, naming the record, before it deletes anything, so the chain
// merely grows until someone looks. Records Prune deletes are never read:
// a damaged old commit below the kept ones is deleted like any other.
// Objects under tasks/T/chain/ whose names are not 20 digits are ignored.
//
// # Use by the runtime
//
// The package is not wired in yet. A process that is assigned a task's
// partition will Open and Claim its chain before it reads any of the
// task's checkpoint data, restore from the returned commit's payload (or
// start from scratch for the zero Record), and for each checkpoint: write
// the task's state blobs and manifest under names of its own epoch (so a
// zombie of an older epoch cannot overwrite what the new owner reads),
// make the output of the checkpoint durable but uncommitted (a prepared
// Kafka transaction), Commit a payload referencing all of that, and only
// after Commit succeeds commit the output. ErrFenced means abort and stop
// the task; ErrUnknownOutcome means hold the output until Settle answers.
// Commit records are the truth: a new owner that restores a commit must
// finish that checkpoint's output (commit the transactions its payload
// names) before producing more. Prune(keep) follows each commit, with keep
// the number of checkpoints the task retains; a checkpoint's data may be
// deleted once no kept commit references it.
package taskchain
