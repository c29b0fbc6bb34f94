package dstl

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddyflow/eddy/blob"
)

// ReadOptions configure Read.
type ReadOptions struct {
	// LocalDir is where the log kept local copies (Options.LocalDir). If
	// set, Read reads an object's local copy first, and the store only if
	// the copy is missing or fails verification.
	LocalDir string
	// Parallelism is the number of key groups applied concurrently.
	// Default 4.
	Parallelism int
	// Fetches is the number of objects fetched concurrently: a log holds
	// many small objects, and fetching them waits on the store, not on
	// the CPU. Default 16.
	Fetches int
	// Hedger, if not nil, hedges the reads of objects from the store
	// (blob.Hedger.GetInto): a read stuck in the store's latency tail
	// gets a second one in parallel.
	Hedger *blob.Hedger
	// Stats, if not nil, receives counts of what Read did.
	Stats *ReadStats
	// Prefetched holds objects already fetched by Fetch for the same
	// handles or more (Fetch keeps only their writers' changes); Read
	// fetches only the others.
	Prefetched map[string]*Batch
	// Shared, if not nil, is where concurrent restores of one process get
	// their objects: each object is fetched once, with the changes of every
	// writer, for all of them (see Shared).
	Shared *Shared
}

// Shared lets the restoring subtasks of one process fetch each log object
// once. The log of a process is shared by all its writers, so every object
// holds sections of several subtasks, and without it each subtask fetches
// and verifies every object for its own sections. An object stays while a
// Fetch that got it has not released it; one fetched again after its last
// release is fetched anew. Safe for concurrent use.
type Shared struct {
	mu   sync.Mutex
	objs map[string]*sharedObject
}

type sharedObject struct {
	done  chan struct{} // closed when o or err is set
	o     *Batch
	err   error
	users int
}

// NewShared returns an empty Shared.
func NewShared() *Shared { return &Shared{objs: map[string]*sharedObject{}} }

// acquire returns the object name, calling fetch for it unless another
// user holds it or is fetching it. Each successful acquire must be
// released. A fetch that another user's ended context stopped is tried
// again under this one's.
func (s *Shared) acquire(ctx context.Context, name string, fetch func() (*Batch, error)) (*Batch, error) {
	for {
		o, err := s.acquireOnce(ctx, name, fetch)
		if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			continue
		}
		return o, err
	}
}

func (s *Shared) acquireOnce(ctx context.Context, name string, fetch func() (*Batch, error)) (*Batch, error) {
	s.mu.Lock()
	e := s.objs[name]
	if e == nil {
		e = &sharedObject{done: make(chan struct{})}
		s.objs[name] = e
		e.users++
		s.mu.Unlock()
		e.o, e.err = fetch()
		if e.err != nil {
			s.mu.Lock()
			delete(s.objs, name) // the next user tries again
			s.mu.Unlock()
		}
		close(e.done)
		return e.o, e.err
	}
	e.users++
	s.mu.Unlock()
	select {
	case <-e.done:
	case <-ctx.Done():
		s.release(name, e)
		return nil, fmt.Errorf("dstl: read object %q: %w", name, ctx.Err())
	}
	if e.err != nil {
		return nil, e.err
	}
	return e.o, nil
}

