package timers

import (
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/eddyflow/eddy/state"
)

// Service holds the timers of one keyed subtask in one time domain:
// per key in a list state (so they are checkpointed and rescaled with the
// key), and in a min-heap across keys for firing.
type Service struct {
	backend *state.Backend
	st      *state.List[int64]
	queue   []timerEntry
	keys    map[string]string // interned keys of the keys with timers, so queue entries share them
	// short says keys of up to maxShortKey bytes are held in their queue
	// entries, not interned (HoldShortKeys); buf holds the last one
	// FireDue unpacked (bufKey, packed).
	short  bool
	buf    [8]byte
	bufKey uint64
	// live is the number of timers in state; queue entries beyond it are
	// deleted timers, skipped when popped, or removed by compact once they
	// outnumber the live ones.
	live int
}

// New returns the timer service of backend b, keeping its timers in a list
// state named name.
func New(b *state.Backend, name string) (*Service, error) {
	st, err := state.NewList[int64](b, name)
	if err != nil {
		return nil, err
	}
	return &Service{backend: b, st: st, keys: map[string]string{}}, nil
}

type timerEntry struct {
	at    int64
	short uint64 // the key packed (packKey) if held in the entry, else 0
	key   string // else the interned key
	kg    int
}

// HoldShortKeys makes the service hold keys of up to 7 bytes (integer keys
// below 2^42 as the runtime serializes them) in their queue entries instead
// of interning them: a registration costs no lookup in the map of interned
// keys, and a firing reads no key bytes elsewhere in memory. The key bytes
// FireDue passes are then valid during the fire call only: for a caller
// whose fire callback keeps nothing of them (one that decodes an integer).
// Call it before any timer is registered or rebuilt.
func (t *Service) HoldShortKeys() { t.short = true }

// maxShortKey is the longest key HoldShortKeys keeps in an entry: 7 bytes
// and a length byte in a uint64.
const maxShortKey = 7

// packKey returns kb, at most maxShortKey bytes, as a uint64: its bytes
// from bit 8 up and, in the low byte, its length with bit 7 set, so that
// no key packs to 0 (an entry without a short key).
func packKey(kb []byte) uint64 {
	var b [8]byte
	copy(b[:], kb)
	return binary.LittleEndian.Uint64(b[:])<<8 | 0x80 | uint64(len(kb))
}

// entry returns the queue entry of a timer of kb at at.
func (t *Service) entry(kb []byte, kg int, at int64) timerEntry {
	if t.short && len(kb) <= maxShortKey {
		return timerEntry{at: at, short: packKey(kb), kg: kg}
	}
	return timerEntry{at: at, key: t.intern(kb), kg: kg}
}

// setKey makes e's key the backend's current key and returns its bytes,
// valid until the next setKey of another short key. A short key is
// unpacked into buf; the backend's cached entries are dropped when buf
// changes, since EnsureKey would take the same slice holding another key
// for the same key.
func (t *Service) setKey(e *timerEntry) []byte {
	if e.short == 0 {
		kb := keyBytes(e.key)
		t.backend.EnsureKey(kb, e.kg)
		return kb
	}
	kb := t.buf[:e.short&0x7f]
	if e.short != t.bufKey {
		binary.LittleEndian.PutUint64(t.buf[:], e.short>>8)
		t.bufKey = e.short
		t.backend.SetCurrentKey(kb, e.kg)
		return kb
	}
	t.backend.EnsureKey(kb, e.kg)
	return kb
}

// intern returns a string equal to kb that the service keeps.
func (t *Service) intern(kb []byte) string {
	if k, ok := t.keys[string(kb)]; ok {
		return k
	}
	if len(t.keys) >= 2*len(t.queue)+minInterned {
		t.sweep()
	}
	k := string(kb)
	t.keys[k] = k
	return k
}

// minInterned is how many interned keys the service keeps before it
// sweeps out those without timers.
const minInterned = 1024

// sweep forgets the interned keys that no queued timer uses: without it,
// the map would keep every key that ever had a timer (a job keyed by
// auction or session grows without bound). It runs when the map has grown
// to twice the queue, so its cost is constant per interned key, and keys
// with timers pending keep their copy.
func (t *Service) sweep() {
	live := make(map[string]string, 2*len(t.queue))
	for _, e := range t.queue {
		if e.short == 0 {
			live[e.key] = e.key
		}
	}
	t.keys = live
}

