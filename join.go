package eddy

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/eddyflow/eddy/internal/runtime"
	"github.com/eddyflow/eddy/state"
)

// joinBuf holds the records of one side of a join that share a timestamp.
type joinBuf[T any] struct {
	Recs []T `proto:"1"`
}

// sortedKeys appends the current key's map keys to dst[:0] in order, so
// that what a join emits does not depend on map iteration order. Callers
// pass a scratch slice they keep: no allocation per record.
func sortedKeys[V any](dst []int64, m *state.Map[int64, V]) []int64 {
	ks := dst[:0]
	for k := range m.All() {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// errNoEventTime is the error of a join that needs event time given a
// record without one.
func errNoEventTime(what string) error {
	return Permanent(fmt.Errorf("eddy: %s joins on event time, and a record has none: give its source eddy.Watermarks", what))
}

// IntervalJoin joins, for equal keys, each record a of the first input
// with each record b of the second whose event time lies within
// [a+lower, a+upper] (both inclusive), and emits join(key, a, b) at the
// later of the two event times.
//
// Late data: a record older than the operator's watermark (the least of
// both inputs') when it arrives is dropped and counted in
// Stats.LateRecords; with sources whose watermarks bound their disorder,
// the result is therefore deterministic. Each record is kept in state
// until the watermark passes the last time a partner could have, so state
// stays bounded by the interval and the disorder.
func IntervalJoin[K comparable, A, B, OUT any](cs *ConnectedStreams[K, A, B], lower, upper time.Duration, join func(key K, a *A, b *B) OUT, opts ...OperatorOption) *Stream[OUT] {
	if lower > upper {
		cs.a.env.fail(fmt.Errorf("eddy: IntervalJoin: lower bound %v is after upper bound %v", lower, upper))
	}
	return CoProcess[K, A, B, OUT](cs, &intervalJoin[K, A, B, OUT]{lower: int64(lower), upper: int64(upper), join: join}, opts...)
}

type intervalJoin[K comparable, A, B, OUT any] struct {
	lower, upper int64
	join         func(key K, a *A, b *B) OUT
	left         *state.Map[int64, joinBuf[A]]
	right        *state.Map[int64, joinBuf[B]]
	late         *int64
	keys         []int64 // scratch of sortedKeys
}

func (j *intervalJoin[K, A, B, OUT]) Open(ctx *OpenContext) error {
	var err error
	if j.left, err = state.NewMap[int64, joinBuf[A]](ctx.State, "left"); err != nil {
		return err
	}
	j.right, err = state.NewMap[int64, joinBuf[B]](ctx.State, "right")
	j.late = ctx.late
	return err
}

// arrived checks a record's event time: false if it is late (counted).
func (j *intervalJoin[K, A, B, OUT]) arrived(ctx *Context[K, OUT]) (bool, error) {
	if ctx.ts == runtime.NoTimestamp {
		return false, errNoEventTime("IntervalJoin")
	}
	if ctx.ts < ctx.op.Watermark() {
		*j.late++
		return false, nil
	}
	return true, nil
}

func (j *intervalJoin[K, A, B, OUT]) Process1(ctx *Context[K, OUT], a *A) error {
	if ok, err := j.arrived(ctx); !ok {
		return err
	}
	ts := ctx.ts
	addAt(j.left, ts, a)
	j.keys = within(j.keys, j.right, satAdd(ts, j.lower), satAdd(ts, j.upper))
	for _, rts := range j.keys {
		rb, _ := j.right.Get(rts)
		for i := range rb.Recs {
			ctx.emitAt(max(ts, rts), j.join(ctx.Key, a, &rb.Recs[i]))
		}
	}
	// No second-input record at or after the watermark can match a once
	// it passes a+upper.
	ctx.op.RegisterTimer(true, ctx.kb, ctx.kg, satAdd(ts, j.upper)+1)
	return ctx.err
}

func (j *intervalJoin[K, A, B, OUT]) Process2(ctx *Context[K, OUT], b *B) error {
	if ok, err := j.arrived(ctx); !ok {
		return err
	}
	ts := ctx.ts
	addAt(j.right, ts, b)
	// b meets the first input's records at times in [b-upper, b-lower].
	j.keys = within(j.keys, j.left, satAdd(ts, -j.upper), satAdd(ts, -j.lower))
	for _, lts := range j.keys {
		lb, _ := j.left.Get(lts)
		for i := range lb.Recs {
			ctx.emitAt(max(ts, lts), j.join(ctx.Key, &lb.Recs[i], b))
		}
	}
	ctx.op.RegisterTimer(true, ctx.kb, ctx.kg, satAdd(ts, -j.lower)+1)
	return ctx.err
}

// addAt adds rec to the current key's records at time ts.
func addAt[T any](m *state.Map[int64, joinBuf[T]], ts int64, rec *T) {
	buf, _ := m.Get(ts)
	buf.Recs = append(buf.Recs, *rec)
	m.Put(ts, buf)
}

// within is sortedKeys of m (into dst) kept to the times in [lo, hi].
func within[V any](dst []int64, m *state.Map[int64, V], lo, hi int64) []int64 {
	ks := sortedKeys(dst, m)
	n := 0
	for _, k := range ks {
		if k >= lo && k <= hi {
			ks[n] = k
			n++
		}
	}
	return ks[:n]
}

// OnTimer drops the records no later record can match any more.
func (j *intervalJoin[K, A, B, OUT]) OnTimer(ctx *Context[K, OUT], at time.Time) error {
	t := at.UnixNano()
	for lts := range j.left.All() {
		if satAdd(lts, j.upper) < t {
			j.left.Delete(lts)
		}
	}
	for rts := range j.right.All() {
		if satAdd(rts, -j.lower) < t {
			j.right.Delete(rts)
		}
	}
	return nil
}

// satAdd is a+b, saturating at the int64 bounds.
func satAdd(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64 - 1
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

// JoinTable joins each record of the first input with the value of the
// second, a table (a changelog holding the latest value per key, as a
// Kafka Streams KTable), for the same key, and emits join(key, a, t);
// records without a table value are not emitted (LeftJoinTable emits them
// with t nil).
//
// With event time (sources with eddy.Watermarks) the join is versioned
// and deterministic: a record at time T meets the table value with the
// greatest time not after T (of equal times, the last to arrive), and is
// emitted once the watermark passes T; a record or table update older than
// the watermark when it arrives is late, dropped and counted in
// Stats.LateRecords. Table versions no record can meet any more are
// dropped as the watermark advances. Without event time, a record meets
// the latest table value that has arrived, at once (arrival order between
// the inputs then decides).
func JoinTable[K comparable, A, T, OUT any](cs *ConnectedStreams[K, A, T], join func(key K, a *A, t *T) OUT, opts ...OperatorOption) *Stream[OUT] {
	return CoProcess[K, A, T, OUT](cs, &tableJoin[K, A, T, OUT]{join: join}, opts...)
}

// LeftJoinTable is JoinTable that also emits the records that meet no
// table value, with t nil.
func LeftJoinTable[K comparable, A, T, OUT any](cs *ConnectedStreams[K, A, T], join func(key K, a *A, t *T) OUT, opts ...OperatorOption) *Stream[OUT] {
	return CoProcess[K, A, T, OUT](cs, &tableJoin[K, A, T, OUT]{join: join, left: true}, opts...)
}

// latestVersion is where the table's value is kept without event time.
const latestVersion = math.MinInt64

type tableJoin[K comparable, A, T, OUT any] struct {
	join     func(key K, a *A, t *T) OUT
	left     bool
	versions *state.Map[int64, T]          // the table's values by event time
	pending  *state.Map[int64, joinBuf[A]] // records waiting for the watermark
	late     *int64
	vkeys    []int64 // scratch of sortedKeys: versions
	pkeys    []int64 // and pending times
}

func (j *tableJoin[K, A, T, OUT]) Open(ctx *OpenContext) error {
	var err error
	if j.versions, err = state.NewMap[int64, T](ctx.State, "table"); err != nil {
		return err
	}
	j.pending, err = state.NewMap[int64, joinBuf[A]](ctx.State, "pending")
	j.late = ctx.late
	return err
}

func (j *tableJoin[K, A, T, OUT]) Process1(ctx *Context[K, OUT], a *A) error {
	ts := ctx.ts
	if ts == runtime.NoTimestamp {
		t, ok := j.versions.Get(latestVersion)
		j.emit(ctx, ts, a, &t, ok)
		return ctx.err
	}
	if ts < ctx.op.Watermark() {
		*j.late++
		return nil
	}
	buf, _ := j.pending.Get(ts)
	buf.Recs = append(buf.Recs, *a)
	j.pending.Put(ts, buf)
	// Once the watermark passes ts, every table value at or before it
	// that is not late has arrived.
	ctx.op.RegisterTimer(true, ctx.kb, ctx.kg, ts+1)
	return nil
}

func (j *tableJoin[K, A, T, OUT]) Process2(ctx *Context[K, OUT], t *T) error {
	ts := ctx.ts
	if ts == runtime.NoTimestamp {
		j.versions.Put(latestVersion, *t)
		return nil
	}
	if ts < ctx.op.Watermark() {
		*j.late++
		return nil
	}
	j.versions.Put(ts, *t)
	// Older versions are dropped once the watermark passes this one.
	ctx.op.RegisterTimer(true, ctx.kb, ctx.kg, ts+1)
	return nil
}

func (j *tableJoin[K, A, T, OUT]) emit(ctx *Context[K, OUT], ts int64, a *A, t *T, found bool) {
	switch {
	case found:
		ctx.emitAt(ts, j.join(ctx.Key, a, t))
	case j.left:
		ctx.emitAt(ts, j.join(ctx.Key, a, nil))
	}
}

// OnTimer emits the records the watermark has passed, each with the table
// version of its time, then drops the versions nothing can meet any more.
func (j *tableJoin[K, A, T, OUT]) OnTimer(ctx *Context[K, OUT], at time.Time) error {
	wm := at.UnixNano() - 1 // every record at or before wm is complete
	j.vkeys = sortedKeys(j.vkeys, j.versions)
	j.pkeys = sortedKeys(j.pkeys, j.pending)
	versions := j.vkeys
	for _, ts := range j.pkeys {
		if ts > wm {
			break
		}
		// The version with the greatest time not after ts.
		i, found := slices.BinarySearch(versions, ts)
		if !found {
			i--
		}
		var t T
		ok := i >= 0
		if ok {
			t, _ = j.versions.Get(versions[i])
		}
		buf, _ := j.pending.Get(ts)
		for k := range buf.Recs {
			j.emit(ctx, ts, &buf.Recs[k], &t, ok)
		}
		j.pending.Delete(ts)
	}
	// Keep the newest version at or before wm (later records meet it)
	// and every later one.
	i, found := slices.BinarySearch(versions, wm)
	if !found {
		i--
	}
	for k := 0; k < i; k++ {
		j.versions.Delete(versions[k])
	}
	return ctx.err
}

// either is one record of a two-input window operator: of the first input
// (A) or of the second (B).
type either[A, B any] struct {
	A *A
	B *B
}

// coAcc is a two-input window's contents.
type coAcc[A, B any] struct {
	As []A `proto:"1"`
	Bs []B `proto:"2"`
}

// coWindow is the CoKeyedFunc behind WindowJoin and CoGroupWindows: the
// one-input window operator over either input. It holds the window
// function by value, so each subtask's copy is its own.
type coWindow[K comparable, A, B, OUT any] struct {
	windowFn[K, either[A, B], coAcc[A, B], OUT]
	in either[A, B] // scratch: a record handed to the window function
}

func (c *coWindow[K, A, B, OUT]) Open(ctx *OpenContext) error {
	c.lateCnt, c.dropCnt = ctx.late, ctx.dropped
	return c.windowFn.Open(ctx)
}

func (c *coWindow[K, A, B, OUT]) Process1(ctx *Context[K, OUT], a *A) error {
	c.in = either[A, B]{A: a}
	return c.Process(ctx, &c.in)
}

func (c *coWindow[K, A, B, OUT]) Process2(ctx *Context[K, OUT], b *B) error {
	c.in = either[A, B]{B: b}
	return c.Process(ctx, &c.in)
}

// CoGroupWindows hands fn, for each window of each key, the records of
// both inputs that fall in it (either list may be empty) when the window
// fires: Flink's window coGroup. Windows are those of a one-input window
// operator (Tumbling, Sliding, Session, in event or processing time, with
// AllowedLateness); records too late for any window are dropped and
// counted in Stats.LateRecords.
func CoGroupWindows[K comparable, A, B, OUT any](cs *ConnectedStreams[K, A, B], w Windows,
	fn func(key K, w Window, as []A, bs []B, emit func(OUT)) error, opts ...WindowOption) *Stream[OUT] {
	var cfg windowConfig
	for _, o := range opts {
		o.applyWindow(&cfg)
	}
	env := cs.a.env
	if err := w.validate(); err != nil {
		env.fail(err)
	}
	if cfg.lateness < 0 {
		env.fail(fmt.Errorf("eddy: allowed lateness must not be negative"))
	}
	cw := &coWindow[K, A, B, OUT]{}
	cw.w, cw.lateness = w, cfg.lateness
	cw.indexed = w.indexable(cfg.lateness)
	cw.add = func(acc coAcc[A, B], in *either[A, B]) coAcc[A, B] {
		if in.A != nil {
			acc.As = append(acc.As, *in.A)
		} else {
			acc.Bs = append(acc.Bs, *in.B)
		}
		return acc
	}
	// Merging sessions: x is a stored session being absorbed, which is
	// replaced or deleted right after, so its lists grow in place.
	cw.merge = func(x, y coAcc[A, B]) coAcc[A, B] {
		return coAcc[A, B]{As: append(x.As, y.As...), Bs: append(x.Bs, y.Bs...)}
	}
	cw.result = func(k K, win Window, acc coAcc[A, B], emit func(OUT)) error { return fn(k, win, acc.As, acc.Bs, emit) }
	return coProcess[K, A, B, OUT](cs, "window", cfg.identity, cw)
}

// WindowJoin joins, for equal keys, every record of the first input with
// every record of the second that falls in the same window, and emits
// join(key, window, a, b) for each pair when the window fires (Flink's
// window join: an inner join per window). See CoGroupWindows for windows
// and late records.
func WindowJoin[K comparable, A, B, OUT any](cs *ConnectedStreams[K, A, B], w Windows,
	join func(key K, w Window, a *A, b *B) OUT, opts ...WindowOption) *Stream[OUT] {
	return CoGroupWindows(cs, w, func(k K, win Window, as []A, bs []B, emit func(OUT)) error {
		for i := range as {
			for j := range bs {
				emit(join(k, win, &as[i], &bs[j]))
			}
		}
		return nil
	}, opts...)
}