// Release drops a Fetch's hold on the objects it returned; an object no
// Fetch holds any more is forgotten (and collected once Reads are done
// with it). A nil Shared holds nothing.
func (s *Shared) Release(objs map[string]*Batch) {
	if s == nil || len(objs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, o := range objs {
		if e := s.objs[name]; e != nil && e.o == o {
			s.drop(name, e)
		}
	}
}

// release drops one user's hold on e, the entry of name when it was
// acquired.
func (s *Shared) release(name string, e *sharedObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objs[name] == e {
		s.drop(name, e)
	}
}

// drop counts one user less of e, the entry of name, and forgets it after
// the last; s.mu is held.
func (s *Shared) drop(name string, e *sharedObject) {
	if e.users--; e.users == 0 {
		delete(s.objs, name)
	}
}

// ReadStats counts what a Read did.
type ReadStats struct {
	Objects      int64 // distinct objects read
	LocalReads   int64 // of those, read from a local copy
	LocalMissing int64 // local copies that did not exist
	LocalCorrupt int64 // local copies that failed verification (then read from the store)
	RemoteReads  int64 // objects read from the store
	Completed    int64 // of those, objects whose upload the read completed (Handle.Uploads)
	Applied      int64 // changes passed to apply
	Skipped      int64 // changes outside the handles' ranges or the key-group range
	Superseded   int64 // changes not applied because a later one replaces them
}

// changeRef is a change selected for replay and the order of its writer.
type changeRef struct {
	ord int
	c   *Change
}

// selection is the changes a Read applies: refs grouped by key group
// (ascending), each group in the order the objects hold them.
type selection struct {
	sections []selSection
	refs     []selRef
	groups   []int // group g is refs[groups[g]:groups[g+1]] (the last ends at len(refs))
}

// selSection is a section of a wanted writer, and the writer.
type selSection struct {
	s *batchSection
	w *writerInfo
}

// selRef is a selected change: rec i of section sec.
type selRef struct{ sec, i uint32 }

// end returns where group g's refs end.
func (sel *selection) end(g int) int {
	if g+1 < len(sel.groups) {
		return sel.groups[g+1]
	}
	return len(sel.refs)
}

// selectChanges selects the changes of objs that the writers' spans cover
// and whose key group is in [kgStart, kgEnd), grouped by key group with a
// counting sort: two passes and one slice, 8 bytes a change. It also
// reports which of the nHandles handles' last changes it saw, and how many
// changes it skipped.
func selectChanges(objs []*Batch, writers map[string]*writerInfo, nHandles int, kgStart, kgEnd uint32) (selection, []bool, int64) {
	var sel selection
	sawUpto := make([]bool, nHandles)
	var skipped int64
	for _, o := range objs {
		for si := range o.sections {
			s := &o.sections[si]
			if w := writers[s.writer]; w != nil {
				sel.sections = append(sel.sections, selSection{s, w})
			} else {
				skipped += int64(len(s.recs))
			}
		}
	}
	// Pass 1: count, note the handles' last changes, and find the key
	// groups' extent.
	selected := func(w *writerInfo, r *rec) bool {
		if r.kg < kgStart || r.kg >= kgEnd {
			return false
		}
		for _, sp := range w.spans {
			if r.seq > sp.after && r.seq <= sp.upto {
				return true
			}
		}
		return false
	}
	total := 0
	lo, hi := uint32(1<<32-1), uint32(0)
	for _, ss := range sel.sections {
		for i := range ss.s.recs {
			r := &ss.s.recs[i]
			for _, sp := range ss.w.spans {
				if r.seq == sp.upto {
					sawUpto[sp.handle] = true
				}
			}
			if !selected(ss.w, r) {
				skipped++
				continue
			}
			total++
			lo, hi = min(lo, r.kg), max(hi, r.kg)
		}
	}
	if total == 0 {
		return sel, sawUpto, skipped
	}
	// Pass 2: place each selected change in its group. Groups are counted
	// in a dense array over the extent; an extent far wider than the
	// changes (a handful of scattered key groups) is sorted instead.
	sel.refs = make([]selRef, total)
	if span := uint64(hi-lo) + 1; span <= 1<<16 || span <= 4*uint64(total) {
		next := make([]int, span)
		for _, ss := range sel.sections {
			for i := range ss.s.recs {
				if r := &ss.s.recs[i]; selected(ss.w, r) {
					next[r.kg-lo]++
				}
			}
		}
		at := 0
		for g, n := range next {
			if n > 0 {
				sel.groups = append(sel.groups, at)
			}
			next[g] = at
			at += n
		}
		for k, ss := range sel.sections {
			for i := range ss.s.recs {
				if r := &ss.s.recs[i]; selected(ss.w, r) {
					sel.refs[next[r.kg-lo]] = selRef{uint32(k), uint32(i)}
					next[r.kg-lo]++
				}
			}
		}
		return sel, sawUpto, skipped
	}
	j := 0
	for k, ss := range sel.sections {
		for i := range ss.s.recs {
			if selected(ss.w, &ss.s.recs[i]) {
				sel.refs[j] = selRef{uint32(k), uint32(i)}
				j++
			}
		}
	}
	kgOf := func(r selRef) uint32 { return sel.sections[r.sec].s.recs[r.i].kg }
	slices.SortStableFunc(sel.refs, func(a, b selRef) int { return cmp.Compare(kgOf(a), kgOf(b)) })
	for j, r := range sel.refs {
		if j == 0 || kgOf(r) != kgOf(sel.refs[j-1]) {
			sel.groups = append(sel.groups, j)
		}
	}
	return sel, sawUpto, skipped
}

// replayWorker is what one replay goroutine reuses from key group to key
// group: the expanded changes, their refs, and the index deciding which
// to apply.
type replayWorker struct {
	views []Change
	refs  []changeRef
	keep  []bool
	idx   replayIndex
}

// expand returns group g's changes in apply order: by writer order, then
// sequence number (the objects usually hold them so; they are sorted if
// not). The changes live in w's buffers until the next expand.
func (w *replayWorker) expand(sel selection, g int) []changeRef {
	in := sel.refs[sel.groups[g]:sel.end(g)]
	w.views = slices.Grow(w.views[:0], len(in))[:len(in)]
	w.refs = slices.Grow(w.refs[:0], len(in))[:len(in)]
	sorted := true
	for j, r := range in {
		ss := sel.sections[r.sec]
		ss.s.change(&ss.s.recs[r.i], &w.views[j])
		w.refs[j] = changeRef{ss.w.ord, &w.views[j]}
		if j > 0 && applyOrder(w.refs[j-1], w.refs[j]) > 0 {
			sorted = false
		}
	}
	if !sorted {
		slices.SortStableFunc(w.refs, applyOrder)
	}
	return w.refs
}

// applyOrder orders changes by writer, then sequence number.
func applyOrder(a, b changeRef) int {
	return cmp.Or(cmp.Compare(a.ord, b.ord), cmp.Compare(a.c.Seq, b.c.Seq))
}

// replayIndex remembers, for one key group, what later changes of a replay
// already decided: keys whose whole value a later change sets or removes,
// and elements a later change sets or removes. Entries are keyed by a hash
// of (state, key[, sub]) and hold the change that set them, so a hit is
// verified against it; hash collisions go to an exact map. Its maps are
// reused across key groups.
type replayIndex struct {
	seed  maphash.Seed
	whole map[uint64]*Change
	elems map[uint64]*Change
	exact map[string]struct{} // identities whose hash another identity took
	buf   []byte
}

// seen reports whether the identity of c (its key, with its sub key if
// elem) is recorded, and records it.
func (x *replayIndex) seen(c *Change, elem bool) bool {
	m := x.whole
	if elem {
		m = x.elems
	}
	h := x.hash(c, elem)
	prev, ok := m[h]
	if !ok {
		m[h] = c
		return false
	}
	if prev.State == c.State && bytes.Equal(prev.Key, c.Key) && (!elem || bytes.Equal(prev.Sub, c.Sub)) {
		return true
	}
	// A collision: decide by the exact identity.
	b := binary.LittleEndian.AppendUint32(x.buf[:0], c.State)
	if elem {
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(len(c.Key)))
	} else {
		b = append(b, 0)
	}
	b = append(b, c.Key...)
	if elem {
		b = append(b, c.Sub...)
	}
	x.buf = b
	if _, ok := x.exact[string(b)]; ok {
		return true
	}
	x.exact[string(b)] = struct{}{}
	return false
}

