package state

import (
	"fmt"
	"iter"

	"github.com/eddyflow/eddy/internal/bufpool"
	"github.com/eddyflow/eddy/serde"
)

// GroupSnapshot serializes the key groups [from, to) of a backend a bounded
// number of bytes per Step, so that a materialization of a large state
// never holds up the subtask for long, however large one key group is.
// The backend may be written between steps; the result is then fuzzy:
// each entry is written as it was at some moment between the snapshot's
// start and its end (an entry present throughout is written at least once;
// one written or removed meanwhile may be missing, written twice, or
// written with any of its values). Replaying every change logged since
// the start of the snapshot over the restored parts gives the state at the
// end of the replayed log, because every logged change sets or removes a
// key or an element outright.
//
// Parts end at key group boundaries and have the format of SnapshotGroups,
// so Restore, RestoreRanged and RestorePart read them. A GroupSnapshot
// belongs to the goroutine that writes the backend, like the backend; only
// SnapshotPart.Bytes may be called from another goroutine.
type GroupSnapshot struct {
	b         *Backend
	next, end int // the key group being serialized, and the end
	state     int // the index in b.states of the state being serialized in group next
	partBytes int // a part ends at the first group boundary past this many bytes
	chunk     int // SnapshotChunk but in tests

	w    entryWriter
	pull func() (struct{}, bool) // the running walk of (next, state); nil between walks
	stop func()
	data [][]byte // the chunks of (next, state) written so far

	gh        []byte   // scratch for the groupData headers
	groupSize int      // the data bytes of group next so far
	partFrom  int      // the first group of the pending part
	segs      [][]byte // the pending part's segments after its header
	size      int      // their bytes
	err       error
}

// SnapshotChunk is how many bytes of entries a GroupSnapshot writes into
// one buffer: a step's work is counted, and stops, in chunks.
const SnapshotChunk = 256 << 10

// minChunkRoom is the least a chunk's buffer starts with; it grows by
// append up to about a chunk.
const minChunkRoom = 4 << 10

// fullChunkRoom is the room of a chunk's buffer for a group at least a
// chunk large: a chunk and slack for the entry that ends it.
const fullChunkRoom = SnapshotChunk + SnapshotChunk/8

// fullChunks recycles full chunk buffers: SnapshotPart.Bytes and AppendTo
// put back those of cap fullChunkRoom once copied, and the next steps, of
// any snapshot, take them instead of allocating.
var fullChunks bufpool.Pool

// entryWriter is where a walk of a key group appends its entries.
type entryWriter struct {
	dst   []byte
	n     int // entries appended
	limit int // a walk pauses once dst holds this many bytes
	err   error
}

// NewGroupSnapshot starts a snapshot of the key groups [from, to), clamped
// to the backend's, whose parts hold about partBytes bytes each (whole key
// groups; a larger group makes a larger part). Close releases it if it is
// not stepped to the end.
func (b *Backend) NewGroupSnapshot(from, to, partBytes int) *GroupSnapshot {
	from, to = max(from, b.kgStart), min(to, b.kgEnd)
	return &GroupSnapshot{b: b, next: from, end: max(from, to), partFrom: from,
		partBytes: max(partBytes, 1), chunk: SnapshotChunk}
}

// Next returns the first key group not yet entirely serialized.
func (s *GroupSnapshot) Next() int { return s.next }

// Done reports whether every key group was serialized and returned in a
// part.
func (s *GroupSnapshot) Done() bool { return s.next >= s.end && s.partFrom >= s.end }

// Close stops a snapshot that is not done; it does nothing to one that is.
func (s *GroupSnapshot) Close() {
	if s.stop != nil {
		s.stop()
		s.pull, s.stop = nil, nil
	}
	s.data, s.segs = nil, nil
}

// Step serializes at least budget bytes of entries, if that many are left
// (in whole chunks of SnapshotChunk and whole key groups' ends: at most
// budget plus a chunk and an entry), and returns the part those groups
// completed, if one is complete: at about partBytes, or at the last group.
// It returns nil, nil when the step ended inside a part. After an error
// the snapshot is unusable.
func (s *GroupSnapshot) Step(budget int) (*SnapshotPart, error) {
	if s.b.store != nil {
		s.err = errStoreGroupSnapshot
	}
	if s.err != nil {
		return nil, s.err
	}
	written := 0
	for s.next < s.end {
		if written >= budget && budget > 0 {
			return nil, nil
		}
		if s.state == len(s.b.states) {
			s.b.groupBytes[s.next-s.b.kgStart] = s.groupSize
			s.state, s.groupSize = 0, 0
			s.next++
			if s.size >= s.partBytes || s.next == s.end {
				return s.cut(), nil
			}
			continue
		}
		n, done, err := s.walk()
		written += n
		if err != nil {
			s.err = err
			s.Close()
			return nil, err
		}
		if done {
			s.state++
		}
	}
	if s.partFrom < s.end {
		return s.cut(), nil // no groups: an empty range still makes one part
	}
	return nil, nil
}

