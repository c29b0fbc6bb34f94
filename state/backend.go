package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/eddyflow/eddy/internal/cacheline"
	"github.com/eddyflow/eddy/serde"
)

// Backend holds the keyed state of one operator subtask as Go values (the
// heap backend). The runtime sets the current key before each record; the
// state objects declared on it read and write the entry of that key.
type Backend struct {
	_              cacheline.Pad // the current key is set per record (package cacheline)
	maxPar         int
	kgStart, kgEnd int
	keySchema      serde.Schema
	key            []byte
	kg             int
	states         []keyedState
	byName         map[string]keyedState
	byID           map[uint32]keyedState
	watermark      int64
	hasWatermark   bool
	changes        ChangeLog // where writes also go, if set (the changelog backend)
	gen            uint64    // bumped whenever cached entries may be stale; never 0
	groupBytes     []int     // bytes of each key group in its last snapshot or restore
	entryBytes     []float64 // by state: bytes per entry in the last snapshot that wrote any (0: none yet)
	snapBytes      []int     // by state: bytes of the snapshot being written
	snapCount      []int     // by state: entries of the snapshot being written
	snapScratch    []byte    // one group's entries while snapshotting
	deterministic  bool      // snapshots sort entries by key
	scratch        []byte    // encoded values for the change log
	subScratch     []byte    // encoded element keys for the change log
	elemScratch    []byte    // element sub-keys of the store (elemSub)
	err            error     // the first change-log failure

	eventTime  int64        // the operator's watermark, for event-time TTL
	recordTime int64        // the current record's event time, for event-time TTL
	clock      func() int64 // the wall clock of processing-time TTL, if not time.Now
	ttlStates  []cleaner    // states with a TTL, for CleanupExpired

	store      Store      // where the state lives, if not in the heap (store.go)
	cacheBytes int64      // memory the decoded values may take across batches
	stale      bool       // the store has writes a Load would not see yet
	applyMu    sync.Mutex // serializes ApplyChange into the store
	applied    int        // bytes ApplyChange wrote to the store since its last commit; under applyMu
	_          cacheline.Pad
}

// replayCommitBytes is how many bytes of replayed changes a store-backed
// backend writes before it commits them: a restore replays a log of any
// length, and one pending batch of all of it would hold the whole log in
// memory and hand the store one huge write at the end.
const replayCommitBytes = 4 << 20

// ChangeLog receives every state write of a backend: the key group, the
// state's id (StateID of its name), what the write did, the serialized key,
// and, for element changes, the serialized element key (a map key, or a
// list index as an unsigned varint), and the serialized new value (the
// whole value for ChangePut, the element's for ChangePutElem).
type ChangeLog func(kg, state uint32, op ChangeOp, key, sub, value []byte) error

// ChangeOp is what a logged change does. The values are those of dstl.Op.
// Every operation sets or removes something, so re-applying a change that a
// snapshot already holds leaves the state as it was.
type ChangeOp uint8

// The change operations.
const (
	ChangePut        ChangeOp = 0 // the key's whole value is replaced (Value, Reducing, List.Update)
	ChangeDelete     ChangeOp = 1 // the key's value is removed (Clear, or a collection left empty)
	ChangePutElem    ChangeOp = 2 // one element is set (Map.Put, List.Add)
	ChangeDeleteElem ChangeOp = 3 // one element is removed (Map.Delete)
)

// SetDeterministic makes snapshots of equal state equal bytes by sorting
// entries by key, at a cost the runtime does not pay (tests and tools do).
func (b *Backend) SetDeterministic(on bool) { b.deterministic = on }

// SetChangeLog sends every later state write to log as well. The changelog
// state backend uses it to write each change twice: to the state and to the
// durable short-term log.
func (b *Backend) SetChangeLog(log ChangeLog) { b.changes = log }

func (b *Backend) logChange(id uint32, op ChangeOp, sub, value []byte) {
	if err := b.changes(uint32(b.kg), id, op, b.key, sub, value); err != nil {
		b.fail(err)
	}
}