// collideForTest, if set, replaces the identity hash (tests force
// collisions with it).
var collideForTest func(c *Change, elem bool) uint64

func (x *replayIndex) hash(c *Change, elem bool) uint64 {
	if collideForTest != nil {
		return collideForTest(c, elem)
	}
	h := maphash.Bytes(x.seed, c.Key) ^ uint64(c.State)*0x9e3779b97f4a7c15
	if elem {
		h ^= maphash.Bytes(x.seed, c.Sub) * 0xbf58476d1ce4e5b9
	}
	return h
}

// needed marks which of refs (one key group's changes in apply order) a
// replay must apply: walking backwards, a change is needed unless a later
// change replaces it — a later whole-value change of its key, or a later
// change of the same element. Applying only those, in order, gives the
// same state as applying all: the last whole-value change of a key erases
// everything before it, and an element's value is that of its last change.
// It also drops the same change read twice from overlapping objects.
func needed(refs []changeRef, keep []bool, x *replayIndex) []bool {
	if x.whole == nil {
		x.seed = maphash.MakeSeed()
		x.whole, x.elems, x.exact = map[uint64]*Change{}, map[uint64]*Change{}, map[string]struct{}{}
	}
	clear(x.whole)
	clear(x.elems)
	clear(x.exact)
	keep = slices.Grow(keep[:0], len(refs))[:len(refs)]
	for j := len(refs) - 1; j >= 0; j-- {
		c := refs[j].c
		if j > 0 && refs[j-1].ord == refs[j].ord && refs[j-1].c.Seq == c.Seq {
			keep[j] = false // the same change twice: overlapping objects
			continue
		}
		if !c.Op.hasSub() {
			// Needed unless a later change set or removed the whole value.
			keep[j] = !x.seen(c, false)
			continue
		}
		if x.laterWhole(c) {
			keep[j] = false
			continue
		}
		keep[j] = !x.seen(c, true)
	}
	return keep
}

