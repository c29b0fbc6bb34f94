package serde

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"reflect"
	"sync"
)

// Versioned is implemented by custom codecs that take part in schema checks:
// the name identifies the byte layout across renames of the Go type, and the
// version must change whenever the layout does. A codec without it is
// recorded with its Go type's name and version 0.
type Versioned interface {
	CodecName() string
	CodecVersion() uint32
}

// Sampler is implemented by custom codecs of T that offer a sample value.
// Schemas store the sample's bytes; on restore, Check decodes and re-encodes
// them with the current codec and reports a layout change made without a
// version bump when the bytes differ.
type Sampler[T any] interface {
	Sample() T
}

// migrations holds the registered migrations of custom codecs, by codec name
// and the version they migrate from.
var migrations sync.Map // migrationKey -> any (func(old []byte, v *T) error)

type migrationKey struct {
	name string
	from uint32
}

// customByName finds the current codec of a name recorded in a schema.
var customByName sync.Map // string -> *customCodec

// RegisterMigration registers fn, which reads bytes written by version from of
// T's custom codec into v. With it, Check answers AfterMigration instead of
// Incompatible when a stored schema carries that older version; Migrate runs
// it.
func RegisterMigration[T any](from uint32, fn func(old []byte, v *T) error) {
	t := reflect.TypeFor[T]()
	cc, ok := custom.Load(t)
	if !ok {
		panic(fmt.Sprintf("serde: RegisterMigration for %s, which has no registered codec; call Register first", t))
	}
	migrations.Store(migrationKey{cc.(*customCodec).name, from}, fn)
}

// Migrate decodes old, written by version from of T's custom codec, with the
// migration registered for it.
func Migrate[T any](from uint32, old []byte, v *T) error {
	t := reflect.TypeFor[T]()
	cc, ok := custom.Load(t)
	if !ok {
		return fmt.Errorf("serde: %s has no registered codec", t)
	}
	name := cc.(*customCodec).name
	fn, ok := migrations.Load(migrationKey{name, from})
	if !ok {
		return fmt.Errorf("serde: no migration registered for codec %s from version %d", name, from)
	}
	return fn.(func([]byte, *T) error)(old, v)
}

func hasMigration(name string, from uint32) bool {
	_, ok := migrations.Load(migrationKey{name, from})
	return ok
}

// state records the codec in a schema.
func (c *customCodec) state() *CodecState {
	st := &CodecState{Name: c.name, Version: c.version}
	if c.sampleFn != nil {
		st.Sample = c.sampleFn()
	}
	return st
}

// reencode decodes b with the current codec and encodes the result again.
func (c *customCodec) reencode(b []byte) ([]byte, error) {
	v := reflect.New(c.typ).UnsafePointer()
	if err := c.decodeFn(b, v); err != nil {
		return nil, err
	}
	return c.appendFn(nil, v)
}

// sampleChanged reports whether the stored sample bytes no longer survive a
// decode and re-encode with the current codec, and why.
func sampleChanged(st *CodecState) (bool, string) {
	cc, ok := customByName.Load(st.Name)
	if !ok || len(st.Sample) == 0 {
		return false, ""
	}
	out, err := cc.(*customCodec).reencode(st.Sample)
	if err != nil {
		return true, fmt.Sprintf("the stored sample no longer decodes: %v", err)
	}
	if !bytes.Equal(out, st.Sample) {
		return true, fmt.Sprintf("the stored sample re-encodes to different bytes (%d bytes stored, %d now)", len(st.Sample), len(out))
	}
	return false, ""
}

func customInfo[T any](c Codec[T]) (name string, version uint32, sample func() []byte) {
	name = reflect.TypeFor[T]().String()
	if v, ok := any(c).(Versioned); ok {
		name, version = v.CodecName(), v.CodecVersion()
	}
	if s, ok := any(c).(Sampler[T]); ok {
		sample = func() []byte {
			v := s.Sample()
			b, err := c.Append(nil, &v)
			if err != nil {
				return nil
			}
			return b
		}
	}
	return name, version, sample
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
