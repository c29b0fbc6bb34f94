package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eddyflow/eddy/blob"
)

// DefaultRetain is the number of complete checkpoints NewStorage keeps when
// asked for fewer than one.
const DefaultRetain = 3

// ErrSubsumed is matched (errors.Is) by Complete's error for a checkpoint
// whose id is below that of a complete checkpoint: the newer one replaces
// it, as it would have replaced it had the older one completed first.
var ErrSubsumed = errors.New("subsumed by a newer complete checkpoint")

// Storage keeps a job's checkpoints in a blob.Store. It is safe for
// concurrent use: Writes are serialized, and so are Prunes, but a Write
// does not wait for a Prune (against object storage a prune of many
// objects takes seconds, and a checkpoint would wait for it). A Prune of m
// deletes only what m and the complete checkpoints before it do not use
// and nothing of newer ids, so a newer checkpoint written meanwhile loses
// nothing.
type Storage struct {
	store   blob.Store
	retain  int
	mu      sync.Mutex   // serializes Write
	pruneMu sync.Mutex   // serializes Prune, so prunes never interleave
	hedger  *blob.Hedger // when to hedge a manifest write
	deleter *blob.Hedger // when to hedge a prune's delete
	reader  *blob.Hedger // when to hedge a listing or a manifest read
}

// readAttempts bounds the attempts of a listing or a manifest read: on an
// object store one request in a few hundred fails, and a restore must not
// fail (or fall back) for that.
const readAttempts = 3

// NewStorage returns the checkpoints kept in store, retaining the newest
// retain complete checkpoints (DefaultRetain if retain < 1).
func NewStorage(store blob.Store, retain int) *Storage {
	if retain < 1 {
		retain = DefaultRetain
	}
	return &Storage{store: store, retain: retain, hedger: blob.NewHedger(ManifestHedgeAfterP90, ManifestHedgeAfter),
		deleter: blob.NewHedger(ManifestHedgeAfterP90, ManifestHedgeAfter), reader: blob.NewHedger(ManifestHedgeAfterP90, ManifestHedgeAfter)}
}

// StateBlobName returns the blob name for the state that subtask of operator
// writes in checkpoint id: "checkpoints/<id, 20 digits>/<operator>-<subtask>.state".
// Characters of operator outside [A-Za-z0-9_.-] are replaced, and a hash
// of the original name is appended when anything was, so the result is a
// valid blob name and distinct operators get distinct names.
func (s *Storage) StateBlobName(id uint64, operator string, subtask int) string {
	return fmt.Sprintf("%s%s-%d.state", checkpointDir(id), sanitize(operator), subtask)
}

// PartBlobName is StateBlobName for a further blob of the same subtask in
// checkpoint id, told apart by tag (letters, digits, '-' and '_'), such as
// the parts of a changelog materialization:
// "checkpoints/<id>/<operator>-<subtask>-<tag>.state".
func (s *Storage) PartBlobName(id uint64, operator string, subtask int, tag string) string {
	return fmt.Sprintf("%s%s-%d-%s.state", checkpointDir(id), sanitize(operator), subtask, tag)
}

// PebblePrefix is the name prefix of the Pebble files (state/pebble's
// CheckpointOptions.Prefix) that subtask of operator uploads in checkpoint
// id in run tag: "checkpoints/<id>/<operator>-<subtask>-<tag>.pebble". The
// files are under the directory of the checkpoint that first uploads them,
// so pruning deletes them like any blob of a checkpoint once no retained
// manifest lists them, although later checkpoints share them; the tag keeps
// a fenced writer of the same id from replacing the new owner's files.
func (s *Storage) PebblePrefix(id uint64, operator string, subtask int, tag string) string {
	return fmt.Sprintf("%s%s-%d-%s.pebble", checkpointDir(id), sanitize(operator), subtask, tag)
}

// ManifestName returns the blob name of checkpoint id's manifest,
// "checkpoints/<id, 20 digits>/MANIFEST".
func (s *Storage) ManifestName(id uint64) string {
	return checkpointDir(id) + manifestFile
}