// keyBytes views an interned key as bytes without copying; nobody writes
// to them.
func keyBytes(k string) []byte { return unsafe.Slice(unsafe.StringData(k), len(k)) }

// Register adds a timer for key at (nanoseconds), once per (key, time).
func (t *Service) Register(kb []byte, kg int, at int64) {
	t.backend.EnsureKey(kb, kg)
	if slices.Contains(t.st.Get(), at) {
		return
	}
	t.st.Add(at)
	t.live++
	t.push(t.entry(kb, kg, at))
}

// Delete removes key's timer at (nanoseconds); the queue entry is skipped
// when it comes up.
func (t *Service) Delete(kb []byte, kg int, at int64) {
	t.backend.EnsureKey(kb, kg)
	xs := t.st.Get()
	if i := slices.Index(xs, at); i >= 0 {
		t.st.Update(slices.Delete(xs, i, i+1))
		t.live--
	}
}

// Rebuild fills the queue from restored state.
func (t *Service) Rebuild() {
	t.queue = t.queue[:0]
	t.live = 0
	t.st.Range(func(key []byte, kg int, xs []int64) bool {
		e := t.entry(key, kg, 0)
		for _, at := range xs {
			e.at = at
			t.push(e)
		}
		t.live += len(xs)
		return true
	})
}

// Next returns the earliest timer time, or 0 when there is none.
func (t *Service) Next() int64 {
	if len(t.queue) == 0 {
		return 0
	}
	return t.queue[0].at
}

// FireDue calls fire for every timer at or before now, removing it from
// state first. With HoldShortKeys, the key bytes fire gets are valid
// during the call only.
//
// FireDue moves the backend's current key.
func (t *Service) FireDue(now int64, fire func(kb []byte, kg int, at int64) error) error {
	if len(t.queue) > 2*t.live+minCompact {
		t.compact()
	}
	for len(t.queue) > 0 && t.queue[0].at <= now {
		e := t.pop()
		kb := t.setKey(&e)
		xs := t.st.Get()
		i := slices.Index(xs, e.at)
		if i < 0 {
			continue // deleted
		}
		t.st.Update(slices.Delete(xs, i, i+1))
		t.live--
		if err := fire(kb, e.kg, e.at); err != nil {
			return err
		}
	}
	return nil
}

// push and pop keep queue a 4-ary min-heap by time, without the boxing of
// container/heap: half the levels of a binary heap, and a node's children
// share a cache line or two, so a pop misses the cache about half as often
// on a queue of millions of timers.
func (t *Service) push(e timerEntry) {
	q := append(t.queue, e)
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 4
		if q[p].at <= e.at {
			break
		}
		q[i] = q[p]
		i = p
	}
	q[i] = e
	t.queue = q
}

func (t *Service) pop() timerEntry {
	q := t.queue
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = timerEntry{}
	t.queue = q[:last]
	t.down(0)
	return top
}

// down moves entry i of the queue down to its place in the heap.
func (t *Service) down(i int) {
	q := t.queue
	n := len(q)
	if i >= n {
		return
	}
	e := q[i]
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < c+4 && j < n; j++ {
			if q[j].at < q[m].at {
				m = j
			}
		}
		if q[m].at >= e.at {
			break
		}
		q[i] = q[m]
		i = m
	}
	q[i] = e
}

// minCompact is how many deleted timers the queue holds at least before
// compact removes them.
const minCompact = 1024

// compact drops the queue entries of deleted timers and restores the heap.
// A job that deletes most timers it sets (session windows move a key's
// timer with every record) would otherwise keep a queue many times the
// number of timers, whose entries all cost a pop and a state lookup;
// compacting when they outnumber the live ones costs a lookup per entry,
// paid for by the deletions since the last compaction. It moves the
// backend's current key.
func (t *Service) compact() {
	q := t.queue[:0]
	for _, e := range t.queue {
		t.setKey(&e)
		if slices.Contains(t.st.Get(), e.at) {
			q = append(q, e)
		}
	}
	clear(t.queue[len(q):])
	t.queue = q
	for i := (len(q) - 2) / 4; i >= 0; i-- {
		t.down(i)
	}
}
