package eddy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/eddyflow/eddy/internal/intern"
	"github.com/eddyflow/eddy/internal/runtime"
	"github.com/eddyflow/eddy/state"
)

// Windows assigns records to event-time windows: Tumbling, Sliding or
// Session.
type Windows struct {
	kind  windowKind
	size  int64 // ns: window length (tumbling, sliding), gap (session)
	slide int64
	proc  bool // processing time: records are assigned by the wall clock
}

// InProcessingTime makes the windows follow the wall clock instead of
// event time: a record belongs to the windows of the time it reaches the
// operator (the clock is read once per batch of records a subtask takes
// in), and a window fires when the clock passes its end. Records need no
// event time, nothing is ever late, and results depend on when records
// arrive: they are not reproducible the way event-time results are.
// Results carry no event time.
func (w Windows) InProcessingTime() Windows {
	w.proc = true
	return w
}

type windowKind uint8

const (
	tumbling windowKind = iota
	sliding
	session
)

// Tumbling windows are consecutive, non-overlapping, size long, aligned to
// the Unix epoch.
func Tumbling(size time.Duration) Windows {
	return Windows{kind: tumbling, size: int64(size), slide: int64(size)}
}

// Sliding windows are size long and start every slide; a record belongs to
// size/slide of them.
func Sliding(size, slide time.Duration) Windows {
	return Windows{kind: sliding, size: int64(size), slide: int64(slide)}
}

// Session windows group a key's records separated by at most gap: a
// record's session is [t, t+gap), and sessions that overlap or touch merge
// (as Flink's), growing as records arrive.
func Session(gap time.Duration) Windows { return Windows{kind: session, size: int64(gap)} }

// indexable reports whether the window operator keeps its open windows
// in an index by end instead of a timer per key and window (windowFn's
// indexed): tumbling and sliding windows in processing time, and in event
// time without lateness. In processing time lateness means nothing: a
// record's windows all end after its time, so none is ever gone, and a
// window that has fired gets no more records.
func (w Windows) indexable(lateness int64) bool {
	return !noWindowIndex && w.kind != session && (w.proc || lateness == 0)
}

// noWindowIndex makes every window operator built while it is set keep a
// timer per window, as the code before the index did: set only by tests
// (WindowIndexOff), to write checkpoints as older binaries did.
var noWindowIndex bool

