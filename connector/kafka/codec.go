package kafka

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/eddyflow/eddy/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// SchemaHeaderKey is the record header that carries the fingerprint of the
// value's serde schema (see SchemaHeader).
const SchemaHeaderKey = "eddy-schema"

// Decoder fills *v from a fetched record. *v may hold a previous value's
// memory; a decoder must reset it (serde's Decode does).
type Decoder[T any] func(rec *kgo.Record, v *T) error

// Encoder appends the value bytes of *v to dst and returns the extended
// buffer.
type Encoder[T any] func(dst []byte, v *T) ([]byte, error)

// Values returns the default decoder: record values are T in protobuf wire
// format, decoded with serde.
//
// A record with the SchemaHeaderKey header is decoded only if the
// fingerprint in it is the fingerprint of T's own schema, or of one of known
// that serde.Check finds readable by T as it is (serde.AsIs). Any other
// fingerprint fails with an error that says why: the writer's schema is
// unknown (pass it in known), or the reasons it is incompatible. Records
// without the header are decoded as they are.
func Values[T any](known ...serde.Schema) Decoder[T] {
	codec, err := serde.For[T]()
	if err != nil {
		return func(*kgo.Record, *T) error {
			return fmt.Errorf("kafka: no serde codec for %v: %w", reflect.TypeFor[T](), err)
		}
	}
	own, err := serde.SchemaOf[T]()
	if err != nil {
		return func(*kgo.Record, *T) error {
			return fmt.Errorf("kafka: no serde schema for %v: %w", reflect.TypeFor[T](), err)
		}
	}
	ownFP := own.Fingerprint()
	ok := map[string]bool{ownFP: true}
	rejected := map[string]string{}
	for _, k := range known {
		fp := k.Fingerprint()
		if fp == ownFP {
			continue
		}
		c := serde.Check(k, own)
		if c.Verdict == serde.AsIs {
			ok[fp] = true
			continue
		}
		var reasons []string
		for _, r := range c.Reasons {
			if r.Verdict != serde.AsIs {
				reasons = append(reasons, r.String())
			}
		}
		rejected[fp] = strings.Join(reasons, "; ")
	}
	typ := reflect.TypeFor[T]()
	return func(rec *kgo.Record, v *T) error {
		for i := range rec.Headers {
			h := &rec.Headers[i]
			if h.Key != SchemaHeaderKey {
				continue
			}
			fp := string(h.Value)
			if ok[fp] {
				break
			}
			if why, found := rejected[fp]; found {
				return fmt.Errorf("written with schema %s, which %v cannot read as it is: %s", short(fp), typ, why)
			}
			return fmt.Errorf("written with schema %s, which is neither the schema of %v (%s) nor a known compatible one; pass the writer's schema to kafka.Values to check it", short(fp), typ, short(ownFP))
		}
		return codec.Decode(rec.Value, v)
	}
}

func short(fp string) string {
	if len(fp) > 16 {
		return fp[:16]
	}
	return fp
}

// JSONValues returns a decoder of record values that are T as JSON
// (encoding/json), for topics written by other tools (kcat, scripts).
func JSONValues[T any]() Decoder[T] {
	return func(rec *kgo.Record, v *T) error {
		var zero T
		*v = zero
		return json.Unmarshal(rec.Value, v)
	}
}

// ProtoEncoder returns the default encoder: T in protobuf wire format, with
// serde.
func ProtoEncoder[T any]() Encoder[T] {
	codec, err := serde.For[T]()
	if err != nil {
		return func([]byte, *T) ([]byte, error) {
			return nil, fmt.Errorf("kafka: no serde codec for %v: %w", reflect.TypeFor[T](), err)
		}
	}
	return codec.Append
}

// JSONEncoder returns an encoder that writes T as JSON (encoding/json), for
// consumers that are not Eddy jobs.
func JSONEncoder[T any]() Encoder[T] {
	return func(dst []byte, v *T) ([]byte, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return dst, err
		}
		return append(dst, b...), nil
	}
}
