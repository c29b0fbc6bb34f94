package bench

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/eddyflow/eddy/bench/otlpserde"
	"github.com/eddyflow/eddy/bench/otlpvt"
	"github.com/eddyflow/eddy/serde"
)

// otlpSpans is the number of spans in the benchmarks' trace request.
const otlpSpans = 50

// otlpRequest is the OTLP benchmarks' input: what an SDK exporter sends for
// one batch of 50 spans of one service (5 traces of 10 spans), each with 6 to
// 9 attributes of mixed types, half of them with an event, the errors with a
// status message. About 24 kB in protobuf.
func otlpRequest() otlpserde.ExportTraceServiceRequest {
	str := func(k, v string) otlpserde.KeyValue {
		return otlpserde.KeyValue{Key: k, Value: &otlpserde.AnyValue{StringValue: &v}}
	}
	num := func(k string, v int64) otlpserde.KeyValue {
		return otlpserde.KeyValue{Key: k, Value: &otlpserde.AnyValue{IntValue: &v}}
	}
	flag := func(k string, v bool) otlpserde.KeyValue {
		return otlpserde.KeyValue{Key: k, Value: &otlpserde.AnyValue{BoolValue: &v}}
	}
	dbl := func(k string, v float64) otlpserde.KeyValue {
		return otlpserde.KeyValue{Key: k, Value: &otlpserde.AnyValue{DoubleValue: &v}}
	}
	id := func(n, seed int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(seed*131 + i*29 + 7)
		}
		return b
	}
	routes := []string{"/api/orders/{id}", "/api/cart", "/api/checkout", "/api/products/{sku}", "/healthz"}
	const t0 = uint64(1_767_225_600_000_000_000)
	spans := make([]otlpserde.Span, otlpSpans)
	for i := range spans {
		trace, pos := i/10, i%10
		s := &spans[i]
		s.TraceID = id(16, trace)
		s.SpanID = id(8, 1000+i)
		if pos > 0 {
			s.ParentSpanID = id(8, 1000+i-1)
		}
		s.Flags = 0x101
		route := routes[i%len(routes)]
		s.StartTimeUnixNano = t0 + uint64(i)*1_250_000
		s.EndTimeUnixNano = s.StartTimeUnixNano + uint64(300_000+i*7_919)
		s.Status = &otlpserde.Status{}
		switch {
		case pos == 0:
			s.Name = "GET " + route
			s.Kind = 2 // server
			s.Attributes = []otlpserde.KeyValue{
				str("http.request.method", "GET"), str("http.route", route),
				str("url.scheme", "https"), num("http.response.status_code", 200),
				str("server.address", "shop.example.com"), num("server.port", 443),
				str("user_agent.original", "Mozilla/5.0 (X11; Linux x86_64)"),
			}
		case pos%3 == 1:
			s.Name = "SELECT orders"
			s.Kind = 3 // client
			s.Attributes = []otlpserde.KeyValue{
				str("db.system.name", "postgresql"), str("db.namespace", "shop"),
				str("db.operation.name", "SELECT"), str("db.collection.name", "orders"),
				str("db.query.text", "SELECT id, status, total FROM orders WHERE id = $1"),
				str("server.address", "db-1.internal"), num("server.port", 5432),
				num("db.response.returned_rows", int64(i%7)),
			}
		default:
			s.Name = fmt.Sprintf("process step %d", pos)
			s.Kind = 1 // internal
			s.Attributes = []otlpserde.KeyValue{
				str("code.function.name", "shop.(*Checkout).step"), str("code.file.path", "checkout/step.go"),
				num("code.line.number", int64(100+pos)), flag("cache.hit", i%2 == 0),
				dbl("retry.backoff_ratio", 1.5), str("thread.name", "worker-3"),
			}
		}
		if i%2 == 1 {
			s.Events = []otlpserde.SpanEvent{{
				TimeUnixNano: s.StartTimeUnixNano + 50_000,
				Name:         "cache.lookup",
				Attributes:   []otlpserde.KeyValue{str("cache.key", fmt.Sprintf("order:%06d", i)), flag("cache.hit", false)},
			}}
		}
		if i%10 == 9 {
			s.Status = &otlpserde.Status{Code: 2, Message: "deadline exceeded calling payment service"}
			s.Events = append(s.Events, otlpserde.SpanEvent{
				TimeUnixNano: s.EndTimeUnixNano - 1_000,
				Name:         "exception",
				Attributes: []otlpserde.KeyValue{
					str("exception.type", "context.DeadlineExceeded"),
					str("exception.message", "context deadline exceeded"),
					str("exception.stacktrace", "goroutine 17 [running]:\nshop.(*Checkout).pay(...)\n\tcheckout/pay.go:88"),
				},
			})
		}
	}
	return otlpserde.ExportTraceServiceRequest{ResourceSpans: []otlpserde.ResourceSpans{{
		Resource: &otlpserde.Resource{Attributes: []otlpserde.KeyValue{
			str("service.name", "checkout"), str("service.version", "2.14.1"),
			str("service.instance.id", "9f1c7a52-3c1e-4c55-9d0e-2b8e8f0b6a11"),
			str("host.name", "ip-10-0-12-34.eu-west-1.compute.internal"),
			str("telemetry.sdk.name", "opentelemetry"), str("telemetry.sdk.language", "go"),
			str("telemetry.sdk.version", "1.39.0"), num("process.pid", 4242),
		}},
		ScopeSpans: []otlpserde.ScopeSpans{{
			Scope:     &otlpserde.InstrumentationScope{Name: "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", Version: "0.64.0"},
			Spans:     spans,
			SchemaURL: "https://opentelemetry.io/schemas/1.37.0",
		}},
		SchemaURL: "https://opentelemetry.io/schemas/1.37.0",
	}}}
}