// laterWhole reports whether a later whole-value change of c's key was
// recorded (without recording c).
func (x *replayIndex) laterWhole(c *Change) bool {
	prev, ok := x.whole[x.hash(c, false)]
	if !ok {
		return false
	}
	if prev.State == c.State && bytes.Equal(prev.Key, c.Key) {
		return true
	}
	b := binary.LittleEndian.AppendUint32(x.buf[:0], c.State)
	b = append(b, 0)
	b = append(b, c.Key...)
	x.buf = b
	_, ok = x.exact[string(b)]
	return ok
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// span is the part (after, upto] of a writer's changes that handle i
// describes.
type span struct {
	after, upto uint64
	handle      int
}

// writerInfo is what a read needs of a writer: its order among the
// handles' writers and its spans.
type writerInfo struct {
	ord   int
	spans []span
}

// planRead checks handles and returns their writers, their distinct
// objects, the objects' recorded checksums (absent for handles that
// recorded none) and the uploads of those that may await completion.
func planRead(handles []Handle) (map[string]*writerInfo, []string, map[string]uint32, map[string]Upload, error) {
	writers := map[string]*writerInfo{}
	crcs := map[string]uint32{}
	uploads := map[string]Upload{}
	var names []string
	index := map[string]int{}
	for i, h := range handles {
		if h.After > h.Upto {
			return nil, nil, nil, nil, fmt.Errorf("dstl: read: handle %d of writer %q: after %d > upto %d", i, h.Writer, h.After, h.Upto)
		}
		if len(h.Objects) == 0 {
			if h.After < h.Upto {
				return nil, nil, nil, nil, fmt.Errorf("dstl: read: handle %d of writer %q: changes (%d,%d] but no objects", i, h.Writer, h.After, h.Upto)
			}
			continue
		}
		w := writers[h.Writer]
		if w == nil {
			w = &writerInfo{ord: len(writers)}
			writers[h.Writer] = w
		}
		w.spans = append(w.spans, span{h.After, h.Upto, i})
		if len(h.CRCs) != 0 && len(h.CRCs) != len(h.Objects) {
			return nil, nil, nil, nil, fmt.Errorf("dstl: read: handle %d of writer %q: %d checksums for %d objects", i, h.Writer, len(h.CRCs), len(h.Objects))
		}
		for j, o := range h.Objects {
			if len(h.CRCs) != 0 {
				if prev, ok := crcs[o]; ok && prev != h.CRCs[j] {
					return nil, nil, nil, nil, fmt.Errorf("dstl: read: handle %d of writer %q: object %q recorded with checksums %08x and %08x", i, h.Writer, o, prev, h.CRCs[j])
				}
				crcs[o] = h.CRCs[j]
			}
			if err := blob.ValidateName(o); err != nil {
				return nil, nil, nil, nil, fmt.Errorf("dstl: read: handle %d of writer %q: %w", i, h.Writer, err)
			}
			if _, ok := index[o]; !ok {
				index[o] = len(names)
				names = append(names, o)
			}
		}
		if err := h.checkUploads(); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("dstl: read: handle %d of writer %q: %w", i, h.Writer, err)
		}
		for _, u := range h.Uploads {
			if prev, ok := uploads[u.Object]; ok && prev != u {
				return nil, nil, nil, nil, fmt.Errorf("dstl: read: handle %d of writer %q: object %q recorded with uploads %+v and %+v", i, h.Writer, u.Object, prev, u)
			}
			uploads[u.Object] = u
		}
	}
	return writers, names, crcs, uploads, nil
}

