package eddy

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"
	"unsafe"

	"github.com/eddyflow/eddy/internal/errs"
	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
)

// stage is a chain of operators that runs in one goroutine per subtask: a
// source or a shuffle input, then operators up to a sink or a shuffle output.
type stage struct {
	id          int
	parallelism int
	source      *sourceEntry
	input       *edge   // the shuffle feeding this stage
	outs        []*edge // the shuffles this stage feeds
	// receive builds, per subtask, the handler of a batch from input.
	// The handler gets a batch and calls mark for each watermark in it,
	// at its place among the records.
	receive func(sc *subtaskCtx) (func(batch any, mark func(wm int64) error) error, error)
}

// edge is a hash shuffle between two stages.
type edge struct {
	from, to *stage
	// free recycles the batches of the edge's record type. It is a
	// bounded channel, not a sync.Pool, whose contents each GC drops:
	// every batch would then grow its slices anew.
	free     chan any
	newBatch func() any
}

// getBatch returns a recycled batch, or a new one.
func (e *edge) getBatch() any {
	select {
	case b := <-e.free:
		return b
	default:
		return e.newBatch()
	}
}

// putBatch recycles a batch that has been reset.
func (e *edge) putBatch(b any) {
	select {
	case e.free <- b:
	default:
	}
}

// sourceEntry is a source of the job, type-erased.
type sourceEntry struct {
	index  int
	name   string
	splits int
	st     *stage
	run    func(sc *subtaskCtx) error
}

// sinkEntry is a sink of the job, type-erased.
type sinkEntry struct {
	name    string
	recover func(ctx contextT, txns [][]byte) error
	commit  func(ctx contextT, txns [][]byte) error
}

// Stream is a stream of records of type T.
type Stream[T any] struct {
	env  *Env
	st   *stage
	desc string
	info *streamInfo
	next []func(sc *subtaskCtx) (push[T], error)
}

// push hands one record, with its event time in nanoseconds (noTimestamp
// when it has none), to the next operator.
type push[T any] func(ts int64, rec *T) error

// noTimestamp marks a record without event time.
const noTimestamp = math.MinInt64

// streamInfo tracks whether a stream has a consumer, for validation.
type streamInfo struct {
	desc     string
	consumed bool
}

func newStream[T any](env *Env, st *stage, desc string) *Stream[T] {
	info := &streamInfo{desc: desc}
	env.streams = append(env.streams, info)
	return &Stream[T]{env: env, st: st, desc: desc, info: info}
}

// consume adds an operator that reads s. Every consumer sees every record
// (fan-out); consumers must not modify the records they are given.
func (s *Stream[T]) consume(op string, build func(sc *subtaskCtx) (push[T], error)) {
	s.next = append(s.next, build)
	s.info.consumed = true
}

func (e *Env) fail(err error) {
	if e.buildErr == nil {
		e.buildErr = err
	}
}

func (e *Env) newStage(parallelism int) *stage {
	st := &stage{id: len(e.stages), parallelism: parallelism}
	e.stages = append(e.stages, st)
	return st
}

// opID returns the id of a keyed operator of kind (and records it): its
// UID or Named name, else kind-n for the n-th part of the job declared.
func (e *Env) opID(kind string, id identity) string {
	e.ops++
	uid, how := id.id(fmt.Sprintf("%s-%d", kind, e.ops), "derived from its kind and position")
	nodeKind := "keyed operator"
	if kind == "window" {
		nodeKind = "window operator"
	}
	e.node(nodeKind, uid, how)
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
	st := env.newStage(par)
	env.ops++
	id, how := c.id(src.Name(), "the connector's Name")
	env.node("source", id, how)
	s := newStream[T](env, st, "source "+id)
	entry := &sourceEntry{index: len(env.sources), name: id, splits: src.Splits(), st: st}
	var wm *watermarkSpec[T]
	if c.watermarks != nil {
		w, ok := c.watermarks.(*watermarkSpec[T])
		if !ok {
			env.fail(fmt.Errorf("eddy: source %s: the Watermarks option is for another record type", id))
		}
		wm = w
	}
	entry.run = func(sc *subtaskCtx) error {
		push, err := s.build(sc)
		if err != nil {
			return err
		}
		return runSource(sc, entry, src, push, wm)
	}
	st.source = entry
	env.sources = append(env.sources, entry)
	return s
}

