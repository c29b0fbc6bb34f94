package bench

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/eddyflow/eddy/bench/orderpb"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/serde"
)

// Package-level sinks: every benchmark stores its result here so the compiler
// cannot drop the work as dead code.
var (
	sinkBytes []byte
	sinkOrder *datagen.OrderCreatedEvent
	sinkPB    *orderpb.OrderCreatedEvent
)

// benchInput is the one sample order every benchmark works on, in each
// library's representation and encoding.
type benchInput struct {
	order    datagen.OrderCreatedEvent
	pb       *orderpb.OrderCreatedEvent
	codec    serde.Codec[datagen.OrderCreatedEvent]
	eddyData []byte // serde encoding of order
	pbData   []byte // deterministic protobuf encoding of pb
	jsonData []byte // encoding/json encoding of order
}

func newBenchInput(b *testing.B) *benchInput {
	b.Helper()
	in := &benchInput{order: datagen.SampleOrder(1)}
	in.pb = toPB(&in.order)
	var err error
	if in.codec, err = serde.For[datagen.OrderCreatedEvent](); err != nil {
		b.Fatal(err)
	}
	if in.eddyData, err = in.codec.Append(nil, &in.order); err != nil {
		b.Fatal(err)
	}
	if in.pbData, err = (proto.MarshalOptions{Deterministic: true}).Marshal(in.pb); err != nil {
		b.Fatal(err)
	}
	if in.jsonData, err = json.Marshal(&in.order); err != nil {
		b.Fatal(err)
	}
	return in
}

// BenchmarkEncode encodes the sample order. The binary encoders append into a
// buffer reused across iterations (allocated by a first encode outside the
// timed loop), so allocs/op counts only what encoding itself allocates;
// encoding/json has no append form and allocates its result every time. The
// "bytes" metric is the encoded size.
func BenchmarkEncode(b *testing.B) {
	in := newBenchInput(b)

	b.Run("eddy", func(b *testing.B) {
		v := in.order
		buf, err := in.codec.Append(nil, &v)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			buf, err = in.codec.Append(buf[:0], &v)
			if err != nil {
				b.Fatal(err)
			}
		}
		sinkBytes = buf
		b.ReportMetric(float64(len(buf)), "bytes")
	})

	b.Run("protobuf", func(b *testing.B) {
		m := in.pb
		opts := proto.MarshalOptions{Deterministic: true}
		buf, err := opts.MarshalAppend(nil, m)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			buf, err = opts.MarshalAppend(buf[:0], m)
			if err != nil {
				b.Fatal(err)
			}
		}
		sinkBytes = buf
		b.ReportMetric(float64(len(buf)), "bytes")
	})

	// vtprotobuf: SizeVT, then MarshalToSizedBufferVT into the reused buffer
	// resliced to exactly that size (it writes back to front, so the slice
	// must be exact). That is MarshalVT without its per-call allocation, the
	// fastest form that reuses a buffer. Note vtprotobuf writes map entries
	// in Go map order, so its bytes are not deterministic; the size is.
	b.Run("vtprotobuf", func(b *testing.B) {
		m := in.pb
		buf := make([]byte, m.SizeVT())
		var n int
		var err error
		b.ReportAllocs()
		for b.Loop() {
			size := m.SizeVT()
			if cap(buf) < size {
				buf = make([]byte, size)
			}
			buf = buf[:size]
			n, err = m.MarshalToSizedBufferVT(buf)
			if err != nil {
				b.Fatal(err)
			}
		}
		sinkBytes = buf[len(buf)-n:]
		b.ReportMetric(float64(n), "bytes")
	})

	b.Run("json", func(b *testing.B) {
		v := in.order
		var buf []byte
		var err error
		b.ReportAllocs()
		for b.Loop() {
			buf, err = json.Marshal(&v)
			if err != nil {
				b.Fatal(err)
			}
		}
		sinkBytes = buf
		b.ReportMetric(float64(len(buf)), "bytes")
	})
}