// Fetch gets and verifies the objects of handles (the changes of their
// writers only, or of all writers from opts.Shared) without applying
// anything, so a restore can fetch the log while it loads the snapshot;
// pass the result to Read as ReadOptions.Prefetched, and with opts.Shared
// to its Release once Read is done.
func Fetch(ctx context.Context, store blob.Store, opts ReadOptions, handles []Handle) (map[string]*Batch, error) {
	writers, names, crcs, uploads, err := planRead(handles)
	if err != nil {
		return nil, err
	}
	objs, err := fetchAll(ctx, store, opts, names, crcs, uploads, func(w string) bool { return writers[w] != nil }, &fetchStats{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]*Batch, len(names))
	for i, n := range names {
		out[n] = objs[i]
	}
	return out, nil
}

type fetchStats struct{ local, missing, corrupt, remote, completed atomic.Int64 }

// completeWait bounds how long a read waits for a completion in progress
// elsewhere (the writer's, or another reader's) to show the object.
const completeWait = 30 * time.Second

// completeAndFetch completes the upload of a log object missing from the
// store (see Handle.Uploads) and fetches it once it shows, up to
// completeWait (blob.CompleteAndAwait).
func completeAndFetch(ctx context.Context, store blob.Store, h *blob.Hedger, up Upload, wanted func(string) bool) (*Batch, error) {
	p, ok := store.(blob.Parter)
	if !ok {
		return nil, fmt.Errorf("dstl: read object %q: not found, and its upload %s cannot be completed: %T: %w", up.Object, up.ID, store, blob.ErrNoParts)
	}
	var o *Batch
	found, err := blob.CompleteAndAwait(ctx, p, up.Object, up.ID, int(up.Parts), up.Size, 3, completeWait,
		func(ctx context.Context) (bool, error) {
			var err error
			o, err = fetchRemote(ctx, store, h, up.Object, wanted)
			if errors.Is(err, blob.ErrNotFound) {
				return false, nil
			}
			return err == nil, err
		})
	switch {
	case err != nil:
		return nil, fmt.Errorf("dstl: read object %q: not found at first: %w", up.Object, err)
	case !found:
		return nil, fmt.Errorf("dstl: read object %q: not found %v after its upload %s was completed: %w", up.Object, completeWait, up.ID, blob.ErrNotFound)
	}
	return o, nil
}

// fetchAll fetches and decodes the named objects, par at a time, from
// opts.Prefetched, the local copies, or the store.
//
// An object whose checksum differs from the one crcs records is refused
// (from the store) or fetched again from the store (a local copy).
func fetchAll(ctx context.Context, store blob.Store, opts ReadOptions, names []string, crcs map[string]uint32, uploads map[string]Upload, wanted func(string) bool, st *fetchStats) ([]*Batch, error) {
	par := opts.Fetches
	if par <= 0 {
		par = DefaultFetches
	}
	objs := make([]*Batch, len(names))
	err := parallel(ctx, par, len(names), func(ctx context.Context, _, i int) error {
		name := names[i]
		want, check := crcs[name]
		up := uploads[name]
		if o := opts.Prefetched[name]; o != nil {
			if check && o.crc != want {
				return wrongObject(name, o.crc, want)
			}
			objs[i] = o
			return nil
		}
		var err error
		if opts.Shared != nil {
			objs[i], err = opts.Shared.acquire(ctx, name, func() (*Batch, error) {
				return fetchOne(ctx, store, opts.LocalDir, opts.Hedger, name, want, check, up, nil, st)
			})
			if err == nil && check && objs[i].crc != want {
				// Cached for another reader that recorded another object.
				err = wrongObject(name, objs[i].crc, want)
			}
		} else {
			objs[i], err = fetchOne(ctx, store, opts.LocalDir, opts.Hedger, name, want, check, up, wanted, st)
		}
		return err
	})
	if err != nil {
		releaseFetched(opts, names, objs)
		return nil, err
	}
	return objs, nil
}