// Map applies fn to every record.
func Map[A, B any](s *Stream[A], fn func(*A) B) *Stream[B] {
	out := newStream[B](s.env, s.st, "map")
	s.consume("map", func(sc *subtaskCtx) (push[A], error) {
		next, err := out.build(sc)
		if err != nil {
			return nil, err
		}
		// One slot per subtask: the next operator gets a pointer into
		// it, valid during the call, so a record costs no allocation.
		var b B
		return func(ts int64, a *A) error {
			b = fn(a)
			return next(ts, &b)
		}, nil
	})
	return out
}

// Filter keeps the records for which keep returns true.
func Filter[T any](s *Stream[T], keep func(*T) bool) *Stream[T] {
	out := newStream[T](s.env, s.st, "filter")
	s.consume("filter", func(sc *subtaskCtx) (push[T], error) {
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
	out := newStream[B](s.env, s.st, "flatMap")
	s.consume("flatMap", func(sc *subtaskCtx) (push[A], error) {
		next, err := out.build(sc)
		if err != nil {
			return nil, err
		}
		var emitErr error
		var cur int64
		var slot B // reused per emitted record, as in Map
		emit := func(b B) {
			if emitErr == nil {
				slot = b
				emitErr = next(cur, &slot)
			}
		}
		return func(ts int64, a *A) error {
			cur = ts
			if err := fn(a, emit); err != nil {
				return err
			}
			err := emitErr
			emitErr = nil
			return err
		}, nil
	})
	return out
}

// build makes, for one subtask, the function that feeds s's consumers.
func (s *Stream[T]) build(sc *subtaskCtx) (push[T], error) {
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
func buildAll[F any](sc *subtaskCtx, desc string, builders []func(*subtaskCtx) (F, error)) ([]F, error) {
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
	s.env.node("sink", id, how)
	entry := &sinkEntry{name: id,
		recover: func(ctx contextT, txns [][]byte) error { return sink.Recover(ctx, txns) },
		commit:  func(ctx contextT, txns [][]byte) error { return sink.Commit(ctx, txns) },
	}
	s.env.sinks = append(s.env.sinks, entry)
	s.consume("sink "+entry.name, func(sc *subtaskCtx) (push[T], error) {
		w, err := sink.OpenWriter(sc.ctx, sc.subtask, sc.par)
		if err != nil {
			return nil, fmt.Errorf("eddy: sink %s subtask %d: %w", entry.name, sc.subtask, err)
		}
		sc.sinks = append(sc.sinks, sinkWriter{entry: entry, w: w})
		return func(_ int64, t *T) error {
			sc.recordsOut++
			return w.Write(t)
		}, nil
	})
}

// KeyedStream is a stream partitioned by key: records with equal keys go to
// the same subtask, in order, and keyed operators see state scoped to the
// record's key.
type KeyedStream[K comparable, T any] struct {
	env  *Env
	st   *stage
	desc string
	info *streamInfo
	next []func(sc *subtaskCtx) (keyedPush[K, T], error)
}

type keyedPush[K comparable, T any] func(key *K, kb []byte, kg int, ts int64, rec *T) error

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
	if par > env.cfg.maxParallelism {
		env.fail(fmt.Errorf("eddy: keyed parallelism %d exceeds the max parallelism %d", par, env.cfg.maxParallelism))
	}
	st := env.newStage(par)
	e := &edge{from: s.st, to: st}
	// At most every input's credits and open batch are out at once.
	e.free = make(chan any, s.st.parallelism*par*(env.cfg.channelBatches+1))
	size := env.cfg.batchSize
	e.newBatch = func() any {
		return &keyedBatch[K, T]{keys: make([]K, 0, size), kgs: make([]int32, 0, size), keyBuf: make([]byte, 0, 16*size),
			keyEnd: make([]int32, 0, size), ts: make([]int64, 0, size), recs: make([]T, 0, size), marks: make([]mark, 0, 4)}
	}
	s.st.outs = append(s.st.outs, e)
	st.input = e
	ks := &KeyedStream[K, T]{env: env, st: st, desc: "keyBy", info: &streamInfo{desc: "keyBy"}}
	env.streams = append(env.streams, ks.info)
	enc, err := keyEncoder[K]()
	if err != nil {
		env.fail(err)
	}
	s.consume("keyBy", func(sc *subtaskCtx) (push[T], error) {
		w := newShuffleWriter[K, T](sc, e, key, enc)
		sc.outs = append(sc.outs, w)
		return w.push, nil
	})
	st.receive = func(sc *subtaskCtx) (func(any, func(int64) error) error, error) {
		push, err := ks.build(sc)
		if err != nil {
			return nil, err
		}
		return func(b any, mark func(int64) error) error {
			kb := b.(*keyedBatch[K, T])
			m := 0
			for i := range kb.recs {
				for ; m < len(kb.marks) && int(kb.marks[m].at) == i; m++ {
					if err := mark(kb.marks[m].wm); err != nil {
						return err
					}
				}
				if err := push(&kb.keys[i], kb.key(i), int(kb.kgs[i]), kb.ts[i], &kb.recs[i]); err != nil {
					return err
				}
			}
			for ; m < len(kb.marks); m++ {
				if err := mark(kb.marks[m].wm); err != nil {
					return err
				}
			}
			kb.reset()
			e.putBatch(kb)
			return nil
		}, nil
	}
	return ks
}

func (ks *KeyedStream[K, T]) consume(op string, build func(sc *subtaskCtx) (keyedPush[K, T], error)) {
	ks.next = append(ks.next, build)
	ks.info.consumed = true
}

func (ks *KeyedStream[K, T]) build(sc *subtaskCtx) (keyedPush[K, T], error) {
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

// keyEncoder returns how keys of type K are serialized.
func keyEncoder[K comparable]() (func(dst []byte, k *K) []byte, error) {
	if reflect.TypeFor[K]().Kind() == reflect.String {
		return func(dst []byte, k *K) []byte {
			return append(dst, *(*string)(anyPtr(k))...)
		}, nil
	}
	codec, err := serde.For[K]()
	if err != nil {
		return nil, fmt.Errorf("eddy: key type: %w", err)
	}
	return func(dst []byte, k *K) []byte {
		out, err := codec.Append(dst, k)
		if err != nil {
			return append(dst, fmt.Sprint(*k)...) // keys that fail to encode (bad UTF-8) still hash consistently
		}
		return out
	}, nil
}

// OpenContext is passed to a keyed function's Open: declare state on State.
type OpenContext struct {
	State       *state.Scope // declare state here: state.NewValue(ctx.State, "name")
	Subtask     int
	Parallelism int
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
	// Key is the key of the current record or timer.
	Key    K
	emit   push[OUT]
	out    OUT // the emitted record, handed on by pointer without an allocation
	err    error
	ts     int64
	domain TimeDomain
	op     *keyedRuntime
	kb     []byte
	kg     int
}

// Emit sends out downstream, with the current record's event time (or the
// timer's, in OnTimer).
func (c *Context[K, OUT]) Emit(out OUT) {
	if c.err == nil {
		c.out = out
		c.err = c.emit(c.ts, &c.out)
	}
}

// Timestamp is the event time of the current record, and whether it has
// one (sources without eddy.Watermarks give none).
func (c *Context[K, OUT]) Timestamp() (time.Time, bool) {
	if c.ts == noTimestamp {
		return time.Time{}, false
	}
	return time.Unix(0, c.ts).UTC(), true
}

// Watermark is the operator's current event-time watermark: no record with
// an earlier timestamp is expected any more.
func (c *Context[K, OUT]) Watermark() time.Time { return time.Unix(0, c.op.watermark).UTC() }

// TimeDomain says, in OnTimer, which kind of timer fired.
func (c *Context[K, OUT]) TimeDomain() TimeDomain { return c.domain }

// RegisterProcessingTimer asks for OnTimer to be called for the current key
// once the wall clock passes t. Timers are deduplicated per key and time and
// stored in keyed state, so they survive checkpoints and rescaling.
func (c *Context[K, OUT]) RegisterProcessingTimer(t time.Time) {
	c.op.procTimers.register(c.kb, c.kg, t.UnixNano())
}

// RegisterEventTimer asks for OnTimer to be called for the current key once
// the watermark passes t; deduplicated per key and time, stored in keyed
// state.
func (c *Context[K, OUT]) RegisterEventTimer(t time.Time) {
	c.op.eventTimers.register(c.kb, c.kg, t.UnixNano())
}

// DeleteEventTimer removes an event-time timer of the current key.
func (c *Context[K, OUT]) DeleteEventTimer(t time.Time) {
	c.op.eventTimers.delete(c.kb, c.kg, t.UnixNano())
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

// keyedRuntime is the per-subtask runtime of one keyed operator: its state
// backend, timers and watermark.
type keyedRuntime struct {
	uid         string
	backend     *state.Backend
	procTimers  *timerService
	eventTimers *timerService
	watermark   int64
	fireEvent   func(kb []byte, kg int, at int64) error
	fireProc    func(kb []byte, kg int, at int64) error
	end         func() error
	cl          *changelogState // with the changelog state backend
}

// Process runs fn on a keyed stream. Each subtask works on its own shallow
// copy of the struct fn points to.
func Process[K comparable, IN, OUT any](ks *KeyedStream[K, IN], fn KeyedFunc[K, IN, OUT], opts ...OperatorOption) *Stream[OUT] {
	var c opConfig
	for _, o := range opts {
		o.applyOperator(&c)
	}
	env := ks.env
	uid := env.opID("process", c.identity)
	out := newStream[OUT](env, ks.st, "process "+uid)
	ks.consume("process "+uid, func(sc *subtaskCtx) (keyedPush[K, IN], error) {
		next, err := out.build(sc)
		if err != nil {
			return nil, err
		}
		return buildKeyed(sc, uid, fn, next)
	})
	return out
}

// buildKeyed sets up one subtask of a keyed operator: state, Open, restore,
// timers.
func buildKeyed[K comparable, IN, OUT any](sc *subtaskCtx, uid string, fn KeyedFunc[K, IN, OUT], next push[OUT]) (keyedPush[K, IN], error) {
	env := sc.job.env
	ksch, err := serde.SchemaOf[K]()
	if err != nil {
		return nil, &permanentError{fmt.Errorf("eddy: %s: key type: %w", uid, err)}
	}
	kgs, kge := state.KeyGroupRange(env.cfg.maxParallelism, sc.par, sc.subtask)
	backend := state.NewBackend(env.cfg.maxParallelism, kgs, kge, ksch)
	fn = cloneFunc(fn)
	if err := fn.Open(&OpenContext{State: state.NewScope(backend), Subtask: sc.subtask, Parallelism: sc.par}); err != nil {
		var de *state.DeclareError
		return nil, userError(uid, sc.subtask, "Open", err, errors.As(err, &de))
	}
	rt := &keyedRuntime{uid: uid, backend: backend, watermark: math.MinInt64}
	if rt.procTimers, err = newTimerService(backend, "eddy.timers"); err != nil {
		return nil, err
	}
	if rt.eventTimers, err = newTimerService(backend, "eddy.event-timers"); err != nil {
		return nil, err
	}
	began := time.Now()
	restoredParts, restoredLogs, err := sc.restoreKeyed(uid, backend)
	if err != nil {
		return nil, err
	}
	if sc.job.restored != nil {
		// The attempt's recovery time is its slowest subtask's.
		r, took := &sc.job.env.stats.recovery, int64(time.Since(began))
		for cur := r.Load(); took > cur && !r.CompareAndSwap(cur, took); cur = r.Load() {
		}
	}
	if sc.job.dlog != nil {
		// Attached after the restore: replayed changes are already in the
		// checkpoint's log and must not be logged again.
		sc.attachChangelog(rt, restoredParts, restoredLogs)
	}
	rt.procTimers.rebuild()
	rt.eventTimers.rebuild()
	if wm, ok := backend.Watermark(); ok {
		rt.watermark = wm
	}
	ctx := &Context[K, OUT]{emit: next, op: rt}
	if tf, ok := fn.(TimerFunc[K, OUT]); ok {
		keyDec, err := keyDecoder[K]()
		if err != nil {
			return nil, err
		}
		fire := func(domain TimeDomain) func(kb []byte, kg int, at int64) error {
			return func(kb []byte, kg int, at int64) error {
				backend.SetCurrentKey(kb, kg)
				if err := keyDec(kb, &ctx.Key); err != nil {
					return err
				}
				ctx.kb, ctx.kg, ctx.domain = kb, kg, domain
				ctx.ts = at
				if domain == ProcessingTime {
					ctx.ts = noTimestamp
				}
				if err := tf.OnTimer(ctx, time.Unix(0, at).UTC()); err != nil {
					return userError(uid, sc.subtask, "OnTimer", err, false)
				}
				err := ctx.err
				ctx.err = nil
				return err
			}
		}
		rt.fireEvent, rt.fireProc = fire(EventTime), fire(ProcessingTime)
	}
	if ef, ok := fn.(EndFunc); ok {
		rt.end = ef.EndOfInput
	}
	sc.keyed = append(sc.keyed, rt)
	return func(k *K, kb []byte, kg int, ts int64, in *IN) error {
		backend.SetCurrentKey(kb, kg)
		ctx.Key, ctx.kb, ctx.kg, ctx.ts, ctx.domain = *k, kb, kg, ts, EventTime
		if err := fn.Process(ctx, in); err != nil {
			return userError(uid, sc.subtask, "Process", err, false)
		}
		err := ctx.err
		ctx.err = nil
		return err
	}, nil
}

// userError is err returned by method what of operator uid's function:
// ErrUserFunction, and permanent if so marked or if permanent is set.
func userError(uid string, subtask int, what string, err error, permanent bool) error {
	return errs.Kind(errs.UserFunction, fmt.Errorf("eddy: %s subtask %d %s: %w", uid, subtask, what, err), permanent)
}

// cloneFunc gives each subtask its own copy of a keyed function: a shallow
// copy of the struct a pointer refers to, so state handles set in Open are
// per subtask. Other values are shared as they are.
func cloneFunc[F any](fn F) F {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fn
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	return c.Interface().(F)
}

// keyDecoder reverses keyEncoder, for timers. The bytes it is given are a
// view of a timer service's interned key, which never changes, so string
// keys share them instead of copying.
func keyDecoder[K comparable]() (func(b []byte, k *K) error, error) {
	if reflect.TypeFor[K]().Kind() == reflect.String {
		return func(b []byte, k *K) error {
			*(*string)(anyPtr(k)) = unsafe.String(unsafe.SliceData(b), len(b))
			return nil
		}, nil
	}
	codec, err := serde.For[K]()
	if err != nil {
		return nil, err
	}
	return codec.Decode, nil
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
