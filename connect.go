package eddy

import (
	"fmt"

	"github.com/eddyflow/eddy/internal/runtime"
)

// ConnectedStreams are two keyed streams whose records meet in one keyed
// operator (CoProcess): records of both with equal keys go to the same
// subtask and see the same keyed state and timers.
type ConnectedStreams[K comparable, A, B any] struct {
	a *KeyedStream[K, A]
	b *KeyedStream[K, B]
}

// Connect joins two keyed streams with keys of one type into the two
// inputs of one operator. The operator runs at a's parallelism; b must not
// have been used yet (it becomes the operator's second input), and if b's
// KeyBy set a parallelism, it must be a's. A checkpoint barrier is aligned
// over both inputs, and the operator's event time is the least of both
// inputs' watermarks.
func Connect[K comparable, A, B any](a *KeyedStream[K, A], b *KeyedStream[K, B]) *ConnectedStreams[K, A, B] {
	env := a.env
	cs := &ConnectedStreams[K, A, B]{a: a, b: b}
	switch {
	case b.env != env:
		env.fail(fmt.Errorf("eddy: Connect of keyed streams of different environments"))
	case a.st == b.st:
		env.fail(fmt.Errorf("eddy: Connect of a keyed stream with itself"))
	case b.info.consumed:
		env.fail(fmt.Errorf("eddy: Connect: the second keyed stream (%s) is already used; connect it before applying anything else to it", b.desc))
	case b.explicitPar && b.par != a.par:
		env.fail(fmt.Errorf("eddy: Connect: the keyed streams have parallelism %d and %d; the connected operator runs at the first's", a.par, b.par))
	default:
		if err := env.graph.MoveInputs(b.st, a.st); err != nil {
			env.fail(fmt.Errorf("eddy: Connect: %w", err))
		}
		b.st, b.par = a.st, a.par
	}
	return cs
}

// CoKeyedFunc processes the records of two connected keyed streams with
// keyed state that both inputs share. It may also implement TimerFunc and
// EndFunc, as a KeyedFunc does.
type CoKeyedFunc[K comparable, A, B, OUT any] interface {
	// Open declares state; it runs once per subtask before any record.
	Open(ctx *OpenContext) error
	// Process1 handles one record of the first input; ctx.Key is its key.
	Process1(ctx *Context[K, OUT], in *A) error
	// Process2 handles one record of the second input.
	Process2(ctx *Context[K, OUT], in *B) error
}

// CoProcess runs fn on connected keyed streams. Each subtask works on its
// own shallow copy of the struct fn points to. Records of the two inputs
// reach fn in the order they arrive, which between the inputs is not
// deterministic: keep what one input must wait for in state, and use
// event-time timers where the answer depends on time.
func CoProcess[K comparable, A, B, OUT any](cs *ConnectedStreams[K, A, B], fn CoKeyedFunc[K, A, B, OUT], opts ...OperatorOption) *Stream[OUT] {
	var c opConfig
	for _, o := range opts {
		o.applyOperator(&c)
	}
	return coProcess(cs, "process", c.identity, fn)
}

// coProcess adds keyed operator fn of kind (its id's prefix when derived)
// over connected streams.
func coProcess[K comparable, A, B, OUT any](cs *ConnectedStreams[K, A, B], kind string, id identity, fn CoKeyedFunc[K, A, B, OUT]) *Stream[OUT] {
	env := cs.a.env
	uid := env.opID(kind, id, fmt.Sprintf("%s, %s + %s -> %s", typeName[K](), typeName[A](), typeName[B](), typeName[OUT]()))
	out := newStream[OUT](env, []*runtime.Stage{cs.a.st}, kind+" "+uid)
	out.sides = map[string]*sideOutput{}
	key := new(byte)
	// Both inputs of a subtask share one operator, built by whichever
	// input is built first.
	open := func(sc *runtime.Subtask) (*coOp[K, A, B, OUT], error) {
		return runtime.Memo(sc, key, func() (*coOp[K, A, B, OUT], error) {
			f := cloneFunc(fn)
			op, err := openKeyed[K, OUT](sc, uid, f, out)
			if err != nil {
				return nil, err
			}
			return &coOp[K, A, B, OUT]{push1: keyedPush(op, "Process1", f.Process1), push2: keyedPush(op, "Process2", f.Process2)}, nil
		})
	}
	cs.a.consume(kind+" "+uid, func(sc *runtime.Subtask) (runtime.KeyedPush[K, A], error) {
		op, err := open(sc)
		if err != nil {
			return nil, err
		}
		return op.push1, nil
	})
	cs.b.next = append(cs.b.next, func(sc *runtime.Subtask) (runtime.KeyedPush[K, B], error) {
		op, err := open(sc)
		if err != nil {
			return nil, err
		}
		return op.push2, nil
	})
	cs.b.info.consumed = true
	return out
}

type coOp[K comparable, A, B, OUT any] struct {
	push1 runtime.KeyedPush[K, A]
	push2 runtime.KeyedPush[K, B]
}