// releaseFetched releases the objects fetchAll got from opts.Shared (not
// those of opts.Prefetched, which their Fetch releases).
func releaseFetched(opts ReadOptions, names []string, objs []*Batch) {
	if opts.Shared == nil {
		return
	}
	held := map[string]*Batch{}
	for i, o := range objs {
		if o != nil && opts.Prefetched[names[i]] == nil {
			held[names[i]] = o
		}
	}
	opts.Shared.Release(held)
}

// fetchOne fetches and decodes the object name (the sections of the writers
// wanted accepts, all if it is nil) from its local copy in localDir, or
// from the store if there is none or it fails verification.
//
// With check, the object must have the checksum want. An object missing
// from the store whose up has Parts is completed from its upload first.
func fetchOne(ctx context.Context, store blob.Store, localDir string, h *blob.Hedger, name string, want uint32, check bool, up Upload, wanted func(string) bool, st *fetchStats) (*Batch, error) {
	if localDir != "" {
		data, err := os.ReadFile(localPath(localDir, name))
		if err == nil {
			if o, err := decodeBatch(data, wanted); err == nil && (!check || o.crc == want) {
				st.local.Add(1)
				return o, nil
			}
			st.corrupt.Add(1)
		} else {
			st.missing.Add(1)
		}
	}
	o, err := fetchRemote(ctx, store, h, name, wanted)
	if err != nil && up.Parts > 0 && errors.Is(err, blob.ErrNotFound) {
		// Its parts are durable; the writer did not complete it (yet).
		o, err = completeAndFetch(ctx, store, h, up, wanted)
		if err == nil {
			st.completed.Add(1)
		}
	}
	if err != nil {
		return nil, err
	}
	if check && o.crc != want {
		return nil, wrongObject(name, o.crc, want)
	}
	st.remote.Add(1)
	return o, nil
}

// Read replays the changes the handles describe whose key group is in
// [kgStart, kgEnd), calling apply for each. Changes of one writer are
// applied in sequence order (across its handles; handles of one writer
// may overlap), the writers of one key group in the order they first
// appear in handles. Key groups are applied in parallel
// (ReadOptions.Parallelism): apply is called concurrently for different
// key groups, never for the same one, so it must be safe for concurrent
// calls with different kg. The change and its key, sub key and value alias
// Read's buffers: apply must copy them to keep them. Read applies only the
// changes that no later change of the handles replaces (the last change
// of each key's whole value or of each element, and none before a later
// whole-value change of the key), so replay costs about what the state
// the log touched costs, not the length of the log; the state after
// replaying is the same as if every change were applied.
//
// Read verifies every object and checks that each handle's last change
// (its Upto) is present, so a missing, damaged or replaced object is an
// error, not a silent gap. The first error from apply stops Read and is
// returned.
func Read(ctx context.Context, store blob.Store, opts ReadOptions, handles []Handle, kgStart, kgEnd uint32,
	apply func(c *Change) error) error {
	if kgStart > kgEnd {
		return fmt.Errorf("dstl: read: key-group range [%d,%d) is inverted", kgStart, kgEnd)
	}
	par := opts.Parallelism
	if par <= 0 {
		par = 4
	}
	writers, names, crcs, uploads, err := planRead(handles)
	if err != nil {
		return err
	}

	// Fetch and decode every object, keeping the sections of the handles'
	// writers only.
	wanted := func(w string) bool { return writers[w] != nil }
	var st fetchStats
	objs, err := fetchAll(ctx, store, opts, names, crcs, uploads, wanted, &st)
	if err != nil {
		return err
	}
	defer releaseFetched(opts, names, objs)

	// Select the changes in the handles' ranges and the key-group range,
	// grouped by key group in one flat slice.
	sel, sawUpto, skipped := selectChanges(objs, writers, len(handles), kgStart, kgEnd)
	for i, h := range handles {
		if h.After < h.Upto && !sawUpto[i] {
			return fmt.Errorf("dstl: read: handle %d of writer %q (%d,%d]: its objects %q hold no change %d; an object is missing, stale or replaced",
				i, h.Writer, h.After, h.Upto, h.Objects, h.Upto)
		}
	}

	// Apply, key groups in parallel. Each worker expands one key group's
	// changes at a time into buffers it reuses.
	var applied, superseded atomic.Int64
	workers := make([]replayWorker, min(par, len(sel.groups)))
	err = parallel(ctx, par, len(sel.groups), func(_ context.Context, w, g int) error {
		rw := &workers[w]
		refs := rw.expand(sel, g)
		rw.keep = needed(refs, rw.keep, &rw.idx)
		for j, r := range refs {
			if !rw.keep[j] {
				continue
			}
			if err := apply(r.c); err != nil {
				return err
			}
			applied.Add(1)
		}
		superseded.Add(int64(len(refs)) - int64(countTrue(rw.keep)))
		return nil
	})
	if opts.Stats != nil {
		*opts.Stats = ReadStats{
			Objects: int64(len(names)), LocalReads: st.local.Load(), LocalMissing: st.missing.Load(),
			LocalCorrupt: st.corrupt.Load(), RemoteReads: st.remote.Load(), Completed: st.completed.Load(), Applied: applied.Load(), Skipped: skipped,
			Superseded: superseded.Load(),
		}
	}
	return err
}