// walk continues (or starts) serializing state s.state of group s.next
// for one chunk; done means the pair is finished and its segments added.
func (s *GroupSnapshot) walk() (n int, done bool, err error) {
	st := s.b.states[s.state]
	if s.pull == nil {
		s.w = entryWriter{limit: s.chunk}
		s.data = s.data[:0]
		if st.groupEntries(s.next) == 0 {
			return 0, true, nil
		}
		s.pull, s.stop = iter.Pull(st.groupWalk(s.next, &s.w))
	}
	// A chunk's room: the group's size at its last snapshot (all its
	// states), with some slack, up to a chunk; a small group does not
	// take a whole chunk's buffer per state.
	est := s.b.GroupBytes(s.next)
	room := min(max(est+est/8, minChunkRoom), s.chunk+s.chunk/8)
	if room == fullChunkRoom {
		s.w.dst = *fullChunks.Get(room)
	} else {
		s.w.dst = make([]byte, 0, room)
	}
	_, more := s.pull()
	if s.w.err != nil {
		return 0, false, fmt.Errorf("state %q: %w", st.stateName(), s.w.err)
	}
	n = len(s.w.dst)
	if n > 0 {
		s.data = append(s.data, s.w.dst)
	}
	s.w.dst = nil
	if more {
		return n, false, nil
	}
	s.stop()
	s.pull, s.stop = nil, nil
	if s.w.n > 0 {
		err = s.addGroup(s.next, s.state, s.w.n, s.data)
	}
	s.data = nil
	return n, true, err
}

// addGroup appends the groupData message of (kg, state), whose count
// entries are chunks, to the pending part, and counts its bytes for the
// group's size (Backend.GroupBytes).
func (s *GroupSnapshot) addGroup(kg, state, count int, chunks [][]byte) error {
	dataLen := 0
	for _, c := range chunks {
		dataLen += len(c)
	}
	head, err := appendGroupHead(nil, &s.gh, kg, state, count, dataLen)
	if err != nil {
		return err
	}
	s.segs = append(s.segs, head)
	s.segs = append(s.segs, chunks...)
	s.size += len(head) + dataLen
	s.groupSize += dataLen
	return nil
}

// cut ends the pending part at s.next.
func (s *GroupSnapshot) cut() *SnapshotPart {
	p := &SnapshotPart{From: s.partFrom, To: s.next, segs: s.segs, size: s.size}
	if err := p.setHeader(s.b); err != nil {
		s.err = err
		return nil
	}
	s.partFrom, s.segs, s.size = s.next, nil, 0
	return p
}

// SnapshotPart is one part of a GroupSnapshot: the key groups [From, To)
// in the format of SnapshotGroups, held as the buffers the steps wrote.
type SnapshotPart struct {
	From, To int
	header   []byte
	segs     [][]byte
	size     int
}

func (p *SnapshotPart) setHeader(b *Backend) error {
	h, err := b.snapshotHeader()
	if err != nil {
		return err
	}
	p.header, err = serde.MustFor[snapshotHeader]().Append([]byte(snapshotMagic), &h)
	return err
}

// Size returns the part's length in bytes.
func (p *SnapshotPart) Size() int { return len(p.header) + p.size }

// Bytes returns the part as one new buffer; see AppendTo.
func (p *SnapshotPart) Bytes() []byte {
	return p.AppendTo(make([]byte, 0, p.Size()))
}

// AppendTo appends the part to dst and returns the extended buffer. It
// copies the steps' buffers (and recycles them for later steps), which is
// why it may run in another goroutine, such as the part's upload; it may
// be called once.
func (p *SnapshotPart) AppendTo(dst []byte) []byte {
	dst = append(dst, p.header...)
	for _, s := range p.segs {
		dst = append(dst, s...)
		if cap(s) == fullChunkRoom {
			fullChunks.Put(&s)
		}
	}
	p.segs = nil
	return dst
}

// groupWalk is table's walk of key group kg for GroupSnapshot: it appends
// the group's entries to w.dst and pauses (yields) whenever w.dst holds
// w.limit bytes. The maps are the ones the group had at the start: a map
// of long keys rebuilt meanwhile (compactKeys) keeps its old keys, whose
// blocks stay alive, and shares its entries with the new one; a map made
// meanwhile (keyMap makes them on first insert) is not walked, its
// entries being in the log. With SetDeterministic
// the group is written whole, in key order.
func (t *table[E]) groupWalk(kg int, w *entryWriter) iter.Seq[struct{}] {
	m := t.groups[kg-t.b.kgStart]
	return func(yield func(struct{}) bool) {
		if t.b.deterministic {
			var n int
			w.dst, n, w.err = t.appendGroup(w.dst, kg)
			w.n += n
			return
		}
		for k, e := range m.all {
			var err error
			if w.dst, err = t.appendEntry(w.dst, k, e); err != nil {
				w.err = err
				return
			}
			w.n++
			if len(w.dst) >= w.limit && !yield(struct{}{}) {
				return
			}
		}
	}
}