// BenchmarkDecodeFresh decodes the sample order into a newly allocated zero
// value every iteration, as a consumer that hands each event on does. The
// allocation of the value itself is included.
func BenchmarkDecodeFresh(b *testing.B) {
	in := newBenchInput(b)

	b.Run("eddy", func(b *testing.B) {
		b.SetBytes(int64(len(in.eddyData)))
		b.ReportAllocs()
		for b.Loop() {
			v := new(datagen.OrderCreatedEvent)
			if err := in.codec.Decode(in.eddyData, v); err != nil {
				b.Fatal(err)
			}
			sinkOrder = v
		}
	})

	b.Run("protobuf", func(b *testing.B) {
		b.SetBytes(int64(len(in.pbData)))
		b.ReportAllocs()
		for b.Loop() {
			m := new(orderpb.OrderCreatedEvent)
			if err := proto.Unmarshal(in.pbData, m); err != nil {
				b.Fatal(err)
			}
			sinkPB = m
		}
	})

	b.Run("vtprotobuf", func(b *testing.B) {
		b.SetBytes(int64(len(in.pbData)))
		b.ReportAllocs()
		for b.Loop() {
			m := new(orderpb.OrderCreatedEvent)
			if err := m.UnmarshalVT(in.pbData); err != nil {
				b.Fatal(err)
			}
			sinkPB = m
		}
	})

	b.Run("json", func(b *testing.B) {
		b.SetBytes(int64(len(in.jsonData)))
		b.ReportAllocs()
		for b.Loop() {
			v := new(datagen.OrderCreatedEvent)
			if err := json.Unmarshal(in.jsonData, v); err != nil {
				b.Fatal(err)
			}
			sinkOrder = v
		}
	})
}

// BenchmarkDecodeReuse decodes the sample order into the same value every
// iteration, as a consumer loop that processes one event at a time does. How
// much memory survives the reset is up to each library: serde's Decode keeps
// slice capacity and maps; protobuf-go's reset (*m = T{}) keeps nothing but
// the top-level message.
func BenchmarkDecodeReuse(b *testing.B) {
	in := newBenchInput(b)

	b.Run("eddy", func(b *testing.B) {
		v := new(datagen.OrderCreatedEvent)
		b.SetBytes(int64(len(in.eddyData)))
		b.ReportAllocs()
		for b.Loop() {
			// Decode resets *v itself.
			if err := in.codec.Decode(in.eddyData, v); err != nil {
				b.Fatal(err)
			}
		}
		sinkOrder = v
	})

	b.Run("protobuf", func(b *testing.B) {
		m := new(orderpb.OrderCreatedEvent)
		// Merge: false (the default) resets m before unmarshaling.
		opts := proto.UnmarshalOptions{Merge: false}
		b.SetBytes(int64(len(in.pbData)))
		b.ReportAllocs()
		for b.Loop() {
			if err := opts.Unmarshal(in.pbData, m); err != nil {
				b.Fatal(err)
			}
		}
		sinkPB = m
	})

	// UnmarshalVT merges, so the message is reset first. ResetVT exists only
	// with vtprotobuf's pool feature, which is not generated here; the
	// generated Reset (*m = T{}) is what remains.
	b.Run("vtprotobuf", func(b *testing.B) {
		m := new(orderpb.OrderCreatedEvent)
		b.SetBytes(int64(len(in.pbData)))
		b.ReportAllocs()
		for b.Loop() {
			m.Reset()
			if err := m.UnmarshalVT(in.pbData); err != nil {
				b.Fatal(err)
			}
		}
		sinkPB = m
	})

	// encoding/json does not reset: it reuses the slice's backing array and
	// merges into the existing map, which is equivalent here because the input
	// is the same every time.
	b.Run("json", func(b *testing.B) {
		v := new(datagen.OrderCreatedEvent)
		b.SetBytes(int64(len(in.jsonData)))
		b.ReportAllocs()
		for b.Loop() {
			if err := json.Unmarshal(in.jsonData, v); err != nil {
				b.Fatal(err)
			}
		}
		sinkOrder = v
	})
}
