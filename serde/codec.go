package serde

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"
)

// Codec encodes and decodes values of one Go type to and from the protobuf
// wire format.
type Codec[T any] interface {
	// Append appends the protobuf bytes of *v to dst and returns the extended
	// buffer.
	Append(dst []byte, v *T) ([]byte, error)
	// Decode resets *v, then fills it from src, reusing its memory.
	Decode(src []byte, v *T) error
	// Size returns the number of bytes Append would append for *v.
	Size(v *T) int
}

// Unknown holds the raw bytes of fields a type does not declare. A field of
// this type tagged proto:"unknown" keeps them on decode and writes them back,
// after the known fields, on encode.
type Unknown []byte

var (
	plans     sync.Map // reflect.Type -> *message
	custom    sync.Map // reflect.Type -> *customCodec
	compileMu sync.Mutex
)

// For returns the codec of T: the one registered with Register, or one
// compiled from T's struct tags. Compilation happens once per type; the codec
// is cached and safe for concurrent use.
func For[T any]() (Codec[T], error) {
	t := reflect.TypeFor[T]()
	if c, ok := custom.Load(t); ok {
		return c.(*customCodec).codec.(Codec[T]), nil
	}
	m, err := planFor(t)
	if err != nil {
		return nil, err
	}
	return &planCodec[T]{m: m}, nil
}

// MustFor is For that panics on error, for package-level variables whose
// types are known to be valid.
func MustFor[T any]() Codec[T] {
	c, err := For[T]()
	if err != nil {
		panic(err)
	}
	return c
}

// Register makes c the codec of T: For[T] returns it from then on, and
// struct fields of type T compiled after the call encode with it. Use it for
// the few hot types where a hand-written codec pays for itself.
func Register[T any](c Codec[T]) {
	if c == nil {
		panic("serde: Register with a nil codec")
	}
	t := reflect.TypeFor[T]()
	name, version, sample := customInfo(c)
	cc := &customCodec{
		typ:      t,
		codec:    c,
		name:     name,
		version:  version,
		sampleFn: sample,
		appendFn: func(dst []byte, p unsafe.Pointer) ([]byte, error) {
			return c.Append(dst, (*T)(p))
		},
		decodeFn: func(src []byte, p unsafe.Pointer) error {
			return c.Decode(src, (*T)(p))
		},
		sizeFn: func(p unsafe.Pointer) int {
			return c.Size((*T)(p))
		},
	}
	compileMu.Lock()
	defer compileMu.Unlock()
	custom.Store(t, cc)
	customByName.Store(name, cc)
	// Plans compiled before the registration may embed T with the generic
	// plan; forget them so the next For recompiles with the custom codec.
	plans.Clear()
}

// customCodec adapts a registered Codec[T] to untyped pointers so compiled
// plans can call it for nested fields.
type customCodec struct {
	typ      reflect.Type
	codec    any
	name     string
	version  uint32
	sampleFn func() []byte // the sample value's bytes, if the codec has one
	appendFn func(dst []byte, p unsafe.Pointer) ([]byte, error)
	decodeFn func(src []byte, p unsafe.Pointer) error
	sizeFn   func(p unsafe.Pointer) int
}

// planCodec is the codec compiled from a type's struct tags.
type planCodec[T any] struct {
	m *message
}

func (c *planCodec[T]) Append(dst []byte, v *T) ([]byte, error) {
	if v == nil {
		return dst, fmt.Errorf("serde: Append of a nil *%s", c.m.goName)
	}
	return appendTop(dst, c.m, unsafe.Pointer(v))
}

func (c *planCodec[T]) Decode(src []byte, v *T) error {
	if v == nil {
		return fmt.Errorf("serde: Decode into a nil *%s", c.m.goName)
	}
	return decodeTop(src, c.m, unsafe.Pointer(v))
}

func (c *planCodec[T]) Size(v *T) int {
	if v == nil {
		return 0
	}
	return sizeMessage(c.m, unsafe.Pointer(v), 0)
}
