package timers

import (
	"slices"
	"unsafe"

	"github.com/eddyflow/eddy/internal/cacheline"
	"github.com/eddyflow/eddy/internal/intern"
	"github.com/eddyflow/eddy/state"
)

// Service holds the timers of one keyed subtask in one time domain:
// per key in a list state (so they are checkpointed and rescaled with the
// key), and in a min-heap across keys for firing.
type Service struct {
	_       cacheline.Pad // registrations write it per record (package cacheline)
	backend *state.Backend
	st      *state.List[int64]
	queue   []timerEntry
	keys    intern.Table // the keys of queued timers, so queue entries share them
	// live is the number of timers in state; queue entries beyond it are
	// deleted timers, skipped when popped, or removed by compact once they
	// outnumber the live ones.
	live int
	_    cacheline.Pad
}

// New returns the timer service of backend b, keeping its timers in a list
// state named name.
func New(b *state.Backend, name string) (*Service, error) {
	st, err := state.NewList[int64](b, name)
	if err != nil {
		return nil, err
	}
	return &Service{backend: b, st: st}, nil
}

type timerEntry struct {
	at  int64
	key string
	kg  int
}

// intern returns a string equal to kb that the service keeps: the
// service's keys without queued timers are swept out as new ones come
// (without it, the table would keep every key that ever had a timer: a
// job keyed by auction or session grows without bound).
func (t *Service) intern(kb []byte) string {
	return t.keys.Intern(kb, len(t.queue), t.queuedKeys)
}

// queuedKeys yields the key of every queued timer.
func (t *Service) queuedKeys(yield func(string) bool) {
	for _, e := range t.queue {
		if !yield(e.key) {
			return
		}
	}
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
	t.push(timerEntry{at: at, key: t.intern(kb), kg: kg})
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
		k := t.intern(key)
		for _, at := range xs {
			t.push(timerEntry{at: at, key: k, kg: kg})
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
// state first.
//
// FireDue moves the backend's current key.
func (t *Service) FireDue(now int64, fire func(kb []byte, kg int, at int64) error) error {
	if len(t.queue) > 2*t.live+minCompact {
		t.compact()
	}
	for len(t.queue) > 0 && t.queue[0].at <= now {
		e := t.pop()
		kb := keyBytes(e.key)
		t.backend.EnsureKey(kb, e.kg)
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
		t.backend.EnsureKey(keyBytes(e.key), e.kg)
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
