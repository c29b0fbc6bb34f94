package eddy

import (
	"fmt"

	"github.com/eddyflow/eddy/internal/runtime"
	"github.com/eddyflow/eddy/state"
)

// BroadcastStream is a stream whose every record reaches every subtask of
// the operator it is connected to (ConnectBroadcast): rules, thresholds,
// reference data, usually low in volume.
type BroadcastStream[T any] struct {
	s *Stream[T]
}

// Broadcast makes s a broadcast stream.
func Broadcast[T any](s *Stream[T]) *BroadcastStream[T] { return &BroadcastStream[T]{s: s} }

// BroadcastConnected is a keyed stream with a broadcast stream connected
// to its operator.
type BroadcastConnected[K comparable, A, B any] struct {
	ks *KeyedStream[K, A]
	bs *BroadcastStream[B]
}

// ConnectBroadcast connects a broadcast stream to a keyed stream: the
// operator ProcessBroadcast adds sees the keyed stream's records by key,
// and every record of the broadcast stream in every subtask. Barriers are
// aligned over both, and the operator's event time is the least of both
// inputs' watermarks: give a broadcast source eddy.Watermarks (with
// IdleAfter if it is mostly quiet), or event time waits for it.
func ConnectBroadcast[K comparable, A, B any](ks *KeyedStream[K, A], bs *BroadcastStream[B]) *BroadcastConnected[K, A, B] {
	return &BroadcastConnected[K, A, B]{ks: ks, bs: bs}
}

// BroadcastFunc processes a keyed stream with broadcast state: state that
// every subtask holds in full, which only broadcast records change, so
// that it stays the same in every subtask.
type BroadcastFunc[K comparable, A, B, OUT any] interface {
	// Open declares keyed state and broadcast state (NewBroadcastState).
	Open(ctx *OpenContext) error
	// Process handles a record of the keyed stream; it reads broadcast
	// state and must not change it.
	Process(ctx *Context[K, OUT], in *A) error
	// ProcessBroadcast handles a record of the broadcast stream, in every
	// subtask alike; it may change broadcast state.
	ProcessBroadcast(ctx *BroadcastContext[OUT], in *B) error
}

// BroadcastContext is passed to ProcessBroadcast.
type BroadcastContext[OUT any] struct {
	ts   int64
	emit func(ts int64, out OUT)
}

// Emit sends out downstream, with the broadcast record's event time.
func (c *BroadcastContext[OUT]) Emit(out OUT) { c.emit(c.ts, out) }

// broadcastKey is the reserved key under which broadcast state is kept in
// every key group of a subtask: whatever the parallelism a checkpoint is
// restored at, every subtask finds a copy in its own key groups.
var broadcastKey = []byte("\x00eddy.broadcast")

// BroadcastState is a map that every subtask of a broadcast operator holds
// in full. Reads are from memory; a change is also written to the
// subtask's keyed state (once per key group it owns), so it is
// checkpointed and restored with any parallelism.
type BroadcastState[K comparable, V any] struct {
	name     string
	mem      map[K]V
	m        *state.Map[K, V]
	backend  *state.Backend
	writable *bool // set while ProcessBroadcast runs
}

// NewBroadcastState declares broadcast state name in a BroadcastFunc's
// Open.
func NewBroadcastState[K comparable, V any](ctx *OpenContext, name string) (*BroadcastState[K, V], error) {
	if ctx.broadcast == nil {
		return nil, &state.DeclareError{State: name, Err: fmt.Errorf("broadcast state is declared in the Open of a BroadcastFunc")}
	}
	m, err := state.NewMap[K, V](ctx.State, "eddy.broadcast/"+name)
	if err != nil {
		return nil, err
	}
	s := &BroadcastState[K, V]{name: name, mem: map[K]V{}, m: m, backend: ctx.broadcast.backend, writable: &ctx.broadcast.writable}
	ctx.broadcast.states = append(ctx.broadcast.states, s)
	return s, nil
}

// Get returns the value of k.
func (s *BroadcastState[K, V]) Get(k K) (V, bool) {
	v, ok := s.mem[k]
	return v, ok
}

// Len is the number of entries.
func (s *BroadcastState[K, V]) Len() int { return len(s.mem) }

// All calls fn for every entry, in no order, until fn returns false.
func (s *BroadcastState[K, V]) All(fn func(K, V) bool) {
	for k, v := range s.mem {
		if !fn(k, v) {
			return
		}
	}
}

