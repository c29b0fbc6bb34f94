package eddy

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/internal/cacheline"
	"github.com/eddyflow/eddy/internal/runtime"
	"github.com/eddyflow/eddy/state"
)

// Stream is a stream of records of type T.
type Stream[T any] struct {
	env *Env
	// sts are the stages whose subtasks produce the stream's records: one,
	// or several for a Union. Operators on the stream run chained in each.
	sts   []*runtime.Stage
	desc  string
	info  *streamInfo
	next  []func(sc *runtime.Subtask) (runtime.Push[T], error)
	union bool // built once per subtask, however many inputs lead to it
	// sides are the consumed side outputs of the operator whose results
	// this is, by name; nil if the operator has none.
	sides map[string]*sideOutput
}

// streamInfo tracks whether a stream has a consumer, for validation.
type streamInfo struct {
	desc     string
	consumed bool
	// ops are the kinds of the operators that consume the stream; reuse
	// says its records are valid only during the call (ReuseRecords).
	ops   []string
	reuse bool
}

func newStream[T any](env *Env, sts []*runtime.Stage, desc string) *Stream[T] {
	info := &streamInfo{desc: desc}
	env.streams = append(env.streams, info)
	return &Stream[T]{env: env, sts: sts, desc: desc, info: info}
}

// Env is the environment s belongs to: a function given a stream adds
// its sources there.
func (s *Stream[T]) Env() *Env { return s.env }

// consume adds an operator that reads s. Every consumer sees every record
// (fan-out); consumers must not modify the records they are given.
func (s *Stream[T]) consume(op string, build func(sc *runtime.Subtask) (runtime.Push[T], error)) {
	for _, st := range s.sts {
		st.AddOperator(op, false)
	}
	s.next = append(s.next, build)
	s.info.consumed = true
	s.info.ops = append(s.info.ops, op)
}

func (e *Env) fail(err error) {
	if e.buildErr == nil {
		e.buildErr = err
	}
}

// opID returns the id of a keyed operator of kind (and records it): its
// UID or Named name, else kind-n for the n-th part of the job declared.
func (e *Env) opID(kind string, id identity, typ string) string {
	e.ops++
	uid, how := id.id(fmt.Sprintf("%s-%d", kind, e.ops), "derived from its kind and position")
	nodeKind := "keyed operator"
	if kind == "window" {
		nodeKind = "window operator"
	}
	e.node(nodeKind, uid, how, typ)
	return uid
}

// FromSource starts a stream from src. Its parallelism defaults to the
// environment's, capped at the number of splits.
func FromSource[T any](env *Env, src Source[T], opts ...SourceOption) *Stream[T] {
	var c sourceConfig
	for _, o := range opts {
		o.applySource(&c)
	}
	par := c.parallelism
	if par < 1 {
		par = env.cfg.parallelism
	}
	if n := src.Splits(); n < par {
		par = max(n, 1)
	}
	env.ops++
	id, how := c.id(src.Name(), "the connector's Name")
	env.node("source", id, how, typeName[T]())
	st, entry := env.graph.AddSource(par, id, src.Splits())
	s := newStream[T](env, []*runtime.Stage{st}, "source "+id)
	s.info.reuse = c.reuse
	var wm *runtime.WatermarkSpec[T]
	if c.watermarks != nil {
		w, ok := c.watermarks.(*runtime.WatermarkSpec[T])
		if !ok {
			env.fail(fmt.Errorf("eddy: source %s: the Watermarks option is for another record type", id))
		}
		wm = w
	}
	entry.SetRun(func(sc *runtime.Subtask) error {
		push, err := s.build(sc)
		if err != nil {
			return err
		}
		return runtime.RunSource(sc, entry, src, push, wm, c.reuse)
	})
	return s
}

// Map applies fn to every record.
func Map[A, B any](s *Stream[A], fn func(*A) B) *Stream[B] {
	out := newStream[B](s.env, s.sts, "map")
	s.consume("map", func(sc *runtime.Subtask) (runtime.Push[A], error) {
		next, err := out.build(sc)
		if err != nil {
			return nil, err
		}
		// One slot per subtask: the next operator gets a pointer into
		// it, valid during the call, so a record costs no allocation.
		// It is written per record, so it gets cache lines of its own.
		b := cacheline.New[B]()
		return func(ts int64, a *A) error {
			*b = fn(a)
			return next(ts, b)
		}, nil
	})
	return out
}