func (b *Backend) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Err returns the first failure to log a change, which fails the job: the
// state and its log no longer agree.
func (b *Backend) Err() error { return b.err }

// StateID is the id of a state in change logs: a stable hash of its name.
func StateID(name string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= 16777619
	}
	return h
}

// ApplyChange replays one logged change into the state it belongs to.
// Changes of different key groups may be applied concurrently; changes of
// one key group must come in log order. Changes of states that are no
// longer declared are skipped.
func (b *Backend) ApplyChange(kg, state uint32, op ChangeOp, key, sub, value []byte) error {
	if int(kg) < b.kgStart || int(kg) >= b.kgEnd {
		return nil
	}
	s, ok := b.byID[state]
	if !ok {
		return nil
	}
	// No b.gen++ here: replay runs concurrently per key group before any
	// record, when no entry is cached (Restore already invalidated them).
	var err error
	if b.store != nil {
		b.applyMu.Lock()
		err = s.storeApply(int(kg), op, key, sub, value)
		if b.applied += len(key) + len(sub) + len(value); err == nil && b.applied >= replayCommitBytes {
			b.applied = 0
			if cerr := b.store.Commit(); cerr != nil {
				b.applyMu.Unlock()
				return &StoreError{Op: "commit", Err: cerr}
			}
		}
		b.applyMu.Unlock()
	} else {
		err = s.apply(int(kg), op, key, sub, value)
	}
	if err != nil {
		return &RestoreError{State: s.stateName(), Reason: fmt.Sprintf("replaying a logged change of key group %d: %v", kg, err)}
	}
	return nil
}

// SetWatermark records the operator's event-time watermark; snapshots keep
// it so a restored operator does not move its watermark backwards.
func (b *Backend) SetWatermark(wm int64) { b.watermark, b.hasWatermark = wm, true }

// Watermark returns the watermark restored with the state (the smallest of
// the restored parts), if any.
func (b *Backend) Watermark() (int64, bool) { return b.watermark, b.hasWatermark }

// keyedState is what every state type implements for snapshots.
type keyedState interface {
	stateName() string
	kind() string
	valueSchema() serde.Schema
	// appendGroup appends the entries of key group kg as (key, value) pairs
	// and returns how many it wrote.
	appendGroup(dst []byte, kg int) ([]byte, int, error)
	// groupEntries returns the number of entries of key group kg.
	groupEntries(kg int) int
	// groupWalk walks key group kg for a GroupSnapshot.
	groupWalk(kg int, w *entryWriter) iter.Seq[struct{}]
	// load adds one entry of key group kg.
	load(kg int, key, val []byte) error
	// apply replays one logged change of key group kg.
	apply(kg int, op ChangeOp, key, sub, val []byte) error
	entries() int

	// Of a store-backed backend (store.go):
	flush() error
	cacheBytes() int64
	evictNext() int64
	evict()
	evictGroup(g int)
	loadGroup(kg int) error
	storeApply(kg int, op ChangeOp, key, sub, val []byte) error
}

// NewBackend returns an empty backend for the key groups [kgStart, kgEnd) of
// maxParallelism, whose keys have keySchema.
func NewBackend(maxParallelism, kgStart, kgEnd int, keySchema serde.Schema) *Backend {
	return &Backend{eventTime: math.MinInt64, recordTime: math.MinInt64, maxPar: maxParallelism, kgStart: kgStart, kgEnd: kgEnd, keySchema: keySchema,
		kg: kgStart, byName: map[string]keyedState{}, byID: map[uint32]keyedState{}, gen: 1,
		groupBytes: make([]int, kgEnd-kgStart)}
}

// GroupBytes returns the bytes key group kg's entries took in the last
// snapshot or restore that covered it (0 if none did): an estimate of what
// snapshotting it costs.
func (b *Backend) GroupBytes(kg int) int {
	if kg < b.kgStart || kg >= b.kgEnd {
		return 0
	}
	return b.groupBytes[kg-b.kgStart]
}

