package eddy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/eddyflow/eddy/state"
)

// RowKind is what a row of an updating result does to the result table,
// as Flink's row kinds.
type RowKind uint8

const (
	// Insert adds a row (+I).
	Insert RowKind = iota
	// UpdateBefore retracts a row that an UpdateAfter replaces (-U).
	UpdateBefore
	// UpdateAfter is the new version of the row retracted just before (+U).
	UpdateAfter
	// Delete removes a row (-D).
	Delete
)

var rowKinds = [...]string{"+I", "-U", "+U", "-D"}

// String is the kind's short form: +I, -U, +U or -D.
func (k RowKind) String() string {
	if int(k) < len(rowKinds) {
		return rowKinds[k]
	}
	return fmt.Sprintf("RowKind(%d)", uint8(k))
}

// Retracts reports whether the kind takes a row out of the table (-U, -D).
func (k RowKind) Retracts() bool { return k == UpdateBefore || k == Delete }

// Change is one row of an updating result: folding a stream of changes in
// order (insert and +U add their row, -U and -D remove theirs) gives the
// result table.
type Change[T any] struct {
	Kind RowKind `proto:"1"`
	Row  T       `proto:"2"`
}

// MarshalJSON writes the row's JSON object with the kind as its first
// field, "op": {"op":"+U","category":10,"avg":12.5}. A row that is not a
// JSON object is written as {"op":"+I","row":<row>}.
func (c Change[T]) MarshalJSON() ([]byte, error) {
	row, err := json.Marshal(c.Row)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`{"op":"`)
	b.WriteString(c.Kind.String())
	b.WriteByte('"')
	switch trimmed := bytes.TrimSpace(row); {
	case len(trimmed) >= 2 && trimmed[0] == '{' && trimmed[len(trimmed)-1] == '}':
		if inner := bytes.TrimSpace(trimmed[1 : len(trimmed)-1]); len(inner) > 0 {
			b.WriteByte(',')
			b.Write(inner)
		}
	default:
		b.WriteString(`,"row":`)
		b.Write(trimmed)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Change[T]) UnmarshalJSON(data []byte) error {
	var head struct {
		Op  string          `json:"op"`
		Row json.RawMessage `json:"row"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return err
	}
	kind := -1
	for i, s := range rowKinds {
		if s == head.Op {
			kind = i
		}
	}
	if kind < 0 {
		return fmt.Errorf("eddy: change with op %q, want +I, -U, +U or -D", head.Op)
	}
	c.Kind = RowKind(kind)
	var zero T
	c.Row = zero
	if head.Row != nil && reflect.TypeFor[T]().Kind() != reflect.Struct {
		return json.Unmarshal(head.Row, &c.Row)
	}
	return json.Unmarshal(data, &c.Row)
}

// GroupAggregator folds the rows of each key of an updating (or
// insert-only) input into an accumulator and says what the key's result
// row is.
type GroupAggregator[K comparable, IN, ACC, OUT any] struct {
	// Add folds one row into the accumulator (the zero ACC for a new key).
	Add func(acc ACC, in *IN) ACC
	// Retract takes a retracted row (-U, -D) back out; required when the
	// input has retractions.
	Retract func(acc ACC, in *IN) ACC
	// Result is the key's row of the result table.
	Result func(key K, acc ACC) OUT
}

// groupState is one key's aggregate: its accumulator, how many rows it
// holds, and the result row last emitted.
type groupState[ACC, OUT any] struct {
	Acc  ACC   `proto:"1"`
	Rows int64 `proto:"2"`
	Last OUT   `proto:"3"`
}

type groupAgg[K comparable, IN, ACC, OUT any] struct {
	agg   GroupAggregator[K, IN, ACC, OUT]
	st    *state.Value[groupState[ACC, OUT]]
	equal func(a, b OUT) bool // whether a result row changed, chosen once per type
}

// equalFunc returns how rows of type T are compared: with == when every
// value of T can be (no interface inside, whose dynamic value could make
// == panic; no reflection per row), else reflect.DeepEqual.
func equalFunc[T any]() func(a, b T) bool {
	if plainComparable(reflect.TypeFor[T]()) {
		return func(a, b T) bool { return any(a) == any(b) }
	}
	return func(a, b T) bool { return reflect.DeepEqual(a, b) }
}

// plainComparable reports whether == works on every value of t without
// panicking: t is comparable and holds no interface.
func plainComparable(t reflect.Type) bool {
	return everyLeaf(t, func(t reflect.Type) bool { return t.Kind() != reflect.Interface && t.Comparable() })
}

func (g *groupAgg[K, IN, ACC, OUT]) Open(ctx *OpenContext) error {
	g.equal = equalFunc[OUT]()
	var err error
	g.st, err = state.NewValue[groupState[ACC, OUT]](ctx.State, "group")
	return err
}

func (g *groupAgg[K, IN, ACC, OUT]) Process(ctx *Context[K, Change[OUT]], in *Change[IN]) error {
	s, had := g.st.Get()
	if in.Kind.Retracts() {
		if g.agg.Retract == nil {
			return Permanent(fmt.Errorf("eddy: GroupAggregate got a retraction (%s) and its aggregator has no Retract", in.Kind))
		}
		if !had || s.Rows == 0 {
			return fmt.Errorf("eddy: GroupAggregate got a retraction (%s) for a key with no rows", in.Kind)
		}
		s.Acc = g.agg.Retract(s.Acc, &in.Row)
		s.Rows--
	} else {
		s.Acc = g.agg.Add(s.Acc, &in.Row)
		s.Rows++
	}
	switch {
	case s.Rows == 0:
		// The key's last row is gone: so is its result row.
		ctx.Emit(Change[OUT]{Kind: Delete, Row: s.Last})
		g.st.Clear()
		return nil
	case !had:
		// A key with stored state has its row emitted: a key whose rows
		// all went is cleared.
		s.Last = g.agg.Result(ctx.Key, s.Acc)
		ctx.Emit(Change[OUT]{Kind: Insert, Row: s.Last})
	default:
		next := g.agg.Result(ctx.Key, s.Acc)
		if g.equal(next, s.Last) {
			break // unchanged: nothing to say
		}
		ctx.Emit(Change[OUT]{Kind: UpdateBefore, Row: s.Last})
		ctx.Emit(Change[OUT]{Kind: UpdateAfter, Row: next})
		s.Last = next
	}
	g.st.Update(s)
	return nil
}

// GroupAggregate keeps, per key, an aggregate of the input's rows and
// emits the result table's changes: +I for a new key's row, -U and +U when
// it changes, nothing when it does not (compared with == where the row
// type allows it, else reflect.DeepEqual).
func GroupAggregate[K comparable, IN, ACC, OUT any](ks *KeyedStream[K, IN], agg GroupAggregator[K, IN, ACC, OUT], opts ...OperatorOption) *Stream[Change[OUT]] {
	return Process[K, IN, Change[OUT]](ks, &insertAgg[K, IN, ACC, OUT]{groupAgg: groupAgg[K, IN, ACC, OUT]{agg: agg}}, opts...)
}

// GroupAggregateChanges is GroupAggregate over an updating input: -U and
// -D rows are taken back out with Retract, and a key whose rows are all
// retracted has its result row deleted (-D).
func GroupAggregateChanges[K comparable, IN, ACC, OUT any](ks *KeyedStream[K, Change[IN]], agg GroupAggregator[K, IN, ACC, OUT], opts ...OperatorOption) *Stream[Change[OUT]] {
	if agg.Retract == nil {
		ks.env.fail(fmt.Errorf("eddy: GroupAggregateChanges needs GroupAggregator.Retract"))
	}
	return Process[K, Change[IN], Change[OUT]](ks, &groupAgg[K, IN, ACC, OUT]{agg: agg}, opts...)
}

// insertAgg is groupAgg over an insert-only input.
type insertAgg[K comparable, IN, ACC, OUT any] struct {
	groupAgg[K, IN, ACC, OUT]
	in Change[IN]
}

func (g *insertAgg[K, IN, ACC, OUT]) Process(ctx *Context[K, Change[OUT]], in *IN) error {
	g.in = Change[IN]{Kind: Insert, Row: *in}
	return g.groupAgg.Process(ctx, &g.in)
}
