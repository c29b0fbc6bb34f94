// Package serde encodes plain Go structs to the protobuf wire format and back,
// without code generation.
//
// Field numbers come from struct tags:
//
//	type Money struct {
//		Currency    string `proto:"1"`
//		AmountMinor int64  `proto:"2,name=amount_minor"`
//	}
//
// For[T] compiles a type once into a plan of field operations addressed by
// offset and caches it; the encode and decode loops then run without
// reflection. The bytes are the ones proto.Marshal with Deterministic set
// writes for the equivalent .proto message, so any protobuf library reads
// them, and Decode reads any protobuf library's bytes.
//
// Tag options, after the number and a comma:
//
//	zigzag        sint32/sint64 encoding for signed integers
//	fixed         fixed32/fixed64 (sfixed32/sfixed64 for signed integers)
//	name=x        the field's proto name (default: the Go name in snake_case)
//	oneof=g       a member of the oneof named g (see below)
//
// proto:"-" skips a field, and a field of type Unknown tagged proto:"unknown"
// keeps fields the type does not know so they are written back on encode.
//
// Mapping of Go types to protobuf:
//
//	bool                         bool
//	int8, int16, int32           int32 (sint32, sfixed32)
//	int, int64                   int64 (sint64, sfixed64)
//	uint8, uint16, uint32        uint32 (fixed32)
//	uint, uint64                 uint64 (fixed64)
//	float32, float64             float, double
//	string, []byte               string, bytes
//	struct, *struct              message (a pointer gives presence; a value is always written)
//	*scalar                      optional scalar (explicit presence)
//	[]T                          repeated T (scalars packed)
//	map[K]V                      map<K, V> (K an integer, bool or string)
//	time.Time                    google.protobuf.Timestamp (the zero Time is not written)
//	time.Duration                google.protobuf.Duration (zero is not written)
//
// Map keys and values use the plain encodings (int32, int64, uint32, ...);
// zigzag and fixed are not available on maps.
//
// A oneof is a group of pointer fields tagged with the same oneof=g, of
// which at most one is set:
//
//	AsDouble *float64 `proto:"4,oneof=value"`
//	AsInt    *int64   `proto:"6,oneof=value"`
//
// Members are pointers to scalars, strings, []byte (as *[]byte), structs,
// time.Time or time.Duration; the member set is written even when it points
// to a zero value, and a value with two members set is an EncodeError. As
// protobuf-go does, Encode writes oneof members after all other fields, one
// oneof at a time in the order the struct declares them, and Decode keeps the
// last member it reads and sets the others to nil.
//
// Named types of these (enums) encode as their underlying type. int8, int16,
// uint8 and uint16 are range-checked on decode. A struct type that is not a
// message (T of For[T] being a scalar, slice or map) is encoded as a message
// with a single field numbered 1, as the google.protobuf wrapper types are.
//
// Decode resets the destination and reuses its memory: slice capacity, maps
// and the targets of pointers. All string data of one Decode call comes from a
// single allocation, a private copy of the input that the strings share;
// the pointer targets it allocates come in chunks of up to 64 of one type,
// so a pointer kept from a decoded value keeps its chunk alive.
// Decode never panics on bad input; its errors name the field path and the
// byte offset. It follows protobuf-go's rules where they differ from a
// strict reading: a known field that arrives with another wire type is an
// unknown field (kept in Unknown, if the type has one), nesting is accepted
// up to 10,000 levels (on encode too), and a Duration whose seconds and
// nanos together pass the range of time.Duration is an error.
package serde