// Filter keeps the records for which keep returns true.
func Filter[T any](s *Stream[T], keep func(*T) bool) *Stream[T] {
	out := newStream[T](s.env, s.sts, "filter")
	s.consume("filter", func(sc *runtime.Subtask) (runtime.Push[T], error) {
		next, err := out.build(sc)
		if err != nil {
			return nil, err
		}
		return func(ts int64, t *T) error {
			if keep(t) {
				return next(ts, t)
			}
			return nil
		}, nil
	})
	return out
}

// FlatMap calls fn for every record; fn emits any number of outputs.
func FlatMap[A, B any](s *Stream[A], fn func(in *A, emit func(B)) error) *Stream[B] {
	out := newStream[B](s.env, s.sts, "flatMap")
	s.consume("flatMap", func(sc *runtime.Subtask) (runtime.Push[A], error) {
		next, err := out.build(sc)
		if err != nil {
			return nil, err
		}
		// Written per record: on cache lines of their own, as in Map.
		st := cacheline.New[struct {
			err  error
			cur  int64
			slot B // reused per emitted record, as in Map
		}]()
		emit := func(b B) {
			if st.err == nil {
				st.slot = b
				st.err = next(st.cur, &st.slot)
			}
		}
		return func(ts int64, a *A) error {
			st.cur = ts
			if err := fn(a, emit); err != nil {
				return err
			}
			err := st.err
			st.err = nil
			return err
		}, nil
	})
	return out
}

// build makes, for one subtask, the function that feeds s's consumers.
func (s *Stream[T]) build(sc *runtime.Subtask) (runtime.Push[T], error) {
	if s.union {
		// Several chains of one subtask may lead here: build it once.
		return runtime.Memo(sc, s, func() (runtime.Push[T], error) { return s.buildAll(sc) })
	}
	return s.buildAll(sc)
}