// otlpInput is otlpRequest in each library's representation and encoding.
type otlpInput struct {
	req   otlpserde.ExportTraceServiceRequest
	pb    *otlpvt.ExportTraceServiceRequest
	codec serde.Codec[otlpserde.ExportTraceServiceRequest]
	data  []byte // the bytes of all three encoders
}

func newOTLPInput(tb testing.TB) *otlpInput {
	tb.Helper()
	in := &otlpInput{req: otlpRequest(), pb: new(otlpvt.ExportTraceServiceRequest)}
	otlpToPB(reflect.ValueOf(in.req), in.pb.ProtoReflect())
	var err error
	if in.codec, err = serde.For[otlpserde.ExportTraceServiceRequest](); err != nil {
		tb.Fatal(err)
	}
	if in.data, err = in.codec.Append(nil, &in.req); err != nil {
		tb.Fatal(err)
	}
	return in
}

// TestOTLPBenchInput checks that the three encoders of the OTLP benchmarks
// write the same bytes for the request, and that each decoder reads them
// back, so the benchmarks compare equal work.
func TestOTLPBenchInput(t *testing.T) {
	in := newOTLPInput(t)
	pbBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(in.pb)
	if err != nil {
		t.Fatal(err)
	}
	vtBytes, err := in.pb.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in.data, pbBytes) {
		t.Errorf("serde and proto.Marshal differ: %s", diffBytes(in.data, pbBytes))
	}
	if !bytes.Equal(vtBytes, pbBytes) {
		t.Errorf("MarshalVT and proto.Marshal differ: %s", diffBytes(vtBytes, pbBytes))
	}
	if n := len(in.req.ResourceSpans[0].ScopeSpans[0].Spans); n != otlpSpans {
		t.Errorf("%d spans, want %d", n, otlpSpans)
	}
	vt := new(otlpvt.ExportTraceServiceRequest)
	if err := vt.UnmarshalVT(in.data); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(vt, in.pb) {
		t.Error("UnmarshalVT of serde's bytes differs from the request")
	}
	var back otlpserde.ExportTraceServiceRequest
	if err := in.codec.Decode(pbBytes, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, in.req) {
		t.Error("serde Decode of protobuf's bytes differs from the request")
	}
	t.Logf("%d bytes", len(in.data))
}

var (
	sinkOTLP   *otlpserde.ExportTraceServiceRequest
	sinkOTLPPB *otlpvt.ExportTraceServiceRequest
)

