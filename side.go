package eddy

import (
	"fmt"
	"reflect"

	"github.com/eddyflow/eddy/internal/cacheline"
	"github.com/eddyflow/eddy/internal/runtime"
)

// OutputTag names a side output of records of type T: a keyed function
// (Process, CoProcess) emits to it with Output, and SideOutput is the
// stream of what it emitted.
type OutputTag[T any] struct{ name string }

// NewOutputTag returns the tag of side output name. Tags are compared by
// name: one operator's side outputs need distinct names.
func NewOutputTag[T any](name string) OutputTag[T] { return OutputTag[T]{name: name} }

// Name is the side output's name.
func (t OutputTag[T]) Name() string { return t.name }

// sideOutput is a side output of an operator's result stream.
type sideOutput struct {
	typ    reflect.Type
	stream any // *Stream[T]
	build  func(sc *runtime.Subtask) (any, error)
}

// Output emits v to the side output tag of the operator ctx belongs to,
// with the current event time. Records of a side output nothing consumes
// are dropped.
func Output[K comparable, OUT, T any](ctx *Context[K, OUT], tag OutputTag[T], v T) {
	if ctx.err != nil {
		return
	}
	p, ok := ctx.sides[tag.name]
	if !ok {
		return
	}
	side, ok := p.(*sidePush[T])
	if !ok {
		ctx.err = Permanent(fmt.Errorf("eddy: side output %q is consumed as another type than %s", tag.name, typeName[T]()))
		return
	}
	side.slot = v // handed on by pointer without an allocation, as Emit does
	ctx.err = side.push(ctx.ts, &side.slot)
}

// sidePush is one subtask's push of a side output, with the slot its
// records are handed on from.
type sidePush[T any] struct {
	_    cacheline.Pad // slot is written per record (package cacheline)
	push runtime.Push[T]
	slot T
	_    cacheline.Pad
}

// SideOutput is the stream of what the operator whose results are s
// emitted to tag with Output. s must be the result of Process or
// CoProcess; asking twice for one tag returns the same stream.
func SideOutput[OUT, T any](s *Stream[OUT], tag OutputTag[T]) *Stream[T] {
	if so, ok := s.sides[tag.name]; ok {
		if st, ok := so.stream.(*Stream[T]); ok {
			return st
		}
		s.env.fail(fmt.Errorf("eddy: side output %q of %s is asked for as %s and as %s", tag.name, s.desc, so.typ, typeName[T]()))
		return newStream[T](s.env, s.sts, "side output "+tag.name)
	}
	side := newStream[T](s.env, s.sts, fmt.Sprintf("side output %s of %s", tag.name, s.desc))
	if s.sides == nil {
		s.env.fail(fmt.Errorf("eddy: side output %q: %s has no side outputs (Process and CoProcess results do)", tag.name, s.desc))
		return side
	}
	s.sides[tag.name] = &sideOutput{typ: reflect.TypeFor[T](), stream: side, build: func(sc *runtime.Subtask) (any, error) {
		push, err := side.build(sc)
		return &sidePush[T]{push: push}, err
	}}
	return side
}

// buildSides builds, for one subtask, the pushes of s's consumed side
// outputs, by name.
func (s *Stream[T]) buildSides(sc *runtime.Subtask) (map[string]any, error) {
	if len(s.sides) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(s.sides))
	for name, so := range s.sides {
		p, err := so.build(sc)
		if err != nil {
			return nil, err
		}
		out[name] = p
	}
	return out, nil
}