// KeyGroups returns the key groups [start, end) the backend owns.
func (b *Backend) KeyGroups() (start, end int) { return b.kgStart, b.kgEnd }

// MaxParallelism returns the number of key groups of the job.
func (b *Backend) MaxParallelism() int { return b.maxPar }

// SetCurrentKey scopes every state of the backend to key, of key group kg.
// The backend keeps the slice until the next call; the caller must not
// modify it meanwhile.
func (b *Backend) SetCurrentKey(key []byte, kg int) {
	b.key, b.kg = key, kg
	b.gen++
}

// EnsureKey is SetCurrentKey for a caller that may pass the current key
// again (timers registered while a record or timer has its key current):
// the very slice that is current — same memory, same length — in the same
// key group keeps the states' cached entries. Any other slice sets the key,
// also one holding the same bytes: only the identical slice is known to
// still hold the key it held when it was set (a recycled buffer may hold
// another one by now).
func (b *Backend) EnsureKey(key []byte, kg int) {
	if kg == b.kg && len(key) == len(b.key) && (len(key) == 0 || &key[0] == &b.key[0]) {
		return
	}
	b.SetCurrentKey(key, kg)
}

// DropCached drops the states' cached entries of the current key, which
// stays current: the next access of each state looks its entry up. A
// caller that passes EnsureKey slices of a buffer it recycles calls it
// before each reuse, so that a slice at the same place holding another key
// cannot find the entries cached for the old one.
func (b *Backend) DropCached() { b.gen++ }

// CurrentKey returns the serialized current key.
func (b *Backend) CurrentKey() []byte { return b.key }

// group returns the index of the current key group in per-group tables.
func (b *Backend) group() int { return b.kg - b.kgStart }

// Entries returns the number of (state, key) entries held.
func (b *Backend) Entries() int {
	n := 0
	for _, s := range b.states {
		n += s.entries()
	}
	return n
}

func (b *Backend) register(s keyedState) error {
	name := s.stateName()
	if name == "" {
		return &DeclareError{Err: errors.New("a state needs a name")}
	}
	if _, dup := b.byName[name]; dup {
		return &DeclareError{State: name, Err: errors.New("declared twice")}
	}
	if other, clash := b.byID[StateID(name)]; clash {
		return &DeclareError{State: name, Err: fmt.Errorf("its id collides with state %q; rename one", other.stateName())}
	}
	b.byName[name] = s
	b.byID[StateID(name)] = s
	b.states = append(b.states, s)
	return nil
}

// snapshotHeader is the serde-encoded body of a snapshot.
type snapshotHeader struct {
	MaxParallelism uint32      `proto:"1,name=max_parallelism"`
	KeySchema      []byte      `proto:"2,name=key_schema"`
	States         []stateMeta `proto:"3"`
	Groups         []groupData `proto:"4"`
	Watermark      *int64      `proto:"5"`
}

type stateMeta struct {
	Name        string `proto:"1"`
	Kind        string `proto:"2"`
	ValueSchema []byte `proto:"3,name=value_schema"`
}

type groupData struct {
	KeyGroup uint32 `proto:"1,name=key_group"`
	State    uint32 `proto:"2"`
	Count    uint32 `proto:"3"`
	Data     []byte `proto:"4"` // uvarint(len key) key uvarint(len value) value, Count times
}

const snapshotMagic = "EDSN\x01"

// Snapshot serializes every state of the backend, key group by key group,
// with the schemas of the key and value types.
func (b *Backend) Snapshot() ([]byte, error) { return b.SnapshotGroups(b.kgStart, b.kgEnd) }

// AppendSnapshot is Snapshot appending to dst, so that a caller can reuse
// the buffer of an earlier snapshot once it is done with it.
func (b *Backend) AppendSnapshot(dst []byte) ([]byte, error) {
	return b.appendSnapshotGroups(dst, b.kgStart, b.kgEnd)
}

