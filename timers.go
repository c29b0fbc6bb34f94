package eddy

import (
	"container/heap"
	"slices"

	"github.com/eddyflow/eddy/state"
)

// timerService holds the processing-time timers of one keyed subtask: per
// key in a list state (so they are checkpointed and rescaled with the key),
// and in a min-heap across keys for firing.
type timerService struct {
	backend *state.Backend
	st      *state.List[int64]
	queue   timerQueue
}

func newTimerService(b *state.Backend, name string) (*timerService, error) {
	st, err := state.NewList[int64](b, name)
	if err != nil {
		return nil, err
	}
	return &timerService{backend: b, st: st}, nil
}

type timerEntry struct {
	at  int64
	key string
	kg  int
}

type timerQueue []timerEntry

func (q timerQueue) Len() int           { return len(q) }
func (q timerQueue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q timerQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *timerQueue) Push(x any)        { *q = append(*q, x.(timerEntry)) }
func (q *timerQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// register adds a timer for key at (nanoseconds), once per (key, time).
func (t *timerService) register(kb []byte, kg int, at int64) {
	t.backend.SetCurrentKey(kb, kg)
	if slices.Contains(t.st.Get(), at) {
		return
	}
	t.st.Add(at)
	heap.Push(&t.queue, timerEntry{at: at, key: string(kb), kg: kg})
}

// delete removes key's timer at (nanoseconds); the queue entry is skipped
// when it comes up.
func (t *timerService) delete(kb []byte, kg int, at int64) {
	t.backend.SetCurrentKey(kb, kg)
	xs := t.st.Get()
	if i := slices.Index(xs, at); i >= 0 {
		t.st.Update(slices.Delete(slices.Clone(xs), i, i+1))
	}
}

// rebuild fills the queue from restored state.
func (t *timerService) rebuild() {
	t.queue = t.queue[:0]
	t.st.Range(func(key []byte, kg int, xs []int64) bool {
		for _, at := range xs {
			t.queue = append(t.queue, timerEntry{at: at, key: string(key), kg: kg})
		}
		return true
	})
	heap.Init(&t.queue)
}

// next returns the earliest timer time, or 0 when there is none.
func (t *timerService) next() int64 {
	if len(t.queue) == 0 {
		return 0
	}
	return t.queue[0].at
}

// fireDue calls fire for every timer at or before now, removing it from
// state first.
func (t *timerService) fireDue(now int64, fire func(kb []byte, kg int, at int64) error) error {
	for len(t.queue) > 0 && t.queue[0].at <= now {
		e := heap.Pop(&t.queue).(timerEntry)
		kb := []byte(e.key)
		t.backend.SetCurrentKey(kb, e.kg)
		xs := t.st.Get()
		i := slices.Index(xs, e.at)
		if i < 0 {
			continue // deleted
		}
		rest := slices.Delete(slices.Clone(xs), i, i+1)
		t.st.Update(rest)
		if err := fire(kb, e.kg, e.at); err != nil {
			return err
		}
	}
	return nil
}