func (s *Stream[T]) buildAll(sc *runtime.Subtask) (runtime.Push[T], error) {
	pushes, err := buildAll(sc, s.desc, s.next)
	if err != nil || len(pushes) == 1 {
		return first(pushes), err
	}
	return func(ts int64, rec *T) error {
		for _, p := range pushes {
			if err := p(ts, rec); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// buildAll builds every consumer of a stream for one subtask.
func buildAll[F any](sc *runtime.Subtask, desc string, builders []func(*runtime.Subtask) (F, error)) ([]F, error) {
	if len(builders) == 0 {
		return nil, fmt.Errorf("eddy: %s has no consumer", desc)
	}
	out := make([]F, len(builders))
	for i, b := range builders {
		f, err := b(sc)
		if err != nil {
			return nil, err
		}
		out[i] = f
	}
	return out, nil
}

func first[F any](fs []F) F {
	var zero F
	if len(fs) == 0 {
		return zero
	}
	return fs[0]
}

// ToSink writes the stream to sink.
func ToSink[T any](s *Stream[T], sink Sink[T], opts ...SinkOption) {
	var c sinkConfig
	for _, o := range opts {
		o.applySink(&c)
	}
	id, how := c.id(sink.Name(), "the connector's Name")
	s.env.node("sink", id, how, typeName[T]())
	rollback, _ := any(sink).(connector.RollbackSink)
	entry := s.env.graph.AddSink(id, sink.Recover, sink.Commit, rollback)
	s.consume("sink "+id, func(sc *runtime.Subtask) (runtime.Push[T], error) {
		// The writers of a union's stages are numbered one after another.
		index, total := sc.Index(), 0
		for _, st := range s.sts {
			if st == sc.Stage() {
				index += total
			}
			total += st.Parallelism()
		}
		w, err := runtime.OpenSink(sc, entry, sink, index, total)
		if err != nil {
			return nil, err
		}
		return func(_ int64, t *T) error {
			sc.CountOut()
			return w.Write(t)
		}, nil
	})
}

// Union merges streams of one type into one: what is applied to the union
// sees every record of every input (a stream given twice, twice). The
// inputs' records stay in the subtasks that produced them until a KeyBy
// shuffles them, so a union costs no hand-off of its own; event time after
// a KeyBy of a union is the least of its inputs'.
func Union[T any](first *Stream[T], more ...*Stream[T]) *Stream[T] {
	streams := append([]*Stream[T]{first}, more...)
	env := first.env
	var sts []*runtime.Stage
	for _, s := range streams {
		if s.env != env {
			env.fail(fmt.Errorf("eddy: Union of streams of different environments"))
			continue
		}
		for _, st := range s.sts {
			if !slices.Contains(sts, st) {
				sts = append(sts, st)
			}
		}
	}
	out := newStream[T](env, sts, "union")
	out.union = true
	for _, s := range streams {
		s.consume("union", func(sc *runtime.Subtask) (runtime.Push[T], error) { return out.build(sc) })
	}
	return out
}

// KeyedStream is a stream partitioned by key: records with equal keys go to
// the same subtask, in order, and keyed operators see state scoped to the
// record's key.
type KeyedStream[K comparable, T any] struct {
	env         *Env
	st          *runtime.Stage
	par         int
	explicitPar bool // the parallelism was set with WithParallelism
	desc        string
	info        *streamInfo
	next        []func(sc *runtime.Subtask) (runtime.KeyedPush[K, T], error)
}

// KeyBy partitions s by key. Keys are serialized to choose their key group:
// strings as their bytes, other types with serde.
func KeyBy[K comparable, T any](s *Stream[T], key func(*T) K, opts ...KeyByOption) *KeyedStream[K, T] {
	var c keyByConfig
	for _, o := range opts {
		o.applyKeyBy(&c)
	}
	env := s.env
	par := c.parallelism
	if par < 1 {
		par = env.cfg.parallelism
	}
	if par > env.cfg.MaxParallelism {
		env.fail(fmt.Errorf("eddy: keyed parallelism %d exceeds the max parallelism %d", par, env.cfg.MaxParallelism))
	}
	st, edges := runtime.KeyedStage[K, T](&env.graph, s.sts, par, env.cfg.BatchSize, env.cfg.ChannelBatches)
	ks := &KeyedStream[K, T]{env: env, st: st, par: par, explicitPar: c.parallelism > 0, desc: "keyBy", info: &streamInfo{desc: "keyBy"}}
	env.streams = append(env.streams, ks.info)
	enc, err := runtime.KeyEncoder[K]()
	if err != nil {
		env.fail(err)
	}
	s.consume("keyBy", func(sc *runtime.Subtask) (runtime.Push[T], error) {
		e, err := runtime.EdgeFrom(sc, edges)
		if err != nil {
			return nil, err
		}
		return runtime.Shuffle[K, T](sc, e, key, enc), nil
	})
	runtime.SetReceive[K, T](edges, ks.build)
	return ks
}

func (ks *KeyedStream[K, T]) consume(op string, build func(sc *runtime.Subtask) (runtime.KeyedPush[K, T], error)) {
	ks.st.AddOperator(op, true)
	ks.next = append(ks.next, build)
	ks.info.consumed = true
}

func (ks *KeyedStream[K, T]) build(sc *runtime.Subtask) (runtime.KeyedPush[K, T], error) {
	pushes, err := buildAll(sc, ks.desc, ks.next)
	if err != nil || len(pushes) == 1 {
		return first(pushes), err
	}
	return func(key *K, kb []byte, kg int, ts int64, rec *T) error {
		for _, p := range pushes {
			if err := p(key, kb, kg, ts, rec); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// OpenContext is passed to a keyed function's Open: declare state on State.
type OpenContext struct {
	State       *state.Scope // declare state here: state.NewValue(ctx.State, "name")
	Subtask     int
	Parallelism int
	late        *int64 // the subtask's count of late records, for Eddy's own operators
	dropped     *int64 // of late records dropped for want of a consumer
	broadcast   *broadcastOp
}

// TimeDomain says which clock a timer follows.
type TimeDomain int

const (
	// EventTime timers fire when the watermark passes their time.
	EventTime TimeDomain = iota
	// ProcessingTime timers fire when the wall clock passes their time.
	ProcessingTime
)

// Context is passed to a keyed function for each record and timer.
type Context[K comparable, OUT any] struct {
	_ cacheline.Pad // written per record (package cacheline)
	// Key is the key of the current record or timer.
	Key    K
	emit   runtime.Push[OUT]
	out    OUT // the emitted record, handed on by pointer without an allocation
	err    error
	ts     int64
	domain TimeDomain
	op     *runtime.Keyed
	kb     []byte
	kg     int
	sides  map[string]any // side output pushes by name
	_      cacheline.Pad
}

// Emit sends out downstream, with the current record's event time (or the
// timer's, in OnTimer).
func (c *Context[K, OUT]) Emit(out OUT) {
	if c.err == nil {
		c.out = out
		c.err = c.emit(c.ts, &c.out)
	}
}

// emitAt sends out downstream with event time ts.
func (c *Context[K, OUT]) emitAt(ts int64, out OUT) {
	if c.err == nil {
		c.out = out
		c.err = c.emit(ts, &c.out)
	}
}

// Timestamp is the event time of the current record, and whether it has
// one (sources without eddy.Watermarks give none).
func (c *Context[K, OUT]) Timestamp() (time.Time, bool) {
	if c.ts == runtime.NoTimestamp {
		return time.Time{}, false
	}
	return time.Unix(0, c.ts).UTC(), true
}

// Watermark is the operator's current event-time watermark: no record with
// an earlier timestamp is expected any more.
func (c *Context[K, OUT]) Watermark() time.Time { return time.Unix(0, c.op.Watermark()).UTC() }

// TimeDomain says, in OnTimer, which kind of timer fired.
func (c *Context[K, OUT]) TimeDomain() TimeDomain { return c.domain }

// RegisterProcessingTimer asks for OnTimer to be called for the current key
// once the wall clock passes t. Timers are deduplicated per key and time and
// stored in keyed state, so they survive checkpoints and rescaling. When a
// bounded input ends, the timers still pending fire then, after the
// event-time ones (the input is drained).
func (c *Context[K, OUT]) RegisterProcessingTimer(t time.Time) {
	c.op.RegisterTimer(false, c.kb, c.kg, t.UnixNano())
}

// RegisterEventTimer asks for OnTimer to be called for the current key once
// the watermark passes t; deduplicated per key and time, stored in keyed
// state.
func (c *Context[K, OUT]) RegisterEventTimer(t time.Time) {
	c.op.RegisterTimer(true, c.kb, c.kg, t.UnixNano())
}

// DeleteEventTimer removes an event-time timer of the current key.
func (c *Context[K, OUT]) DeleteEventTimer(t time.Time) {
	c.op.DeleteEventTimer(c.kb, c.kg, t.UnixNano())
}

// KeyedFunc processes the records of a keyed stream with keyed state.
type KeyedFunc[K comparable, IN, OUT any] interface {
	// Open declares state; it runs once per subtask before any record.
	Open(ctx *OpenContext) error
	// Process handles one record; ctx.Key is its key.
	Process(ctx *Context[K, OUT], in *IN) error
}

// TimerFunc is implemented by keyed functions that register timers.
type TimerFunc[K comparable, OUT any] interface {
	OnTimer(ctx *Context[K, OUT], at time.Time) error
}

// EndFunc is implemented by keyed functions that act when a bounded input
// ends, after every event-time timer has fired.
type EndFunc interface {
	EndOfInput() error
}

// FinalFunc is implemented by keyed functions that emit once their
// bounded input has ended: Final runs once per subtask, after every
// event-time timer has fired (and after EndOfInput, if the function has
// both), with no key current; what it emits carries no event time. Use it
// for results over everything a subtask saw (for a result per key, register
// an event-time timer instead: they all fire at the end of the input).
type FinalFunc[OUT any] interface {
	Final(emit func(OUT)) error
}

// Process runs fn on a keyed stream. Each subtask works on its own shallow
// copy of the struct fn points to.
func Process[K comparable, IN, OUT any](ks *KeyedStream[K, IN], fn KeyedFunc[K, IN, OUT], opts ...OperatorOption) *Stream[OUT] {
	var c opConfig
	for _, o := range opts {
		o.applyOperator(&c)
	}
	env := ks.env
	uid := env.opID("process", c.identity, fmt.Sprintf("%s, %s -> %s", typeName[K](), typeName[IN](), typeName[OUT]()))
	out := newStream[OUT](env, []*runtime.Stage{ks.st}, "process "+uid)
	out.sides = map[string]*sideOutput{}
	ks.consume("process "+uid, func(sc *runtime.Subtask) (runtime.KeyedPush[K, IN], error) {
		f := cloneFunc(fn)
		op, err := openKeyed[K, OUT](sc, uid, f, out)
		if err != nil {
			return nil, err
		}
		return keyedPush(op, "Process", f.Process), nil
	})
	return out
}

// buildKeyed sets up one subtask of a keyed operator: its state, the
// function's Open, and the runtime's restore, timers and changelog.
func buildKeyed[K comparable, IN, OUT any](sc *runtime.Subtask, uid string, fn KeyedFunc[K, IN, OUT], next runtime.Push[OUT]) (runtime.KeyedPush[K, IN], error) {
	fn = cloneFunc(fn)
	op, err := openKeyedTo[K, OUT](sc, uid, fn, next, nil)
	if err != nil {
		return nil, err
	}
	return keyedPush(op, "Process", fn.Process), nil
}

// keyedOp is one subtask of a keyed operator, whatever its inputs.
type keyedOp[K comparable, OUT any] struct {
	uid     string
	subtask int
	backend *state.Backend
	ctx     *Context[K, OUT]
}

// openKeyed sets up one subtask of keyed operator uid whose function is
// fn (already this subtask's copy) and whose results are out: its state,
// fn's Open, timers (when fn is a TimerFunc), the end of its input (an
// EndFunc or FinalFunc), its side outputs, and the runtime's restore and
// changelog.
func openKeyed[K comparable, OUT any](sc *runtime.Subtask, uid string, fn interface{ Open(*OpenContext) error }, out *Stream[OUT], prepare ...func(*OpenContext, *state.Backend)) (*keyedOp[K, OUT], error) {
	next, err := out.build(sc)
	if err != nil {
		return nil, err
	}
	sides, err := out.buildSides(sc)
	if err != nil {
		return nil, err
	}
	return openKeyedTo[K, OUT](sc, uid, fn, next, sides, prepare...)
}

// openKeyedTo is openKeyed with the results' push and side outputs built.
// prepare, if given, sees the OpenContext and the backend before fn's Open.
func openKeyedTo[K comparable, OUT any](sc *runtime.Subtask, uid string, fn interface{ Open(*OpenContext) error }, next runtime.Push[OUT], sides map[string]any, prepare ...func(*OpenContext, *state.Backend)) (*keyedOp[K, OUT], error) {
	ksch, err := runtime.KeySchema[K](uid)
	if err != nil {
		return nil, err
	}
	rt := runtime.OpenKeyed(sc, uid, ksch)
	backend := rt.State()
	octx := &OpenContext{State: state.NewScope(backend), Subtask: sc.Index(), Parallelism: sc.Parallelism(), late: sc.LateRecords(), dropped: sc.DroppedRecords()}
	for _, p := range prepare {
		p(octx, backend)
	}
	if err := fn.Open(octx); err != nil {
		var de *state.DeclareError
		return nil, runtime.UserError(uid, sc.Index(), "Open", err, errors.As(err, &de))
	}
	ctx := &Context[K, OUT]{emit: next, op: rt, sides: sides}
	if tf, ok := fn.(TimerFunc[K, OUT]); ok {
		keyDec, err := runtime.KeyDecoder[K]()
		if err != nil {
			return nil, err
		}
		fire := func(domain TimeDomain) func(kb []byte, kg int, at int64) error {
			return func(kb []byte, kg int, at int64) error {
				backend.EnsureKey(kb, kg) // FireDue has set it: same slice
				if err := keyDec(kb, &ctx.Key); err != nil {
					return err
				}
				ctx.kb, ctx.kg, ctx.domain = kb, kg, domain
				ctx.ts = at
				if domain == ProcessingTime {
					ctx.ts = runtime.NoTimestamp
				}
				backend.SetRecordTime(ctx.ts)
				if err := tf.OnTimer(ctx, time.Unix(0, at).UTC()); err != nil {
					return runtime.UserError(uid, sc.Index(), "OnTimer", err, false)
				}
				err := ctx.err
				ctx.err = nil
				return err
			}
		}
		rt.OnTimer(fire(EventTime), fire(ProcessingTime))
	}
	ef, endFn := fn.(EndFunc)
	ff, finalFn := fn.(FinalFunc[OUT])
	if endFn || finalFn {
		rt.OnEnd(func() error {
			if endFn {
				if err := ef.EndOfInput(); err != nil {
					return err
				}
			}
			if finalFn {
				// No key is current and no event time applies: what it
				// emits has none.
				ctx.ts, ctx.kb = runtime.NoTimestamp, nil
				if err := ff.Final(func(v OUT) { ctx.emitAt(runtime.NoTimestamp, v) }); err != nil {
					return err
				}
				err := ctx.err
				ctx.err = nil
				return err
			}
			return nil
		})
	}
	if err := rt.Start(sc); err != nil {
		return nil, err
	}
	if xf, ok := fn.(indexFunc[K, OUT]); ok {
		// Its index is rebuilt from the restored state.
		ix, err := xf.startIndex(ctx, backend, func(err error) error {
			return runtime.UserError(uid, sc.Index(), "OnTimer", err, false)
		})
		if err != nil {
			return nil, err
		}
		switch {
		case ix.fire == nil:
		case ix.domain == ProcessingTime:
			rt.OnProcessingTime(ix.next, ix.fire)
		default:
			rt.OnWatermark(ix.fire)
		}
	}
	return &keyedOp[K, OUT]{uid: uid, subtask: sc.Index(), backend: backend, ctx: ctx}, nil
}

// indexFunc is a keyed function that fires what is due from an index of
// its own instead of through a timer per key: windowFn for tumbling and
// sliding windows.
type indexFunc[K comparable, OUT any] interface {
	// startIndex is called once the operator's state is restored; it
	// returns the index's hooks, with fire nil if it keeps none. userErr
	// wraps an error of user code (a window's result function).
	startIndex(ctx *Context[K, OUT], b *state.Backend, userErr func(error) error) (timeIndex, error)
}

// timeIndex is what the runtime calls for an indexFunc's index: fire runs
// what is due by a time of domain (each advance of the watermark, or of
// the processing time), and in processing time next says when the
// earliest entry is due (0 if none).
type timeIndex struct {
	domain TimeDomain
	fire   func(t int64) error
	next   func() int64
}

// keyedPush is the push of one input of keyed operator op: process (its
// function's method what) runs on each record with the record's key
// current.
func keyedPush[K comparable, IN, OUT any](op *keyedOp[K, OUT], what string, process func(*Context[K, OUT], *IN) error) runtime.KeyedPush[K, IN] {
	backend, ctx := op.backend, op.ctx
	return func(k *K, kb []byte, kg int, ts int64, in *IN) error {
		// A record of the key of the record before it comes with the
		// identical slice (shuffle.Deliver), which keeps the key's
		// cached state entries; the receiver drops them before each
		// batch, whose memory is recycled.
		backend.EnsureKey(kb, kg)
		backend.SetRecordTime(ts)
		ctx.Key, ctx.kb, ctx.kg, ctx.ts, ctx.domain = *k, kb, kg, ts, EventTime
		if err := process(ctx, in); err != nil {
			return runtime.UserError(op.uid, op.subtask, what, err, false)
		}
		err := ctx.err
		ctx.err = nil
		return err
	}
}

// cloneFunc gives each subtask its own copy of a keyed function: a shallow
// copy of the struct a pointer refers to, so state handles set in Open are
// per subtask. Other values are shared as they are. The copy is on cache
// lines of its own: a function may write its fields per record (package
// cacheline).
func cloneFunc[F any](fn F) F {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fn
	}
	pad := reflect.TypeFor[cacheline.Pad]()
	padded := reflect.New(reflect.StructOf([]reflect.StructField{
		{Name: "Before", Type: pad}, {Name: "Fn", Type: v.Elem().Type()}, {Name: "After", Type: pad}}))
	c := padded.Elem().Field(1)
	c.Set(v.Elem())
	return c.Addr().Interface().(F)
}

// reduceFn is the KeyedFunc behind Reduce.
type reduceFn[K comparable, T any] struct {
	reduce func(acc, x T) T
	st     *state.Reducing[T]
}

func (r *reduceFn[K, T]) Open(ctx *OpenContext) error {
	var err error
	r.st, err = state.NewReducing[T](ctx.State, "reduce", r.reduce)
	return err
}

func (r *reduceFn[K, T]) Process(ctx *Context[K, T], in *T) error {
	r.st.Add(*in)
	v, _ := r.st.Get()
	ctx.Emit(v)
	return nil
}

// Reduce folds the records of each key with fn and emits the running result
// after every record.
func Reduce[K comparable, T any](ks *KeyedStream[K, T], fn func(acc, x T) T, opts ...OperatorOption) *Stream[T] {
	return Process[K, T, T](ks, &reduceFn[K, T]{reduce: fn}, opts...)
}