// BenchmarkOTLPEncode encodes the 50-span trace request, each library into a
// buffer reused across iterations, as BenchmarkEncode does the order.
func BenchmarkOTLPEncode(b *testing.B) {
	in := newOTLPInput(b)

	b.Run("eddy", func(b *testing.B) {
		buf := append([]byte(nil), in.data...)
		var err error
		b.ReportAllocs()
		for b.Loop() {
			if buf, err = in.codec.Append(buf[:0], &in.req); err != nil {
				b.Fatal(err)
			}
		}
		sinkBytes = buf
		b.ReportMetric(float64(len(buf)), "bytes")
	})

	b.Run("protobuf", func(b *testing.B) {
		opts := proto.MarshalOptions{Deterministic: true}
		buf := append([]byte(nil), in.data...)
		var err error
		b.ReportAllocs()
		for b.Loop() {
			if buf, err = opts.MarshalAppend(buf[:0], in.pb); err != nil {
				b.Fatal(err)
			}
		}
		sinkBytes = buf
		b.ReportMetric(float64(len(buf)), "bytes")
	})

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
			if n, err = m.MarshalToSizedBufferVT(buf); err != nil {
				b.Fatal(err)
			}
		}
		sinkBytes = buf[len(buf)-n:]
		b.ReportMetric(float64(n), "bytes")
	})
}

// BenchmarkOTLPDecodeFresh decodes the trace request into a new value each
// iteration.
func BenchmarkOTLPDecodeFresh(b *testing.B) {
	in := newOTLPInput(b)

	b.Run("eddy", func(b *testing.B) {
		b.SetBytes(int64(len(in.data)))
		b.ReportAllocs()
		for b.Loop() {
			v := new(otlpserde.ExportTraceServiceRequest)
			if err := in.codec.Decode(in.data, v); err != nil {
				b.Fatal(err)
			}
			sinkOTLP = v
		}
	})

	b.Run("protobuf", func(b *testing.B) {
		b.SetBytes(int64(len(in.data)))
		b.ReportAllocs()
		for b.Loop() {
			m := new(otlpvt.ExportTraceServiceRequest)
			if err := proto.Unmarshal(in.data, m); err != nil {
				b.Fatal(err)
			}
			sinkOTLPPB = m
		}
	})

	b.Run("vtprotobuf", func(b *testing.B) {
		b.SetBytes(int64(len(in.data)))
		b.ReportAllocs()
		for b.Loop() {
			m := new(otlpvt.ExportTraceServiceRequest)
			if err := m.UnmarshalVT(in.data); err != nil {
				b.Fatal(err)
			}
			sinkOTLPPB = m
		}
	})
}

// BenchmarkOTLPDecodeReuse decodes the trace request into the same value
// each iteration, with each library's reset, as BenchmarkDecodeReuse does
// the order.
func BenchmarkOTLPDecodeReuse(b *testing.B) {
	in := newOTLPInput(b)

	b.Run("eddy", func(b *testing.B) {
		v := new(otlpserde.ExportTraceServiceRequest)
		b.SetBytes(int64(len(in.data)))
		b.ReportAllocs()
		for b.Loop() {
			if err := in.codec.Decode(in.data, v); err != nil {
				b.Fatal(err)
			}
		}
		sinkOTLP = v
	})

	b.Run("protobuf", func(b *testing.B) {
		m := new(otlpvt.ExportTraceServiceRequest)
		opts := proto.UnmarshalOptions{Merge: false}
		b.SetBytes(int64(len(in.data)))
		b.ReportAllocs()
		for b.Loop() {
			if err := opts.Unmarshal(in.data, m); err != nil {
				b.Fatal(err)
			}
		}
		sinkOTLPPB = m
	})

	b.Run("vtprotobuf", func(b *testing.B) {
		m := new(otlpvt.ExportTraceServiceRequest)
		b.SetBytes(int64(len(in.data)))
		b.ReportAllocs()
		for b.Loop() {
			m.Reset()
			if err := m.UnmarshalVT(in.data); err != nil {
				b.Fatal(err)
			}
		}
		sinkOTLPPB = m
	})
}
