package bench

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/eddyflow/eddy/bench/orderpb"
	"github.com/eddyflow/eddy/bench/otlpserde"
	"github.com/eddyflow/eddy/bench/otlpvt"
	"github.com/eddyflow/eddy/connector/datagen"
)

// benchPaired runs each of fns once per iteration, in turn, timing every
// call, and reports each one's median time per call (metric "<name>-ns")
// and the median of its per-iteration ratio to the last fn
// ("<name>/<last>"); ns/op is the time of all of them together. Allocations
// are left to the unpaired benchmarks. The machines these benchmarks run on are shared: the
// sides of a comparison timed call by call, next to each other, see the same
// load, where separate benchmarks a second apart do not.
func benchPaired(b *testing.B, names []string, fns []func()) {
	b.Helper()
	times := make([][]time.Duration, len(fns))
	for _, f := range fns { // warm up: buffers, caches, pools
		f()
	}
	for b.Loop() {
		for k, f := range fns {
			t0 := time.Now()
			f()
			times[k] = append(times[k], time.Since(t0))
		}
	}
	last := len(fns) - 1
	for k, name := range names {
		ratios := make([]float64, len(times[k]))
		for j := range ratios {
			ratios[j] = float64(times[k][j]) / float64(times[last][j])
		}
		b.ReportMetric(float64(median(times[k])), name+"-ns")
		if k != last {
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], name+"/"+names[last])
		}
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkPaired times the order event's encode and decodes with benchPaired:
// serde, protobuf-go and vtprotobuf call by call, as BenchmarkEncode,
// BenchmarkDecodeFresh and BenchmarkDecodeReuse do them one library at a
// time.
func BenchmarkPaired(b *testing.B) {
	in := newBenchInput(b)
	names := []string{"eddy", "protobuf", "vtprotobuf"}
	b.Run("Encode", func(b *testing.B) {
		v := in.order
		eb := make([]byte, 0, 2*len(in.pbData))
		pb := make([]byte, 0, 2*len(in.pbData))
		vb := make([]byte, len(in.pbData))
		opts := proto.MarshalOptions{Deterministic: true}
		benchPaired(b, names, []func(){
			func() { eb, _ = in.codec.Append(eb[:0], &v) },
			func() { pb, _ = opts.MarshalAppend(pb[:0], in.pb) },
			func() {
				vb = vb[:in.pb.SizeVT()]
				_, _ = in.pb.MarshalToSizedBufferVT(vb)
			},
		})
		sinkBytes = eb
	})
	b.Run("DecodeFresh", func(b *testing.B) {
		benchPaired(b, names, []func(){
			func() {
				v := new(datagen.OrderCreatedEvent)
				_ = in.codec.Decode(in.eddyData, v)
				sinkOrder = v
			},
			func() {
				m := new(orderpb.OrderCreatedEvent)
				_ = proto.Unmarshal(in.pbData, m)
				sinkPB = m
			},
			func() {
				m := new(orderpb.OrderCreatedEvent)
				_ = m.UnmarshalVT(in.pbData)
				sinkPB = m
			},
		})
	})
	b.Run("DecodeReuse", func(b *testing.B) {
		v := new(datagen.OrderCreatedEvent)
		pm, vm := new(orderpb.OrderCreatedEvent), new(orderpb.OrderCreatedEvent)
		benchPaired(b, names, []func(){
			func() { _ = in.codec.Decode(in.eddyData, v) },
			func() { _ = proto.Unmarshal(in.pbData, pm) },
			func() {
				vm.Reset()
				_ = vm.UnmarshalVT(in.pbData)
			},
		})
	})
}

// BenchmarkOTLPPaired is BenchmarkPaired on the OTLP trace request.
func BenchmarkOTLPPaired(b *testing.B) {
	in := newOTLPInput(b)
	names := []string{"eddy", "protobuf", "vtprotobuf"}
	b.Run("Encode", func(b *testing.B) {
		eb := make([]byte, 0, 2*len(in.data))
		pb := make([]byte, 0, 2*len(in.data))
		vb := make([]byte, len(in.data))
		opts := proto.MarshalOptions{Deterministic: true}
		benchPaired(b, names, []func(){
			func() { eb, _ = in.codec.Append(eb[:0], &in.req) },
			func() { pb, _ = opts.MarshalAppend(pb[:0], in.pb) },
			func() {
				vb = vb[:in.pb.SizeVT()]
				_, _ = in.pb.MarshalToSizedBufferVT(vb)
			},
		})
		sinkBytes = eb
	})
	b.Run("DecodeFresh", func(b *testing.B) {
		benchPaired(b, names, []func(){
			func() {
				v := new(otlpserde.ExportTraceServiceRequest)
				_ = in.codec.Decode(in.data, v)
				sinkOTLP = v
			},
			func() {
				m := new(otlpvt.ExportTraceServiceRequest)
				_ = proto.Unmarshal(in.data, m)
				sinkOTLPPB = m
			},
			func() {
				m := new(otlpvt.ExportTraceServiceRequest)
				_ = m.UnmarshalVT(in.data)
				sinkOTLPPB = m
			},
		})
	})
	b.Run("DecodeReuse", func(b *testing.B) {
		v := new(otlpserde.ExportTraceServiceRequest)
		pm, vm := new(otlpvt.ExportTraceServiceRequest), new(otlpvt.ExportTraceServiceRequest)
		benchPaired(b, names, []func(){
			func() { _ = in.codec.Decode(in.data, v) },
			func() { _ = proto.Unmarshal(in.data, pm) },
			func() {
				vm.Reset()
				_ = vm.UnmarshalVT(in.data)
			},
		})
	})
}