func (w Windows) validate() error {
	switch {
	case w.size <= 0:
		return errors.New("eddy: window size (or session gap) must be positive")
	case w.kind == sliding && (w.slide <= 0 || w.slide > w.size):
		return errors.New("eddy: a sliding window's slide must be positive and at most its size")
	}
	return nil
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// Window is the time span of a window result.
type Window struct {
	Start time.Time // inclusive
	End   time.Time // exclusive
}

func windowOf(start, end int64) Window {
	return Window{Start: time.Unix(0, start).UTC(), End: time.Unix(0, end).UTC()}
}

type windowConfig struct {
	identity
	lateness int64
}

// windowFunc is a WindowOption that is a function.
type windowFunc func(*windowConfig)

func (f windowFunc) applyWindow(c *windowConfig) { f(c) }

// AllowedLateness keeps a window's state for d after it fires: records that
// arrive within d update it and fire it again. Later records go to the Late
// stream.
func AllowedLateness(d time.Duration) WindowOption {
	return windowFunc(func(c *windowConfig) { c.lateness = int64(d) })
}

// WindowOp passes operator options (Named, UID) to the window operator;
// they can also be passed to it directly.
func WindowOp(opts ...OperatorOption) WindowOption {
	return windowFunc(func(c *windowConfig) {
		var oc opConfig
		oc.identity = c.identity
		for _, o := range opts {
			o.applyOperator(&oc)
		}
		c.identity = oc.identity
	})
}

// Windowed is the output of a window operator: its results, and the
// records that arrived after their windows were gone. Late need not be
// consumed; unconsumed late records are counted in Stats.LateRecords.
type Windowed[IN, OUT any] struct {
	Results *Stream[OUT]
	Late    *Stream[IN]
}

// Aggregator folds a window's records incrementally.
type Aggregator[K comparable, IN, ACC, OUT any] struct {
	// Add folds one record into the accumulator (the zero ACC for a new
	// window).
	Add func(acc ACC, in *IN) ACC
	// Merge combines two accumulators; required for Session windows.
	// With a Merge, event-time sliding windows without allowed lateness
	// whose size is a multiple of their slide keep one accumulator per
	// slide (a pane) and merge a window's panes, in time order, when it
	// fires: a record updates one pane instead of size/slide windows. They
	// do so only if ACC is a plain value (numbers, strings, arrays and
	// structs of them), which Merge cannot change through a shared
	// reference. A checkpoint of panes restores only into windows that
	// keep panes.
	Merge func(a, b ACC) ACC
	// Result turns a window's accumulator into its output.
	Result func(key K, w Window, acc ACC) OUT
}

// winState is one window's stored state: its end, and an accumulator or the
// records themselves.
type winState[ACC any] struct {
	End int64 `proto:"1"`
	Acc ACC   `proto:"2"`
}

// span is a stored session's start and end.
type span struct{ start, end int64 }

// windowFn is the keyed function behind every window operator. A window is
// keyed by its start in a Map state; a timer at end-1 fires it and one at
// end-1+lateness removes it, except for tumbling and sliding windows
// without lateness (indexed), which the watermark or the processing time
// fires from an index of open windows by end.
type windowFn[K comparable, IN, ACC, OUT any] struct {
	w        Windows
	lateness int64
	add      func(acc ACC, in *IN) ACC
	merge    func(a, b ACC) ACC
	result   func(key K, w Window, acc ACC, emit func(OUT)) error
	late     runtime.Push[IN]
	lateCnt  *int64
	dropCnt  *int64 // late records with no Late consumer
	st       *state.Map[int64, winState[ACC]]
	emit     func(OUT) // ctx.Emit, made once
	fireBuf  []int64   // scratch of OnTimer
	mergeBuf []span    // scratch of addSession
	dropBuf  []int64   // scratch of OnTimer
	dueBuf   []int64   // scratch of OnTimer

	// Tumbling and sliding windows without allowed lateness (indexed)
	// register no timers: the function keeps the keys of its open
	// windows by window end, and fires those the watermark, or the
	// processing time, has passed when it advances (fireIndex). The index
	// is rebuilt from the windows' state after a restore, so checkpoints
	// hold nothing more.
	indexed bool
	byEnd   map[int64][]openWindow[K] // the keys with a window ending at each end
	ends    []int64                   // byEnd's ends, ascending
	spare   [][]openWindow[K]         // emptied lists of byEnd, for reuse
	open    int                       // entries in byEnd
	keys    intern.Table              // interned bytes of non-integer keys, shared by their windows' entries

	// Paned (panes.go): indexed event-time sliding windows of an
	// Aggregator with a Merge over plain-value accumulators keep one
	// accumulator per pane, a slide long, and merge a window's panes
	// when it fires: a record updates one pane instead of size/slide
	// windows.
	paneable bool                             // the aggregation allows panes (AggregateWindows with a Merge)
	paned    bool                             // panes are on
	panes    *state.Map[int64, winState[ACC]] // by pane start; End is the pane's end
	legacy   int                              // restored windows (a checkpoint written without panes) not fired yet
	paneBuf  []int64                          // scratch: a key's pane starts
	intKey   bool                             // K is an integer: openWindow holds it, not its bytes
	enc      func(dst []byte, k *K) []byte
	dec      func(b []byte, k *K) error
	kbuf     []byte
}

// openWindow is a key with an open window, in windowFn's index: the key
// itself for an integer key (its bytes are written again when it fires),
// else a copy of its bytes.
type openWindow[K comparable] struct {
	key K
	kb  string
	kg  int
}

func (f *windowFn[K, IN, ACC, OUT]) Open(ctx *OpenContext) error {
	var err error
	if f.st, err = state.NewMap[int64, winState[ACC]](ctx.State, "windows"); err != nil {
		return err
	}
	if f.w.kind == sliding {
		// Declared with panes on or off: a checkpoint's panes are never
		// skipped as an unknown state (startIndex refuses them if panes
		// are off).
		f.panes, err = state.NewMap[int64, winState[ACC]](ctx.State, "panes")
	}
	return err
}

// register sets a timer at t in the windows' time domain.
func (f *windowFn[K, IN, ACC, OUT]) register(ctx *Context[K, OUT], t int64) {
	if f.w.proc {
		ctx.RegisterProcessingTimer(time.Unix(0, t))
		return
	}
	ctx.RegisterEventTimer(time.Unix(0, t))
}

func (f *windowFn[K, IN, ACC, OUT]) Process(ctx *Context[K, OUT], in *IN) error {
	ts := ctx.ts
	if f.w.proc {
		// The record's time is when it arrives (its batch, read once
		// per batch); the clock a moment before it, so that its windows
		// are open.
		ts = ctx.op.ProcessingTime()
	} else if ts == runtime.NoTimestamp {
		return errors.New("eddy: a window operator got a record without event time; give its source eddy.Watermarks")
	}
	if f.emit == nil {
		f.emit = ctx.Emit
	}
	wm := ctx.op.Watermark()
	if f.w.proc {
		wm = ts - 1
	}
	assigned := false
	if f.w.kind == session {
		if !f.gone(ts+f.w.size, wm) {
			assigned = true
			if err := f.addSession(ctx, ts, ts+f.w.size, in); err != nil {
				return err
			}
		}
	} else if f.paned {
		assigned = f.addToPane(ctx, ts, wm, in)
	} else {
		last := ts - floorMod(ts, f.w.slide)
		for start := last; start > ts-f.w.size; start -= f.w.slide {
			end := start + f.w.size
			if f.gone(end, wm) {
				continue
			}
			assigned = true
			ws, ok := f.st.Get(start)
			if !ok {
				ws.End = end
				if f.indexed {
					f.addOpen(ctx.Key, ctx.kb, ctx.kg, end)
				} else {
					f.registerTimers(ctx, end, wm)
				}
			}
			ws.Acc = f.add(ws.Acc, in)
			f.st.Put(start, ws)
			if end-1 <= wm {
				// Late but within the allowed lateness: fire again now.
				if err := f.fire(ctx, start, ws); err != nil {
					return err
				}
			}
		}
	}
	if !assigned {
		*f.lateCnt++
		if f.late != nil {
			return f.late(ts, in)
		}
		*f.dropCnt++
	}
	return nil
}

// addOpen adds the key of a new window ending at end to the index. kb is
// not kept.
func (f *windowFn[K, IN, ACC, OUT]) addOpen(key K, kb []byte, kg int, end int64) {
	ws, ok := f.byEnd[end]
	if !ok {
		i, _ := slices.BinarySearch(f.ends, end)
		f.ends = slices.Insert(f.ends, i, end)
		if n := len(f.spare); n > 0 {
			ws, f.spare = f.spare[n-1], f.spare[:n-1]
		}
	}
	w := openWindow[K]{kg: kg}
	if f.intKey {
		w.key = key
	} else {
		w.kb = f.intern(kb)
	}
	f.byEnd[end] = append(ws, w)
	f.open++
}

// intern returns a string equal to kb that the index keeps: a key's
// windows share one copy, so a new window of a known key allocates
// nothing (a copy per window was 95% of the allocations of sliding
// windows over string keys).
func (f *windowFn[K, IN, ACC, OUT]) intern(kb []byte) string {
	return f.keys.Intern(kb, f.open, f.openKeys)
}

// openKeys yields the key of every open window in the index.
func (f *windowFn[K, IN, ACC, OUT]) openKeys(yield func(string) bool) {
	for _, ws := range f.byEnd {
		for _, w := range ws {
			if !yield(w.kb) {
				return
			}
		}
	}
}

// startIndex sets up the index of open windows, rebuilt from the restored
// state, for tumbling and sliding windows without allowed lateness; others
// fire by timers.
func (f *windowFn[K, IN, ACC, OUT]) startIndex(ctx *Context[K, OUT], b *state.Backend, userErr func(error) error) (timeIndex, error) {
	if f.panes != nil && !f.paned {
		restored := false
		f.panes.Range(func([]byte, int, map[int64]winState[ACC]) bool { restored = true; return false })
		if restored {
			return timeIndex{}, Permanent(errors.New("eddy: the restored checkpoint holds sliding-window panes, written by an operator with an Aggregator.Merge over a plain-value accumulator and no allowed lateness; this one keeps whole windows: restore it into the operator as it was"))
		}
	}
	if !f.indexed {
		return timeIndex{}, nil
	}
	f.intKey = runtime.IntegerKey[K]()
	var err error
	if f.enc, err = runtime.KeyEncoder[K](); err != nil {
		return timeIndex{}, err
	}
	if f.dec, err = runtime.KeyDecoder[K](); err != nil {
		return timeIndex{}, err
	}
	f.byEnd, f.keys = map[int64][]openWindow[K]{}, intern.Table{}
	var key K
	var whole map[string][]int64 // with panes: the ends of each key's restored whole windows
	f.st.Range(func(kb []byte, kg int, m map[int64]winState[ACC]) bool {
		if f.intKey {
			if err = f.dec(kb, &key); err != nil {
				return false
			}
		}
		for _, ws := range m {
			f.addOpen(key, kb, kg, ws.End)
			if f.paned {
				// A checkpoint written without panes: its windows fire
				// whole, merged with the panes added after the restore.
				if whole == nil {
					whole = map[string][]int64{}
				}
				whole[string(kb)] = append(whole[string(kb)], ws.End)
				f.legacy++
			}
		}
		return true
	})
	if err == nil && f.paned {
		err = f.indexPanes(ctx.op.Watermark(), whole)
	}
	if err != nil {
		return timeIndex{}, fmt.Errorf("eddy: a restored window's key: %w", err)
	}
	if err := b.Err(); err != nil {
		return timeIndex{}, err
	}
	ix := timeIndex{domain: EventTime, fire: func(t int64) error { return f.fireIndex(ctx, b, t, userErr) }}
	if f.w.proc {
		ix.domain, ix.next = ProcessingTime, f.nextDue
	}
	return ix, nil
}

// nextDue is when the index's earliest window is due (its end-1), 0 if the
// index is empty.
func (f *windowFn[K, IN, ACC, OUT]) nextDue() int64 {
	if len(f.ends) == 0 {
		return 0
	}
	return f.ends[0] - 1
}

// fireIndex fires, in order of their ends, the indexed windows that time t
// (the watermark, or the processing time) has passed, each with its key
// current, as a timer at end-1 would, and removes them. An event-time
// window fires with its last instant as the event time, a processing-time
// one with none.
func (f *windowFn[K, IN, ACC, OUT]) fireIndex(ctx *Context[K, OUT], b *state.Backend, t int64, userErr func(error) error) error {
	domain := EventTime
	if f.w.proc {
		domain = ProcessingTime
	}
	for len(f.ends) > 0 && f.ends[0]-1 <= t {
		end := f.ends[0]
		f.ends = slices.Delete(f.ends, 0, 1)
		open := f.byEnd[end]
		delete(f.byEnd, end)
		f.open -= len(open)
		start := end - f.w.size
		for i := range open {
			w := &open[i]
			var kb []byte
			if f.intKey {
				f.kbuf = f.enc(f.kbuf[:0], &w.key)
				kb = f.kbuf
				ctx.Key = w.key
			} else {
				kb = unsafe.Slice(unsafe.StringData(w.kb), len(w.kb)) // never written
				if err := f.dec(kb, &ctx.Key); err != nil {
					return err
				}
			}
			b.SetCurrentKey(kb, w.kg)
			ts := end - 1
			if f.w.proc {
				ts = runtime.NoTimestamp
			}
			ctx.kb, ctx.kg, ctx.domain, ctx.ts = kb, w.kg, domain, ts
			b.SetRecordTime(ts)
			var err error
			if f.paned {
				err = f.firePanes(ctx, start, end)
			} else {
				ws, ok := f.st.Get(start)
				if !ok || ws.End != end {
					continue
				}
				err = f.fire(ctx, start, ws)
				f.st.Delete(start)
			}
			if err != nil {
				return userErr(err)
			}
			if err := ctx.err; err != nil {
				ctx.err = nil
				return err
			}
		}
		clear(open)
		f.spare = append(f.spare, open[:0])
	}
	return nil
}

// registerTimers sets a new window's timers: firing at end-1 unless that
// has passed (the caller fires it at once), cleanup at end-1+lateness.
func (f *windowFn[K, IN, ACC, OUT]) registerTimers(ctx *Context[K, OUT], end, wm int64) {
	if end-1 > wm {
		f.register(ctx, end-1)
	}
	if f.lateness > 0 {
		f.register(ctx, end-1+f.lateness)
	}
}

// gone reports whether a window ending at end has been cleaned up.
func (f *windowFn[K, IN, ACC, OUT]) gone(end, wm int64) bool {
	return wm != math.MinInt64 && end-1+f.lateness <= wm
}

// addSession adds a record's session [start, end) and merges it with every
// stored session it overlaps or touches (Flink's TimeWindow.intersects: a
// session ending where another starts is one session).
//
// The merged session is written before the absorbed ones are deleted: a
// session extended by a record (the common case: same start, later end)
// then overwrites its entry, and the key's window map never empties in
// between, which would drop it and allocate it anew.
//
// Session timers are moved lazily (see sessionTimers): a merged session
// needs a timer of its own only if none of the sessions it absorbed had one
// due by its next action, so a record that extends a session costs no
// timer at all.
func (f *windowFn[K, IN, ACC, OUT]) addSession(ctx *Context[K, OUT], start, end int64, in *IN) error {
	var acc ACC
	acc = f.add(acc, in)
	wm := start - 1 // processing time: the record's time, the clock just before it
	if !f.w.proc {
		wm = ctx.op.Watermark()
	}
	absorbed := f.mergeBuf[:0] // the stored sessions merged in
	defer func() { f.mergeBuf = absorbed[:0] }()
	// One pass absorbs what overlaps the session as it grows; another is
	// needed only if it grew and stored sessions are left that an earlier
	// part of the pass skipped.
	for stored := f.st.Len(); len(absorbed) < stored; {
		found := false
		for s, ws := range f.st.All() {
			if s <= end && start <= ws.End && !slices.ContainsFunc(absorbed, func(a span) bool { return a.start == s }) {
				// Overlap or touch: absorb the stored session.
				absorbed = append(absorbed, span{s, ws.End})
				start, end = min(start, s), max(end, ws.End)
				acc = f.merge(ws.Acc, acc)
				found = true
			}
		}
		if !found {
			break
		}
	}
	ws := winState[ACC]{End: end, Acc: acc}
	f.st.Put(start, ws)
	due := f.nextAction(end, wm)
	covered := false // an absorbed session's timer comes by due
	for _, a := range absorbed {
		if a.start != start {
			f.st.Delete(a.start)
		}
		covered = covered || f.nextAction(a.end, wm) <= due
	}
	if !covered {
		f.register(ctx, due)
	}
	if end-1 <= wm {
		return f.fire(ctx, start, ws)
	}
	return nil
}

// nextAction is when a stored session ending at end next needs its timer,
// at clock wm: its firing at end-1, or once that has passed its cleanup at
// end-1+lateness.
//
// Session timers are kept lazily. The invariant: every stored session has
// a timer at or before its next action. A new session registers one there;
// a merged session inherits the timers of the sessions it absorbed, whose
// next actions come no later than its own, unless an absorbed one had
// already fired and the merged one has not (addSession registers one
// then); and a session timer that fires re-registers every stored session
// of the key at its next action (OnTimer), which is a no-op for a session
// whose timer is there already. Timers are never deleted: a stale one
// finds no session to fire and moves the key's sessions' timers on. With
// timers deleted and registered on every extension (Flink's way), a
// session cost a timer registration, a deletion and a dead queue entry per
// record.
func (f *windowFn[K, IN, ACC, OUT]) nextAction(end, wm int64) int64 {
	if end-1 > wm {
		return end - 1
	}
	return end - 1 + f.lateness
}

// fire emits a window's result with the window's last instant as its event
// time.
func (f *windowFn[K, IN, ACC, OUT]) fire(ctx *Context[K, OUT], start int64, ws winState[ACC]) error {
	saved := ctx.ts
	ctx.ts = ws.End - 1
	if f.w.proc {
		ctx.ts = runtime.NoTimestamp
	}
	if f.emit == nil {
		f.emit = ctx.Emit
	}
	err := f.result(ctx.Key, windowOf(start, ws.End), ws.Acc, f.emit)
	ctx.ts = saved
	return err
}

func (f *windowFn[K, IN, ACC, OUT]) OnTimer(ctx *Context[K, OUT], at time.Time) error {
	if (ctx.TimeDomain() == ProcessingTime) != f.w.proc {
		return nil
	}
	t := at.UnixNano()
	if f.w.kind != session {
		// A tumbling or sliding window is found by its start, which its
		// end gives: no walk over the key's open windows, however many
		// (their number grows with how far event time lags the records).
		s := t + 1 - f.w.size // the window this timer fires
		ws, ok := f.st.Get(s)
		if ok && ws.End-1 == t {
			if err := f.fire(ctx, s, ws); err != nil {
				return err
			}
		}
		if f.lateness != 0 {
			s = t + 1 - f.lateness - f.w.size // the window it cleans up
			ws, ok = f.st.Get(s)
		}
		if ok && ws.End-1+f.lateness == t {
			f.st.Delete(s)
		}
		return nil
	}
	fire, drop, due := f.fireBuf[:0], f.dropBuf[:0], f.dueBuf[:0]
	defer func() { f.fireBuf, f.dropBuf, f.dueBuf = fire[:0], drop[:0], due[:0] }()
	for s, ws := range f.st.All() {
		if ws.End-1 == t {
			fire = append(fire, s)
		}
		if ws.End-1+f.lateness <= t {
			drop = append(drop, s)
		} else {
			// The session's timer may have been this one (see
			// nextAction): it gets one at its next action.
			due = append(due, f.nextAction(ws.End, t))
		}
	}
	slices.Sort(fire)
	for _, s := range fire {
		ws, _ := f.st.Get(s)
		if err := f.fire(ctx, s, ws); err != nil {
			return err
		}
	}
	for _, s := range drop {
		f.st.Delete(s)
	}
	for _, d := range due {
		f.register(ctx, d)
	}
	return nil
}

// windowOperator wires a windowFn into a keyed stream with its two outputs.
func windowOperator[K comparable, IN, ACC, OUT any](ks *KeyedStream[K, IN], w Windows, opts []WindowOption,
	mk func() *windowFn[K, IN, ACC, OUT]) Windowed[IN, OUT] {
	var cfg windowConfig
	for _, o := range opts {
		o.applyWindow(&cfg)
	}
	env := ks.env
	if err := w.validate(); err != nil {
		env.fail(err)
	}
	if cfg.lateness < 0 {
		env.fail(errors.New("eddy: allowed lateness must not be negative"))
	}
	uid := env.opID("window", cfg.identity, fmt.Sprintf("%s, %s -> %s", typeName[K](), typeName[IN](), typeName[OUT]()))
	results := newStream[OUT](env, []*runtime.Stage{ks.st}, "window "+uid)
	late := newStream[IN](env, []*runtime.Stage{ks.st}, "late records of window "+uid)
	late.info.consumed = true // optional
	indexed := w.indexable(cfg.lateness)
	panes := indexed && w.kind == sliding && !w.proc && w.size%w.slide == 0 && plainValue[ACC]() // if the aggregation allows them
	ks.consume("window "+uid, func(sc *runtime.Subtask) (runtime.KeyedPush[K, IN], error) {
		next, err := results.build(sc)
		if err != nil {
			return nil, err
		}
		fn := mk()
		fn.w, fn.lateness = w, cfg.lateness
		fn.indexed = indexed
		fn.paned = fn.paneable && panes
		fn.lateCnt, fn.dropCnt = sc.LateRecords(), sc.DroppedRecords()
		if len(late.next) > 0 {
			if fn.late, err = late.build(sc); err != nil {
				return nil, err
			}
		}
		if w.kind == session && fn.merge == nil {
			return nil, Permanent(fmt.Errorf("eddy: %s: session windows need Aggregator.Merge", uid))
		}
		return buildKeyed[K, IN, OUT](sc, uid, fn, next)
	})
	return Windowed[IN, OUT]{Results: results, Late: late}
}

// AggregateWindows folds each window of each key incrementally with agg and
// emits agg.Result when the watermark passes the window's end.
func AggregateWindows[K comparable, IN, ACC, OUT any](ks *KeyedStream[K, IN], w Windows, agg Aggregator[K, IN, ACC, OUT], opts ...WindowOption) Windowed[IN, OUT] {
	return windowOperator(ks, w, opts, func() *windowFn[K, IN, ACC, OUT] {
		return &windowFn[K, IN, ACC, OUT]{add: agg.Add, merge: agg.Merge, paneable: agg.Merge != nil,
			result: func(k K, win Window, acc ACC, emit func(OUT)) error {
				emit(agg.Result(k, win, acc))
				return nil
			}}
	})
}

// reduceAcc is the accumulator of ReduceWindows.
type reduceAcc[T any] struct {
	Set   bool `proto:"1"`
	Value T    `proto:"2"`
}

// ReduceWindows folds each window of each key with reduce and emits the
// result when the watermark passes the window's end.
func ReduceWindows[K comparable, T any](ks *KeyedStream[K, T], w Windows, reduce func(a, b T) T, opts ...WindowOption) Windowed[T, T] {
	merge := func(a, b reduceAcc[T]) reduceAcc[T] {
		switch {
		case !a.Set:
			return b
		case !b.Set:
			return a
		}
		return reduceAcc[T]{Set: true, Value: reduce(a.Value, b.Value)}
	}
	return windowOperator(ks, w, opts, func() *windowFn[K, T, reduceAcc[T], T] {
		return &windowFn[K, T, reduceAcc[T], T]{
			add:   func(acc reduceAcc[T], in *T) reduceAcc[T] { return merge(acc, reduceAcc[T]{Set: true, Value: *in}) },
			merge: merge,
			result: func(_ K, _ Window, acc reduceAcc[T], emit func(T)) error {
				if acc.Set {
					emit(acc.Value)
				}
				return nil
			},
		}
	})
}

// elems is the accumulator of ProcessWindows: the window's records.
type elems[T any] struct {
	Items []T `proto:"1"`
}

// ProcessWindows hands fn the full contents of each window of each key when
// the watermark passes its end; fn emits any number of outputs.
func ProcessWindows[K comparable, IN, OUT any](ks *KeyedStream[K, IN], w Windows,
	fn func(key K, w Window, records []IN, emit func(OUT)) error, opts ...WindowOption) Windowed[IN, OUT] {
	return windowOperator(ks, w, opts, func() *windowFn[K, IN, elems[IN], OUT] {
		return &windowFn[K, IN, elems[IN], OUT]{
			add: func(acc elems[IN], in *IN) elems[IN] {
				acc.Items = append(acc.Items, *in)
				return acc
			},
			merge: func(a, b elems[IN]) elems[IN] {
				return elems[IN]{Items: append(append([]IN(nil), a.Items...), b.Items...)}
			},
			result: func(k K, win Window, acc elems[IN], emit func(OUT)) error {
				return fn(k, win, acc.Items, emit)
			},
		}
	})
}
