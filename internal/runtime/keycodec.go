package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"unsafe"

	"github.com/eddyflow/eddy/serde"
)

// KeyEncoder returns how keys of type K are serialized to choose their key
// group: strings as their bytes, integers as serde writes them but without
// its plan (intKeyCodec), other types with serde.
func KeyEncoder[K comparable]() (func(dst []byte, k *K) []byte, error) {
	if reflect.TypeFor[K]().Kind() == reflect.String {
		return func(dst []byte, k *K) []byte {
			return append(dst, *(*string)(unsafe.Pointer(k))...)
		}, nil
	}
	codec, err := serde.For[K]()
	if err != nil {
		return nil, fmt.Errorf("eddy: key type: %w", err)
	}
	if enc, _, ok := intKeyCodec[K](codec); ok {
		return enc, nil
	}
	return func(dst []byte, k *K) []byte {
		out, err := codec.Append(dst, k)
		if err != nil {
			return append(dst, fmt.Sprint(*k)...) // keys that fail to encode (bad UTF-8) still hash consistently
		}
		return out
	}, nil
}

// KeyDecoder reverses KeyEncoder, for timers. The bytes it is given are a
// view of a timer service's interned key, which never changes, so string
// keys share them instead of copying.
func KeyDecoder[K comparable]() (func(b []byte, k *K) error, error) {
	if reflect.TypeFor[K]().Kind() == reflect.String {
		return func(b []byte, k *K) error {
			*(*string)(unsafe.Pointer(k)) = unsafe.String(unsafe.SliceData(b), len(b))
			return nil
		}, nil
	}
	codec, err := serde.For[K]()
	if err != nil {
		return nil, err
	}
	if _, dec, ok := intKeyCodec[K](codec); ok {
		return dec, nil
	}
	return codec.Decode, nil
}

// IntegerKey reports whether keys of type K are integers that KeyDecoder
// decodes to a value, keeping nothing of the bytes it is given.
func IntegerKey[K comparable]() bool {
	codec, err := serde.For[K]()
	if err != nil {
		return false
	}
	_, _, ok := intKeyCodec[K](codec)
	return ok
}

// intKeyCodec returns, for an integer key type, an encoder and a decoder
// of the bytes codec (serde's for K) gives a key: nothing for 0, else the
// tag of field 1 and the value as a varint (sign-extended to 64 bits, as
// protobuf's int32 and int64). Serde's plan cost a keyed record a tenth of
// its CPU for what is a few bytes. ok is false for other types, and for a
// type whose codec writes anything else (a custom codec): checked on
// sample values, so the fast path never changes a key's bytes, which
// choose its key group and address it in checkpoints.
func intKeyCodec[K comparable](codec serde.Codec[K]) (enc func(dst []byte, k *K) []byte, dec func(b []byte, k *K) error, ok bool) {
	var get func(k *K) uint64
	var set func(k *K, v uint64)
	switch reflect.TypeFor[K]().Kind() {
	case reflect.Int64, reflect.Int:
		if unsafe.Sizeof(*new(K)) != 8 {
			return nil, nil, false
		}
		get = func(k *K) uint64 { return uint64(*(*int64)(unsafe.Pointer(k))) }
		set = func(k *K, v uint64) { *(*int64)(unsafe.Pointer(k)) = int64(v) }
	case reflect.Int32:
		get = func(k *K) uint64 { return uint64(int64(*(*int32)(unsafe.Pointer(k)))) }
		set = func(k *K, v uint64) { *(*int32)(unsafe.Pointer(k)) = int32(v) }
	case reflect.Uint64, reflect.Uint:
		if unsafe.Sizeof(*new(K)) != 8 {
			return nil, nil, false
		}
		get = func(k *K) uint64 { return *(*uint64)(unsafe.Pointer(k)) }
		set = func(k *K, v uint64) { *(*uint64)(unsafe.Pointer(k)) = v }
	case reflect.Uint32:
		get = func(k *K) uint64 { return uint64(*(*uint32)(unsafe.Pointer(k))) }
		set = func(k *K, v uint64) { *(*uint32)(unsafe.Pointer(k)) = uint32(v) }
	default:
		return nil, nil, false
	}
	enc = func(dst []byte, k *K) []byte {
		v := get(k)
		if v == 0 {
			return dst
		}
		return binary.AppendUvarint(append(dst, 0x08), v)
	}
	dec = func(b []byte, k *K) error {
		if len(b) == 0 {
			set(k, 0)
			return nil
		}
		if v, n := binary.Uvarint(b[1:]); b[0] == 0x08 && n == len(b)-1 {
			set(k, v)
			return nil
		}
		return codec.Decode(b, k) // not what enc writes: serde says what it is
	}
	// The samples cover zero, one and ten varint bytes and both signs.
	for _, v := range []uint64{0, 1, 127, 128, 300, 1 << 31, math.MaxUint32, 1 << 40, math.MaxInt64, 1 << 63, math.MaxUint64} {
		var k, back K
		set(&k, v)
		want, err := codec.Append(nil, &k)
		if err != nil || string(enc(nil, &k)) != string(want) || dec(want, &back) != nil || back != k {
			return nil, nil, false
		}
	}
	return enc, dec, true
}