// snapshotHeader returns the header of a snapshot of b without groups:
// the key and value schemas and the watermark.
func (b *Backend) snapshotHeader() (snapshotHeader, error) {
	ks, err := b.keySchema.MarshalBinary()
	if err != nil {
		return snapshotHeader{}, err
	}
	h := snapshotHeader{MaxParallelism: uint32(b.maxPar), KeySchema: ks}
	if b.hasWatermark {
		wm := b.watermark
		h.Watermark = &wm
	}
	for _, s := range b.states {
		vs, err := s.valueSchema().MarshalBinary()
		if err != nil {
			return snapshotHeader{}, fmt.Errorf("state %q: %w", s.stateName(), err)
		}
		h.States = append(h.States, stateMeta{Name: s.stateName(), Kind: s.kind(), ValueSchema: vs})
	}
	return h, nil
}

// SnapshotGroups is Snapshot for the key groups [from, to) only. The
// changelog backend materializes state a few key groups at a time between
// records, so it never stalls processing for long; Restore accepts any set of
// such parts.
func (b *Backend) SnapshotGroups(from, to int) ([]byte, error) {
	return b.appendSnapshotGroups(nil, from, to)
}

// appendSnapshotGroups appends SnapshotGroups(from, to) to dst.
func (b *Backend) appendSnapshotGroups(dst []byte, from, to int) ([]byte, error) {
	from, to = max(from, b.kgStart), min(to, b.kgEnd)
	if b.store != nil {
		if err := b.flushAndEvict(); err != nil {
			return nil, err
		}
	}
	h, err := b.snapshotHeader()
	if err != nil {
		return nil, err
	}
	// The header's fields first, then each group as it is written: a
	// group's entries go to a reused scratch buffer and are copied once
	// into out, which is presized from the last snapshot of these groups.
	// (Field order does not matter to protobuf readers.)
	est := len(snapshotMagic) + 256 + b.snapshotEstimate(from, to)
	out := slices.Grow(dst, est)
	out = append(out, snapshotMagic...)
	if out, err = serde.MustFor[snapshotHeader]().Append(out, &h); err != nil {
		return nil, err
	}
	var gh []byte
	if len(b.entryBytes) != len(b.states) {
		b.entryBytes = make([]float64, len(b.states))
		b.snapBytes, b.snapCount = make([]int, len(b.states)), make([]int, len(b.states))
	}
	clear(b.snapBytes)
	clear(b.snapCount)
	for kg := from; kg < to; kg++ {
		size := 0
		for si, s := range b.states {
			var n int
			if b.snapScratch, n, err = s.appendGroup(b.snapScratch[:0], kg); err != nil {
				return nil, fmt.Errorf("state %q: %w", s.stateName(), err)
			}
			if n == 0 {
				continue
			}
			data := b.snapScratch
			size += len(data)
			b.snapBytes[si] += len(data)
			b.snapCount[si] += n
			if need := len(data) + maxGroupHead; cap(out)-len(out) < need {
				// Doubling: append grows a large slice by a quarter,
				// each step a fresh allocation that copies all of it.
				out = slices.Grow(out, max(need, cap(out)))
			}
			if out, err = appendGroupHead(out, &gh, kg, si, n, len(data)); err != nil {
				return nil, err
			}
			out = append(out, data...)
		}
		b.groupBytes[kg-b.kgStart] = size
	}
	for si, n := range b.snapCount {
		if n > 0 {
			b.entryBytes[si] = float64(b.snapBytes[si]) / float64(n)
		}
	}
	if cap(b.snapScratch) > 64<<20 {
		b.snapScratch = nil // do not hold a huge group's buffer for good
	}
	return out, nil
}