// Put sets k to v; only in ProcessBroadcast.
func (s *BroadcastState[K, V]) Put(k K, v V) error {
	if !*s.writable {
		return fmt.Errorf("eddy: broadcast state %q changed outside ProcessBroadcast: subtasks would differ", s.name)
	}
	s.mem[k] = v
	s.each(func() { s.m.Put(k, v) })
	return nil
}

// Delete removes k; only in ProcessBroadcast.
func (s *BroadcastState[K, V]) Delete(k K) error {
	if !*s.writable {
		return fmt.Errorf("eddy: broadcast state %q changed outside ProcessBroadcast: subtasks would differ", s.name)
	}
	delete(s.mem, k)
	s.each(func() { s.m.Delete(k) })
	return nil
}

// each runs fn with the reserved key current in every key group of the
// subtask.
func (s *BroadcastState[K, V]) each(fn func()) {
	start, end := s.backend.KeyGroups()
	for kg := start; kg < end; kg++ {
		s.backend.SetCurrentKey(broadcastKey, kg)
		fn()
	}
}

// load reads the restored copy, from the subtask's first key group.
func (s *BroadcastState[K, V]) load() {
	start, end := s.backend.KeyGroups()
	if start == end {
		return
	}
	s.backend.SetCurrentKey(broadcastKey, start)
	for k, v := range s.m.All() {
		s.mem[k] = v
	}
}

// broadcastOp is what NewBroadcastState needs of the operator's subtask.
type broadcastOp struct {
	backend  *state.Backend
	writable bool
	states   []interface{ load() }
}

// ProcessBroadcast runs fn on a keyed stream connected to a broadcast
// stream. Each subtask works on its own shallow copy of the struct fn
// points to. fn may also implement TimerFunc, EndFunc and FinalFunc.
func ProcessBroadcast[K comparable, A, B, OUT any](bc *BroadcastConnected[K, A, B], fn BroadcastFunc[K, A, B, OUT], opts ...OperatorOption) *Stream[OUT] {
	var c opConfig
	for _, o := range opts {
		o.applyOperator(&c)
	}
	ks, env := bc.ks, bc.ks.env
	if bc.bs.s.env != env {
		env.fail(fmt.Errorf("eddy: ConnectBroadcast of streams of different environments"))
		return newStream[OUT](env, nil, "broadcast")
	}
	uid := env.opID("process", c.identity, fmt.Sprintf("%s, %s + broadcast %s -> %s", typeName[K](), typeName[A](), typeName[B](), typeName[OUT]()))
	out := newStream[OUT](env, []*runtime.Stage{ks.st}, "process "+uid)
	out.sides = map[string]*sideOutput{}
	edges := runtime.BroadcastInputs[B](ks.st, bc.bs.s.sts, env.cfg.BatchSize, env.cfg.ChannelBatches)
	bc.bs.s.consume("broadcast", func(sc *runtime.Subtask) (runtime.Push[B], error) {
		e, err := runtime.EdgeFrom(sc, edges)
		if err != nil {
			return nil, err
		}
		return runtime.Broadcast[B](sc, e), nil
	})
	type both struct {
		push1 runtime.KeyedPush[K, A]
		push2 runtime.KeyedPush[runtime.BroadcastKey, B]
	}
	key := new(byte)
	open := func(sc *runtime.Subtask) (both, error) {
		return runtime.Memo(sc, key, func() (both, error) {
			f := cloneFunc(fn)
			bop := &broadcastOp{}
			op, err := openKeyed[K, OUT](sc, uid, f, out, func(ctx *OpenContext, b *state.Backend) {
				bop.backend = b
				ctx.broadcast = bop
			})
			if err != nil {
				return both{}, err
			}
			for _, s := range bop.states {
				s.load()
			}
			bctx := &BroadcastContext[OUT]{emit: op.ctx.emitAt}
			push2 := func(_ *runtime.BroadcastKey, _ []byte, _ int, ts int64, in *B) error {
				bctx.ts = ts
				bop.writable = true
				err := f.ProcessBroadcast(bctx, in)
				bop.writable = false
				if err != nil {
					return runtime.UserError(uid, sc.Index(), "ProcessBroadcast", err, false)
				}
				err = op.ctx.err
				op.ctx.err = nil
				return err
			}
			return both{push1: keyedPush(op, "Process", f.Process), push2: push2}, nil
		})
	}
	ks.consume("process "+uid, func(sc *runtime.Subtask) (runtime.KeyedPush[K, A], error) {
		b, err := open(sc)
		return b.push1, err
	})
	runtime.SetReceive[runtime.BroadcastKey, B](edges, func(sc *runtime.Subtask) (runtime.KeyedPush[runtime.BroadcastKey, B], error) {
		b, err := open(sc)
		return b.push2, err
	})
	return out
}