// parallel calls fn for every i in [0, n) on up to par goroutines (worker
// w in [0, par) runs one call at a time), until a call fails or ctx ends.
// It returns the first error, or the context's.
func parallel(ctx context.Context, par, n int, fn func(ctx context.Context, w, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		errMu    sync.Mutex
		firstErr error
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	for w := range min(par, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, w, i); err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					errMu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dstl: read: %w", err)
	}
	return nil
}

// wrongObject is the error for an intact object that is not the one the
// handle recorded.
func wrongObject(name string, got, want uint32) error {
	return fmt.Errorf("dstl: read object %q: %w: its checksum is %08x, the checkpoint recorded %08x (the object was replaced after the checkpoint)", name, ErrCorrupt, got, want)
}

// DefaultFetches is ReadOptions.Fetches' default.
const DefaultFetches = 16

// fetchRemote gets and decodes an object from the store, retrying
// transient errors twice.
func fetchRemote(ctx context.Context, store blob.Store, h *blob.Hedger, name string, keep func(string) bool) (*Batch, error) {
	var err error
	for try := 0; try < 3; try++ {
		if try > 0 {
			select {
			case <-time.After(time.Duration(10<<try) * time.Millisecond):
			case <-ctx.Done():
				return nil, fmt.Errorf("dstl: read object %q: %w (after %v)", name, ctx.Err(), err)
			}
		}
		var data []byte
		if h != nil {
			// One read and one hedge per try; the tries retry failures.
			data, err = h.GetInto(ctx, store, name, &data, 2)
		} else {
			data, err = store.Get(ctx, name)
		}
		if err == nil {
			o, derr := decodeBatch(data, keep)
			if derr != nil {
				return nil, fmt.Errorf("dstl: read object %q: %w", name, derr)
			}
			return o, nil
		}
		if errors.Is(err, blob.ErrNotFound) || ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("dstl: read object %q: %w", name, err)
}

// PruneLocal deletes the local copies in dir that none of keep references,
// and leftover temporary files. A restored job calls it with the handles
// of the checkpoint it restored from, to drop the copies of earlier runs.
func PruneLocal(dir string, keep []Handle) error {
	want := map[string]bool{}
	for _, h := range keep {
		for _, o := range h.Objects {
			want[o] = true
		}
	}
	var errs []error
	var dirs []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			errs = append(errs, err)
			return nil
		}
		if d.IsDir() {
			if path != dir {
				dirs = append(dirs, path)
			}
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if !want[filepath.ToSlash(rel)] || strings.HasPrefix(d.Name(), ".") {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i]) // only succeeds for empty directories
	}
	return errors.Join(append(errs, err)...)
}