// snapshotEstimate returns the bytes the entries of key groups [from, to)
// are expected to take in a snapshot. A heap backend estimates each
// state's entries now at its bytes per entry in the last snapshot: state
// that grows between checkpoints (a join's keys, kept for good) would
// otherwise outgrow the buffer of every snapshot, and each growth is a
// fresh allocation, whose page faults cost more than the copy. Otherwise,
// or for a state with entries now and none in any snapshot yet, each
// group's bytes in its last snapshot or restore. Both with a sixteenth
// more.
func (b *Backend) snapshotEstimate(from, to int) int {
	est := 0
	if b.store == nil && len(b.entryBytes) == len(b.states) {
		for si, s := range b.states {
			n := 0
			for kg := from; kg < to; kg++ {
				n += s.groupEntries(kg)
			}
			if n > 0 && b.entryBytes[si] == 0 {
				est = -1
				break
			}
			est += int(float64(n)*b.entryBytes[si]) + (to-from)*maxGroupHead
		}
	}
	if est < 0 || b.store != nil || len(b.entryBytes) != len(b.states) {
		est = 0
		for kg := from; kg < to; kg++ {
			est += b.groupBytes[kg-b.kgStart]
		}
	}
	return est + est/16
}

// maxGroupHead bounds what appendGroupHead writes: two tags and two
// lengths, and a groupData of three varints of 32 bits with their tags.
const maxGroupHead = 2*(1+binary.MaxVarintLen32) + 3*(1+binary.MaxVarintLen32)

// appendGroupHead appends one element of snapshotHeader.Groups up to the
// bytes of its Data: the element's tag and length, groupData{KeyGroup,
// State, Count} (encoded in *scratch, reused), and the tag and length of
// Data, whose dataLen bytes the caller appends. Snapshots write groups by
// hand so that Data is never copied into a message first.
func appendGroupHead(dst []byte, scratch *[]byte, kg, state, count, dataLen int) ([]byte, error) {
	gh, err := serde.MustFor[groupData]().Append((*scratch)[:0], &groupData{KeyGroup: uint32(kg), State: uint32(state), Count: uint32(count)})
	if err != nil {
		return dst, err
	}
	*scratch = gh
	msg := len(gh) + protowire.SizeTag(groupDataField) + protowire.SizeBytes(dataLen)
	dst = protowire.AppendTag(dst, groupsField, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(msg))
	dst = append(dst, gh...)
	dst = protowire.AppendTag(dst, groupDataField, protowire.BytesType)
	return protowire.AppendVarint(dst, uint64(dataLen)), nil
}

// The field numbers of snapshotHeader.Groups and groupData.Data, which
// snapshots write and read by hand.
const (
	groupsField    protowire.Number = 4
	groupDataField protowire.Number = 4
)

// RestoreError reports a snapshot that cannot be restored.
type RestoreError struct {
	State  string // the state's name, or "" for the snapshot as a whole
	Reason string
}

func (e *RestoreError) Error() string {
	if e.State == "" {
		return "state: restore: " + e.Reason
	}
	return fmt.Sprintf("state: restore of state %q: %s", e.State, e.Reason)
}

// Restore loads the key groups this backend owns from snapshot parts, which
// may come from a different parallelism. It first decodes every part and
// checks the schemas of all states against the declared ones; only when
// everything is compatible does it load entries. States in the snapshot that
// are no longer declared are skipped.
func (b *Backend) Restore(parts [][]byte) error { return b.RestoreRanged(parts, nil) }

// RestoreRanged is Restore where part i is authoritative only for the key
// groups ranges[i] = [start, end): entries of other key groups in it are
// skipped. A nil ranges trusts every part for all its key groups.
func (b *Backend) RestoreRanged(parts [][]byte, ranges [][2]int) error {
	headers := make([]snapshotHeader, len(parts))
	for i, p := range parts {
		if err := b.checkPart(p, &headers[i]); err != nil {
			err.Reason = fmt.Sprintf("part %d: %s", i, err.Reason)
			return err
		}
	}
	if err := b.restoreStart(); err != nil {
		return &RestoreError{Reason: err.Error()}
	}
	for i := range headers {
		from, to := b.kgStart, b.kgEnd
		if ranges != nil {
			from, to = ranges[i][0], ranges[i][1]
		}
		if err := b.loadPart(&headers[i], from, to); err != nil {
			err.Reason = fmt.Sprintf("part %d: %s", i, err.Reason)
			return err
		}
	}
	return b.restoreEnd()
}