// List returns the ids of the complete checkpoints, those whose manifest
// exists, in ascending order. It does not read the manifests.
func (s *Storage) List(ctx context.Context) ([]uint64, error) {
	names, err := s.list(ctx, checkpointsDir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list checkpoints: %w", err)
	}
	var ids []uint64
	for _, n := range names {
		if id, manifest, ok := parseName(n); ok && manifest {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // already sorted by name; ids are fixed-width
	return ids, nil
}

// NextID returns the id for the next checkpoint: one more than the largest
// id List returns (readable or not), or 1 if there is none. A job restored
// from a checkpoint older than the newest should continue from NextID, not
// from its restored id + 1, since Complete refuses ids below a complete one.
func (s *Storage) NextID(ctx context.Context) (uint64, error) {
	// Every object counts, not only manifests: a checkpoint whose
	// manifest was deleted may have committed output under its id (a
	// sink's transaction markers), so its id is never taken again.
	names, err := s.list(ctx, checkpointsDir)
	if err != nil {
		return 1, fmt.Errorf("checkpoint: list checkpoints: %w", err)
	}
	next := uint64(1)
	for _, n := range names {
		if id, _, ok := parseName(n); ok && id >= next {
			next = id + 1
		}
	}
	// Void ids are never taken again either: a late manifest may carry one.
	void, err := s.voided(ctx)
	if err != nil {
		return 1, err
	}
	return max(next, void.max()+1), nil
}

// quarantineDir holds one marker per quarantined checkpoint, its reason.
const quarantineDir = "quarantine/"

// Quarantine sets checkpoint id aside as unusable, saying why: retention
// never deletes its objects (they are the evidence of what went wrong),
// and Latest and Before pass over it.
func (s *Storage) Quarantine(ctx context.Context, id uint64, reason string) error {
	if err := s.store.Put(ctx, fmt.Sprintf("%s%020d", quarantineDir, id), []byte(reason)); err != nil {
		return fmt.Errorf("checkpoint: quarantine checkpoint %d: %w", id, err)
	}
	return nil
}

// Quarantined returns the quarantined checkpoints and why.
func (s *Storage) Quarantined(ctx context.Context) (map[uint64]string, error) {
	names, err := s.list(ctx, quarantineDir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list quarantine: %w", err)
	}
	q := map[uint64]string{}
	for _, n := range names {
		id, err := strconv.ParseUint(strings.TrimPrefix(n, quarantineDir), 10, 64)
		if err != nil {
			continue
		}
		reason := "quarantined"
		var buf []byte
		if data, err := s.reader.GetInto(ctx, s.store, n, &buf, readAttempts); err == nil && len(data) > 0 {
			reason = string(data)
		}
		q[id] = reason
	}
	return q, nil
}

// Load reads and decodes the manifest of checkpoint id. It does not check
// that the manifest's files exist; Latest and Before do.
func (s *Storage) Load(ctx context.Context, id uint64) (*Manifest, error) {
	m, err := s.load(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load checkpoint %d: %w", id, err)
	}
	return m, nil
}

// load is Load with errors that do not name the checkpoint.
func (s *Storage) load(ctx context.Context, id uint64) (*Manifest, error) {
	name := s.ManifestName(id)
	var buf []byte
	data, err := s.reader.GetInto(ctx, s.store, name, &buf, readAttempts)
	if err != nil {
		return nil, err
	}
	m, err := decodeManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if m.ID != id {
		return nil, invalidf("%s describes checkpoint %d", name, m.ID)
	}
	return m, nil
}

// PruneError is Complete's error when the checkpoint was completed (its
// manifest is written and restores will find it) but deleting older
// checkpoints failed. Callers log it and carry on: the next Complete prunes
// again.
type PruneError struct {
	ID  uint64 // the checkpoint that was completed
	Err error  // what went wrong while pruning
}

// Error says that the checkpoint is complete and what pruning failed on.
func (e *PruneError) Error() string {
	return fmt.Sprintf("checkpoint: checkpoint %d is complete, but pruning older checkpoints failed: %v", e.ID, e.Err)
}

// Unwrap returns the pruning error.
func (e *PruneError) Unwrap() error { return e.Err }

// Complete makes m a complete checkpoint by writing its manifest, atomically,
// as the last step; the blobs m.Files lists must be written before. It then
// prunes: of the complete checkpoints, the newest retain whose manifests
// are readable are kept (m among them), the manifests of the others with ids
// up to m.ID are deleted, and so is every blob under "checkpoints/" that no
// kept manifest lists in Files and whose checkpoint id (from its name) is at
// most m.ID: orphans of failed or aborted checkpoints go, blobs of newer
// checkpoints still in flight stay. Blobs outside "checkpoints/<id>/" are
// never deleted.
//
// A nil error means complete and pruned. A *PruneError means complete but
// not (fully) pruned. Any other error means m is not complete: m is
// inconsistent (see DecodeManifest), its id is below that of a complete
// checkpoint (ErrSubsumed), or the manifest could not be written.
// Completing an existing id again replaces its manifest.
func (s *Storage) Complete(ctx context.Context, m *Manifest) error {
	if err := s.Write(ctx, m); err != nil {
		return err
	}
	return s.Prune(ctx, m)
}

// Write is the first half of Complete: it writes m's manifest, after which
// the checkpoint exists. Call Prune(m) afterwards, possibly in the
// background, to apply retention. On a store that can create objects
// conditionally (blob.Creator) the manifest is created only if absent:
// if another writer created it first, Write fails with an error matching
// ErrTaken and blob.ErrExists.
func (s *Storage) Write(ctx context.Context, m *Manifest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := m.validate(); err != nil {
		return fmt.Errorf("checkpoint: complete: %w", err)
	}
	ids, err := s.List(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint: complete checkpoint %d: %w", m.ID, err)
	}
	if n := len(ids); n > 0 && ids[n-1] > m.ID {
		return fmt.Errorf("checkpoint: complete checkpoint %d: %w %d (use Storage.NextID for new ids)", m.ID, ErrSubsumed, ids[n-1])
	}
	data, err := encodeManifest(m)
	if err != nil {
		return fmt.Errorf("checkpoint: complete checkpoint %d: encode manifest: %w", m.ID, err)
	}
	// Hedged like the changelog's uploads: an object store's long tail
	// would otherwise stall every checkpoint that hits it. Created only if
	// absent where the store can promise it, so two writers never both
	// commit one checkpoint id.
	name := s.ManifestName(m.ID)
	err = blob.ErrNoConditionalCreate
	if _, ok := s.store.(blob.Creator); ok {
		err = s.hedger.PutIfAbsent(ctx, s.store, name, data, 3)
	}
	if errors.Is(err, blob.ErrNoConditionalCreate) {
		// Not a Creator, or a wrapper whose inner store is none: a plain
		// write, as the store allows.
		err = s.hedger.Put(ctx, s.store, name, data, 3)
	}
	if errors.Is(err, blob.ErrExists) {
		return fmt.Errorf("checkpoint: complete checkpoint %d: %w: %w", m.ID, ErrTaken, err)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: complete checkpoint %d: write manifest: %w", m.ID, err)
	}
	return nil
}

// ErrTaken is matched (errors.Is) by Write's error when another writer
// created the checkpoint's manifest first: the id is taken, and this
// writer's checkpoint is not complete. It means a second process writes
// the same checkpoints, or one that was taken over has not stopped yet.
var ErrTaken = errors.New("another writer created this checkpoint's manifest first")

// ManifestHedgeAfter is the longest a manifest write may take before a
// second attempt of it starts in parallel (blob.Hedger, at most 3
// attempts); once the storage has written 16 manifests, it is
// ManifestHedgeAfterP90 times the 90th percentile of the recent ones if
// that is sooner (at least blob.MinHedgeDelay). A losing attempt is
// cancelled; one that still lands writes the same bytes, and if its
// checkpoint was pruned meanwhile, the next prune deletes it.
const ManifestHedgeAfter = time.Second

// ManifestHedgeAfterP90 is the factor of the recent manifest writes' 90th
// percentile after which a manifest write is hedged.
const ManifestHedgeAfterP90 = 3

// Prune is the second half of Complete: keep the newest retained complete
// checkpoints up to m, and the savepoints (Retain), and delete what none of
// them uses. Its error is a
// *PruneError; the checkpoint stays complete.
func (s *Storage) Prune(ctx context.Context, m *Manifest) error {
	s.pruneMu.Lock()
	defer s.pruneMu.Unlock()
	if err := s.prune(ctx, m); err != nil {
		return &PruneError{ID: m.ID, Err: err}
	}
	return nil
}

// prune deletes what Complete(m) promises to delete. It decides everything
// before deleting anything, and deletes manifests before the files they
// list, so a crash mid-prune never leaves a manifest whose files are gone.
func (s *Storage) prune(ctx context.Context, m *Manifest) error {
	// One listing of the whole store for the checkpoints and the void,
	// savepoint and quarantine markers: a LIST is a billed request on an
	// object store, and a prune follows most checkpoints.
	all, err := s.list(ctx, "")
	if err != nil {
		return err
	}
	var names, markers []string
	for _, n := range all {
		if strings.HasPrefix(n, checkpointsDir) {
			names = append(names, n)
		} else {
			markers = append(markers, n)
		}
	}
	void, savepoints, quarantined := voidIDs(markers), savepointIDs(markers), markedIDs(markers, quarantineDir)
	// Only the newest reservation counts: the older markers go with the
	// files.
	var stale []string
	reservations := markedIDs(markers, reservedDir)
	newestReservation := uint64(0)
	for last := range reservations {
		newestReservation = max(newestReservation, last)
	}
	for last := range reservations {
		if last < newestReservation {
			stale = append(stale, reservedName(last))
		}
	}
	keep := map[string]bool{}
	// keepAll keeps a retained checkpoint's manifest and what it uses.
	keepAll := func(m *Manifest) {
		keep[s.ManifestName(m.ID)] = true
		for _, f := range m.Files {
			keep[f] = true
		}
		for _, f := range m.Keep {
			keep[f] = true
		}
	}
	keepAll(m)
	var older []uint64 // manifests below m.ID, newest first, but void ones
	for i := len(names) - 1; i >= 0; i-- {
		if id, manifest, ok := parseName(names[i]); ok && manifest && id < m.ID && !void.has(id) {
			older = append(older, id)
		}
	}
	for kept := 1; kept < s.retain && len(older) > 0; older = older[1:] {
		old, err := s.Load(ctx, older[0])
		if err != nil {
			if unusable(err) {
				continue // deleted below, as an unreferenced manifest
			}
			return err // unsure what it references: delete nothing
		}
		keepAll(old)
		kept++
	}
	// Savepoints are kept whatever their age, with what they use.
	for _, id := range savepoints {
		if id > m.ID || keep[s.ManifestName(id)] {
			continue
		}
		sp, err := s.Load(ctx, id)
		if err != nil {
			if unusable(err) {
				continue // gone or corrupt: nothing of it can be restored
			}
			return err // unsure what it references: delete nothing
		}
		keepAll(sp)
	}
	var manifests, files []string
	for _, n := range names {
		id, manifest, ok := parseName(n)
		switch {
		case !ok || id > m.ID || keep[n] || quarantined[id]:
		case manifest:
			manifests = append(manifests, n)
		default:
			files = append(files, n)
		}
	}
	// Manifests go first, all of them, then the files; each group is
	// deleted PruneParallelism at a time, so one slow delete does not hold
	// up the others.
	if err := s.deleteAll(ctx, manifests); err != nil {
		return err
	}
	return s.deleteAll(ctx, append(files, stale...))
}

// PruneParallelism is how many deletes a prune has in flight at once.
const PruneParallelism = 8

// PruneAttempts is how many attempts a prune makes at most to delete one
// object: a delete that fails, or takes longer than ManifestHedgeAfter (or
// ManifestHedgeAfterP90 times the recent deletes' 90th percentile), gets
// another attempt in parallel.
const PruneAttempts = 3

// deleteAll deletes names, PruneParallelism at a time, and joins the errors.
// Once ctx is done it starts no more deletes.
func (s *Storage) deleteAll(ctx context.Context, names []string) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	slots := make(chan struct{}, PruneParallelism)
	for _, n := range names {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := s.deleter.Delete(ctx, s.store, n, PruneAttempts); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// unusable reports whether a Load error means the manifest will never be
// readable (corrupt, undecodable, or deleted since it was listed), as
// opposed to a failure that may pass, like a network error.
func unusable(err error) bool {
	var ce *blob.CorruptError
	var ie invalidError
	return errors.As(err, &ce) || errors.As(err, &ie) || errors.Is(err, blob.ErrNotFound)
}

// SkipError explains why Latest or Before passed over a checkpoint.
type SkipError struct {
	ID  uint64 // the checkpoint skipped
	Err error  // why: a corrupt or undecodable manifest, or missing files
}

// Error names the checkpoint and why it was skipped.
func (e *SkipError) Error() string {
	return fmt.Sprintf("checkpoint %d: %v; falling back to an older checkpoint", e.ID, e.Err)
}

// Unwrap returns the reason, so errors.As finds a *blob.CorruptError.
func (e *SkipError) Unwrap() error { return e.Err }

// Latest returns the newest checkpoint to restore from: the newest whose
// manifest is intact and whose Files all exist (their contents are verified
// when the restore reads them). Every newer checkpoint passed over is in
// skipped as a *SkipError saying why. With no usable checkpoint, m is nil
// and err is nil. A failure to read storage that is not corruption (an I/O
// or network error) is returned as err rather than skipped: falling back
// past a checkpoint whose sink transactions were committed would repeat
// output.
func (s *Storage) Latest(ctx context.Context) (m *Manifest, skipped []error, err error) {
	return s.newest(ctx, func(uint64) bool { return true })
}

// Before is Latest restricted to checkpoints with ids below id. A restore
// calls it when restoring checkpoint id failed, for example on a corrupt
// state part. Restoring an older checkpoint is only exactly-once if the
// sinks can abort, not just commit, what newer checkpoints pre-committed.
func (s *Storage) Before(ctx context.Context, id uint64) (*Manifest, []error, error) {
	return s.newest(ctx, func(c uint64) bool { return c < id })
}

func (s *Storage) newest(ctx context.Context, eligible func(uint64) bool) (*Manifest, []error, error) {
	ids, err := s.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	quarantined, err := s.Quarantined(ctx)
	if err != nil {
		return nil, nil, err
	}
	void, err := s.voided(ctx)
	if err != nil {
		return nil, nil, err
	}
	var skipped []error
	listed := map[string]map[string]bool{} // directory prefix -> names under it
	for i := len(ids) - 1; i >= 0; i-- {
		id := ids[i]
		if !eligible(id) {
			continue
		}
		if why := quarantined[id]; why != "" {
			skipped = append(skipped, &SkipError{id, fmt.Errorf("quarantined: %s", why)})
			continue
		}
		if void.has(id) {
			skipped = append(skipped, &SkipError{id, errors.New("void: its manifest was written after a restore gave it up (a write in flight when its writer stopped)")})
			continue
		}
		m, err := s.load(ctx, id)
		if err != nil {
			var ce *blob.CorruptError
			switch {
			case errors.As(err, &ce):
				skipped = append(skipped, &SkipError{id, fmt.Errorf("manifest corrupt: %w", err)})
			case errors.Is(err, blob.ErrNotFound):
				skipped = append(skipped, &SkipError{id, fmt.Errorf("manifest deleted while reading: %w", err)})
			case unusable(err):
				skipped = append(skipped, &SkipError{id, fmt.Errorf("manifest undecodable: %w", err)})
			default:
				return nil, skipped, fmt.Errorf("checkpoint: load checkpoint %d: %w", id, err)
			}
			continue
		}
		missing, err := s.missing(ctx, m.Files, listed)
		if err == nil && len(missing) > 0 {
			missing, err = s.completeUploads(ctx, m, missing, listed)
		}
		if err != nil {
			return nil, skipped, err
		}
		if len(missing) > 0 {
			skipped = append(skipped, &SkipError{id, fmt.Errorf("%d of its %d files missing, first %q: %w",
				len(missing), len(m.Files), missing[0], blob.ErrNotFound)})
			continue
		}
		return m, skipped, nil
	}
	return nil, skipped, nil
}

// missing returns the files that do not exist, listing each directory once
// per call of newest (listed caches the listings).
func (s *Storage) missing(ctx context.Context, files []string, listed map[string]map[string]bool) ([]string, error) {
	var out []string
	for _, f := range files {
		dir := f[:strings.LastIndexByte(f, '/')+1]
		names, ok := listed[dir]
		if !ok {
			l, err := s.list(ctx, dir)
			if err != nil {
				return nil, fmt.Errorf("checkpoint: check files: %w", err)
			}
			names = make(map[string]bool, len(l))
			for _, n := range l {
				names[n] = true
			}
			listed[dir] = names
		}
		if !names[f] {
			out = append(out, f)
		}
	}
	return out, nil
}

// completeUploads completes the uploads m records of the missing files
// (log objects whose writer deferred their completion and did not get to
// it, or not yet) and returns the files still missing. An upload that is
// gone while its object is missing is being completed elsewhere (the
// writer's completion in progress): it waits for the object, up to
// completeWait, before counting it missing.
func (s *Storage) completeUploads(ctx context.Context, m *Manifest, missing []string, listed map[string]map[string]bool) ([]string, error) {
	ups := m.uploads()
	p, _, ok := blob.PartsOf(s.store)
	if len(ups) == 0 || !ok {
		return missing, nil
	}
	var still []string
	for _, f := range missing {
		u, ok := ups[f]
		if !ok {
			still = append(still, f)
			continue
		}
		found, err := s.completeUpload(ctx, p, u)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: checkpoint %d: %w", m.ID, err)
		}
		if !found {
			still = append(still, f)
			continue
		}
		listed[f[:strings.LastIndexByte(f, '/')+1]][f] = true
	}
	return still, nil
}

// completeWait bounds how long Latest waits for an upload being completed
// elsewhere to show its object.
var completeWait = 30 * time.Second

// completeUpload completes u and reports whether its object exists
// (blob.CompleteAndAwait, the object looked for by listing): false if it
// did not show up within completeWait.
func (s *Storage) completeUpload(ctx context.Context, p blob.Parter, u LogUpload) (bool, error) {
	return blob.CompleteAndAwait(ctx, p, u.Object, u.ID, int(u.Parts), u.Size, readAttempts, completeWait,
		func(ctx context.Context) (bool, error) {
			names, err := s.list(ctx, u.Object)
			return slices.Contains(names, u.Object), err
		})
}

// list lists the names under prefix, retried and hedged (reader).
func (s *Storage) list(ctx context.Context, prefix string) ([]string, error) {
	return s.reader.List(ctx, s.store, prefix, readAttempts)
}

// voidDir holds the void markers: one per void checkpoint id, named by
// the id, or one per range of them, named "<first>-<last>".
const voidDir = "void/"

// reservedDir holds the reservation markers, each named by the highest
// checkpoint id it reserves.
const reservedDir = "reserved/"

// ReserveBlock is how many checkpoint ids Reserve reserves at once: one
// PUT per ReserveBlock checkpoints.
const ReserveBlock = 64

// Reserve reserves the checkpoint ids up to id+ReserveBlock-1 for this
// writer and returns the highest one. A writer reserves an id before it
// triggers its checkpoint: VoidInFlight makes every reserved id void, so a
// checkpoint whose every write was still in flight when its writer stopped
// (nothing of it listed yet, its manifest landing later) is never
// restored. Only the highest reservation counts: pruning deletes the
// older markers in the background, and VoidInFlight those it covered. One
// PUT per ReserveBlock checkpoints, and one DELETE in a later prune.
func (s *Storage) Reserve(ctx context.Context, id uint64) (uint64, error) {
	last := id + ReserveBlock - 1
	if err := s.hedger.Put(ctx, s.store, reservedName(last), []byte("checkpoint ids reserved by a writer"), PruneAttempts); err != nil {
		return 0, fmt.Errorf("checkpoint: reserve checkpoint ids %d-%d: %w", id, last, err)
	}
	return last, nil
}

func reservedName(last uint64) string { return fmt.Sprintf("%s%020d", reservedDir, last) }

// LateWrites reports whether a write to the store may land after its
// writer gave up on it or stopped: true on a store without a lock
// (blob.Locker), an object store, where a request may be delayed in the
// network; false on a locked one (local files).
func (s *Storage) LateWrites() bool {
	_, locked := s.store.(blob.Locker)
	return !locked
}

// reservations returns the ids of the reservation markers: the last id
// of each.
func (s *Storage) reservations(ctx context.Context) (map[uint64]bool, error) {
	names, err := s.list(ctx, reservedDir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list reserved checkpoint ids: %w", err)
	}
	return markedIDs(names, reservedDir), nil
}

// VoidAhead is how many ids past the newest one taken VoidInFlight makes
// void, for writers that did not reserve their ids (Reserve): such a
// writer has at most one checkpoint in flight, whose manifest write may
// trail the trigger of the next by one.
const VoidAhead = 2

// VoidInFlight makes void every checkpoint id above restored that has no
// manifest and that a writer may have taken: checkpoints a writer had in
// flight when it stopped. On an object store a write can land after its
// writer gave up on it (a request delayed in the network, a process killed
// with requests in flight), so such a checkpoint's manifest may still
// appear; its sinks' pending output is about to be aborted by the restore
// of restored, so it must never be restored. Latest and Before pass over
// void ids, and pruning deletes their objects like those of any
// unretained checkpoint. It returns the ids it made void. Call it after
// choosing the checkpoint to restore and before the sinks abort what it
// did not pre-commit.
//
// The ids a writer may have taken are those up to the highest id of an
// object, a void marker (NextID continues past both) or a reservation
// (Reserve), and VoidAhead more for writers that reserve nothing. A
// checkpoint whose every write was in flight has no object to list, so
// all of them are made void: one marker per range of ids without a
// manifest. Where a marker cannot be written, the objects of its ids are
// deleted instead, which a restore passes over as missing files; ids
// without objects have nothing to delete, so VoidInFlight then fails on a
// store without a lock (blob.Locker: an object store, where a write may
// land late) and passes over them on a locked one (local files, where a
// stopped writer writes nothing more).
func (s *Storage) VoidInFlight(ctx context.Context, restored uint64) ([]uint64, error) {
	names, err := s.list(ctx, checkpointsDir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: find checkpoints in flight: %w", err)
	}
	void, err := s.voided(ctx)
	if err != nil {
		return nil, err
	}
	reservations, err := s.reservations(ctx)
	if err != nil {
		return nil, err
	}
	complete := map[uint64]bool{}
	objects := map[uint64][]string{}
	newest := max(restored, void.max())
	for last := range reservations {
		newest = max(newest, last)
	}
	for _, n := range names {
		id, manifest, ok := parseName(n)
		if !ok {
			continue
		}
		newest = max(newest, id)
		switch {
		case id <= restored:
		case manifest:
			complete[id] = true
		default:
			objects[id] = append(objects[id], n)
		}
	}
	if newest == 0 {
		return nil, nil // an empty store: no writer has taken an id
	}
	// The ranges of ids to make void: maximal runs of ids neither
	// complete nor void already.
	var ranges []idRange
	for id := restored + 1; id <= newest+VoidAhead; id++ {
		if complete[id] || void.has(id) {
			continue
		}
		if n := len(ranges); n > 0 && ranges[n-1].last == id-1 {
			ranges[n-1].last = id
		} else {
			ranges = append(ranges, idRange{id, id})
		}
	}
	var made []uint64
	for _, r := range ranges {
		err := s.hedger.Put(ctx, s.store, voidDir+r.String(), []byte("in flight when its writer stopped"), PruneAttempts)
		for id := r.first; id <= r.last; id++ {
			switch {
			case err == nil:
			case objects[id] != nil:
				// No marker (a full disk, say): delete what the
				// checkpoint wrote instead. A manifest landing later then
				// lists missing files, and Latest and Before pass over it
				// all the same.
				if derr := s.deleteAll(ctx, objects[id]); derr != nil {
					return made, fmt.Errorf("checkpoint: make checkpoint %d void: %w", id, errors.Join(err, derr))
				}
			default:
				if s.LateWrites() {
					// On a store without a lock a write of this
					// checkpoint may still land (delayed in the
					// network), and there is nothing to delete instead:
					// restoring now could later restore a checkpoint
					// whose output is being aborted.
					return made, fmt.Errorf("checkpoint: make checkpoint %d void (a writer may have taken it, up to %d; a write of it may still land): %w", id, newest+VoidAhead, err)
				}
				// A locked store (local files) has no late writes: a
				// stopped writer's writes are done or lost.
				continue
			}
			made = append(made, id)
		}
	}
	// Every reserved id is complete, void or at most restored now: the
	// reservation markers go, best effort (a leftover only voids more ids
	// next time).
	var covered []string
	for last := range reservations {
		covered = append(covered, reservedName(last))
	}
	_ = s.deleteAll(ctx, covered)
	return made, nil
}

// idRange is the checkpoint ids first to last.
type idRange struct{ first, last uint64 }

// String is the range's marker name: "<first>-<last>", zero-padded.
func (r idRange) String() string { return fmt.Sprintf("%020d-%020d", r.first, r.last) }

// idSet is a set of checkpoint ids: single ids and ranges.
type idSet struct {
	ids    map[uint64]bool
	ranges []idRange
}

func (v idSet) has(id uint64) bool {
	if v.ids[id] {
		return true
	}
	for _, r := range v.ranges {
		if r.first <= id && id <= r.last {
			return true
		}
	}
	return false
}

// max is the highest id in the set, 0 if it is empty.
func (v idSet) max() uint64 {
	var m uint64
	for id := range v.ids {
		m = max(m, id)
	}
	for _, r := range v.ranges {
		m = max(m, r.last)
	}
	return m
}

// voidIDs are the void ids marked among names.
func voidIDs(names []string) idSet {
	v := idSet{ids: markedIDs(names, voidDir)}
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, voidDir)
		if !ok {
			continue
		}
		a, b, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		first, err1 := strconv.ParseUint(a, 10, 64)
		last, err2 := strconv.ParseUint(b, 10, 64)
		if err1 == nil && err2 == nil && first <= last {
			v.ranges = append(v.ranges, idRange{first, last})
		}
	}
	return v
}

// voided returns the void checkpoint ids.
func (s *Storage) voided(ctx context.Context) (idSet, error) {
	names, err := s.list(ctx, voidDir)
	if err != nil {
		return idSet{}, fmt.Errorf("checkpoint: list void checkpoints: %w", err)
	}
	return voidIDs(names), nil
}

// markedIDs are the ids of the markers under dir (void/, quarantine/)
// among names.
func markedIDs(names []string, dir string) map[uint64]bool {
	ids := map[uint64]bool{}
	for _, n := range names {
		if rest, ok := strings.CutPrefix(n, dir); ok {
			if id, err := strconv.ParseUint(rest, 10, 64); err == nil {
				ids[id] = true
			}
		}
	}
	return ids
}