// restoreStart prepares a restore: cached entries are stale from now on,
// and a store-backed backend drops them (the restore writes to its store).
func (b *Backend) restoreStart() error {
	b.gen++
	if b.store != nil {
		return b.flushAndEvict()
	}
	return nil
}

// restoreEnd commits what a restore wrote to the store.
func (b *Backend) restoreEnd() error {
	if b.store == nil {
		return nil
	}
	if err := b.Flush(); err != nil {
		return &RestoreError{Reason: err.Error()}
	}
	return nil
}

// RestorePart checks one snapshot part and loads its entries of the key
// groups in [start, end) that this backend owns. Unlike Restore it loads
// parts one at a time, as a caller fetches them: a RestorePart that fails
// after an earlier one succeeded leaves part of the state loaded, and the
// caller must discard the backend. The backend keeps no reference to part,
// so its buffer may be reused once RestorePart returns.
func (b *Backend) RestorePart(part []byte, start, end int) error {
	var h snapshotHeader
	if err := b.checkPart(part, &h); err != nil {
		return err
	}
	if err := b.restoreStart(); err != nil {
		return &RestoreError{Reason: err.Error()}
	}
	if err := b.loadPart(&h, start, end); err != nil {
		return err
	}
	return b.restoreEnd()
}

// checkPart decodes the snapshot part p into h and checks its key
// parallelism and schemas against the declared states.
func (b *Backend) checkPart(p []byte, h *snapshotHeader) *RestoreError {
	if len(p) >= len(headerMagic) && string(p[:len(headerMagic)]) == headerMagic {
		return &RestoreError{Reason: "a state header of a Pebble checkpoint, whose entries are in the checkpoint's files, not a state snapshot"}
	}
	if len(p) < len(snapshotMagic) || string(p[:len(snapshotMagic)]) != snapshotMagic {
		return &RestoreError{Reason: "not a state snapshot (bad magic)"}
	}
	if err := decodeSnapshot(p[len(snapshotMagic):], h); err != nil {
		return &RestoreError{Reason: err.Error()}
	}
	return b.checkHeader(h)
}

// checkHeader checks a decoded snapshot header's key parallelism and
// schemas against the declared states.
func (b *Backend) checkHeader(h *snapshotHeader) *RestoreError {
	if int(h.MaxParallelism) != b.maxPar {
		return &RestoreError{Reason: fmt.Sprintf("the snapshot has %d key groups (max parallelism) but the job has %d; key groups cannot be remapped", h.MaxParallelism, b.maxPar)}
	}
	var oldKey serde.Schema
	if err := oldKey.UnmarshalBinary(h.KeySchema); err != nil {
		return &RestoreError{Reason: "key schema: " + err.Error()}
	}
	if c := serde.CheckKey(oldKey, b.keySchema); c.Verdict == serde.Incompatible {
		return &RestoreError{Reason: "the key type changed incompatibly:\n" + c.Err().Error()}
	}
	for _, m := range h.States {
		s, ok := b.byName[m.Name]
		if !ok {
			continue
		}
		if m.Kind != s.kind() {
			return &RestoreError{State: m.Name, Reason: fmt.Sprintf("stored as %s state, declared as %s state", m.Kind, s.kind())}
		}
		var old serde.Schema
		if err := old.UnmarshalBinary(m.ValueSchema); err != nil {
			return &RestoreError{State: m.Name, Reason: "value schema: " + err.Error()}
		}
		if c := serde.Check(old, s.valueSchema()); c.Verdict == serde.Incompatible {
			return &RestoreError{State: m.Name, Reason: "the value type changed incompatibly:\n" + c.Err().Error()}
		}
	}
	return nil
}

// loadPart loads the entries of the checked part h in key groups [from, to)
// that this backend owns.
func (b *Backend) loadPart(h *snapshotHeader, from, to int) *RestoreError {
	if h.Watermark != nil && (!b.hasWatermark || *h.Watermark < b.watermark) {
		b.watermark, b.hasWatermark = *h.Watermark, true
	}
	for _, g := range h.Groups {
		kg := int(g.KeyGroup)
		if kg < b.kgStart || kg >= b.kgEnd || kg < from || kg >= to {
			continue
		}
		if int(g.State) >= len(h.States) {
			return &RestoreError{Reason: fmt.Sprintf("key group %d refers to state %d of %d", kg, g.State, len(h.States))}
		}
		name := h.States[g.State].Name
		s, ok := b.byName[name]
		if !ok {
			continue
		}
		if err := loadEntries(s, kg, g.Data, int(g.Count)); err != nil {
			return &RestoreError{State: name, Reason: fmt.Sprintf("key group %d: %v", kg, err)}
		}
		b.groupBytes[kg-b.kgStart] += len(g.Data)
	}
	return nil
}

// decodeSnapshot decodes a snapshot body into h. The groups' Data alias
// body instead of being copied (they are most of a snapshot's bytes): the
// groups are parsed here, the small rest by serde.
func decodeSnapshot(body []byte, h *snapshotHeader) error {
	var rest []byte
	var groups []groupData
	for off := 0; off < len(body); {
		num, typ, n := protowire.ConsumeTag(body[off:])
		if n < 0 {
			return fmt.Errorf("field key at byte %d: %v", off, protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, body[off+n:])
		if m < 0 {
			return fmt.Errorf("field %d at byte %d: %v", num, off, protowire.ParseError(m))
		}
		if num == groupsField && typ == protowire.BytesType {
			msg, _ := protowire.ConsumeBytes(body[off+n:]) // valid: ConsumeFieldValue read it
			g, err := decodeGroup(msg)
			if err != nil {
				return fmt.Errorf("group at byte %d: %w", off, err)
			}
			groups = append(groups, g)
		} else {
			rest = append(rest, body[off:off+n+m]...)
		}
		off += n + m
	}
	if err := serde.MustFor[snapshotHeader]().Decode(rest, h); err != nil {
		return err
	}
	h.Groups = groups
	return nil
}

// decodeGroup decodes a groupData message, its Data aliasing b.
func decodeGroup(b []byte) (groupData, error) {
	var g groupData
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return g, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num >= 1 && num <= 3 && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return g, fmt.Errorf("field %d: %v", num, protowire.ParseError(m))
			}
			if v > 1<<32-1 {
				return g, fmt.Errorf("field %d: %d does not fit 32 bits", num, v)
			}
			switch num {
			case 1:
				g.KeyGroup = uint32(v)
			case 2:
				g.State = uint32(v)
			case 3:
				g.Count = uint32(v)
			}
			b = b[m:]
		case num == groupDataField && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return g, fmt.Errorf("field %d: %v", num, protowire.ParseError(m))
			}
			g.Data = v[:len(v):len(v)]
			b = b[m:]
		case num <= groupDataField:
			return g, fmt.Errorf("field %d has wire type %d", num, typ)
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return g, fmt.Errorf("field %d: %v", num, protowire.ParseError(m))
			}
			b = b[m:]
		}
	}
	return g, nil
}

func loadEntries(s keyedState, kg int, data []byte, count int) error {
	for n := 0; n < count; n++ {
		k, rest, err := lenPrefixed(data)
		if err != nil {
			return fmt.Errorf("entry %d key: %w", n, err)
		}
		v, rest, err := lenPrefixed(rest)
		if err != nil {
			return fmt.Errorf("entry %d value: %w", n, err)
		}
		if err := s.load(kg, k, v); err != nil {
			return fmt.Errorf("entry %d: %w", n, err)
		}
		data = rest
	}
	if len(data) != 0 {
		return fmt.Errorf("%d bytes after the last entry", len(data))
	}
	return nil
}

func lenPrefixed(b []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, nil, errors.New("bad length prefix")
	}
	if n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("length %d runs past the data (%d bytes left)", n, len(b)-k)
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}
