package bench

import (
	"bytes"
	"reflect"
	"testing"

	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/eddyflow/eddy/bench/otlpserde"
	"github.com/eddyflow/eddy/serde"
)

// otlpInteropValues is how many random values TestOTLPInterop checks per
// message type.
const otlpInteropValues = 3000

// TestOTLPInterop checks serde against OTLP's generated Go package
// (go.opentelemetry.io/proto/otlp, protoc-gen-go) on random traces, metrics
// and logs, oneofs included (AnyValue.value, Metric.data,
// NumberDataPoint.value, Exemplar.value), in both directions:
//
//   - serde's Append writes exactly the bytes of deterministic proto.Marshal
//     of the equivalent message, Size predicts their length, and
//     proto.Unmarshal of them equals that message;
//   - serde's Decode of protobuf's bytes, into a fresh value and into one
//     that held the previous value, gives a value that converts back to the
//     same message and that serde encodes to the same bytes.
func TestOTLPInterop(t *testing.T) {
	t.Run("TracesData", func(t *testing.T) {
		checkOTLPInterop[otlpserde.TracesData](t, 1, func() proto.Message { return new(tracepb.TracesData) })
	})
	t.Run("MetricsData", func(t *testing.T) {
		checkOTLPInterop[otlpserde.MetricsData](t, 2, func() proto.Message { return new(metricspb.MetricsData) })
	})
	t.Run("LogsData", func(t *testing.T) {
		checkOTLPInterop[otlpserde.LogsData](t, 3, func() proto.Message { return new(logspb.LogsData) })
	})
}

func checkOTLPInterop[T any](t *testing.T, seed uint64, newPB func() proto.Message) {
	codec, err := serde.For[T]()
	if err != nil {
		t.Fatalf("serde.For: %v", err)
	}
	g := newOTLPGen(seed)
	var reused T
	oneofs, totalBytes := 0, 0
	for i := range otlpInteropValues {
		var v T
		g.fill(reflect.ValueOf(&v).Elem(), 0)
		want := newPB()
		otlpToPB(reflect.ValueOf(v), want.ProtoReflect())
		pbBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
		if err != nil {
			t.Fatalf("value %d: proto.Marshal: %v", i, err)
		}
		totalBytes += len(pbBytes)
		oneofs += countOneofs(want)

		got, err := codec.Append(nil, &v)
		if err != nil {
			t.Fatalf("value %d: serde Append: %v", i, err)
		}
		if !bytes.Equal(got, pbBytes) {
			t.Fatalf("value %d: serde Append bytes differ from deterministic proto.Marshal: %s\nmessage: %v",
				i, diffBytes(got, pbBytes), prototext.Format(want))
		}
		// Into a buffer with room, the encoder takes its fast path from
		// the first op; it must write the same.
		roomy, err := codec.Append(make([]byte, 0, 2*len(pbBytes)+64), &v)
		if err != nil || !bytes.Equal(roomy, pbBytes) {
			t.Fatalf("value %d: serde Append into a buffer with room (err %v): %s", i, err, diffBytes(roomy, pbBytes))
		}
		if n := codec.Size(&v); n != len(got) {
			t.Fatalf("value %d: serde Size = %d, Append wrote %d bytes", i, n, len(got))
		}
		parsed := newPB()
		if err := proto.Unmarshal(got, parsed); err != nil {
			t.Fatalf("value %d: proto.Unmarshal of serde bytes: %v", i, err)
		}
		if !proto.Equal(parsed, want) {
			t.Fatalf("value %d: proto.Unmarshal of serde bytes:\ngot  %v\nwant %v", i, prototext.Format(parsed), prototext.Format(want))
		}

		var fresh T
		checkDecoded(t, i, "into a fresh value", codec, pbBytes, &fresh, want, newPB)
		checkDecoded(t, i, "into a used value", codec, pbBytes, &reused, want, newPB)
	}
	// The generator must reach what the test is about.
	if oneofs < otlpInteropValues {
		t.Errorf("only %d oneofs set in %d values", oneofs, otlpInteropValues)
	}
	t.Logf("%d values, %d bytes, %d oneofs set", otlpInteropValues, totalBytes, oneofs)
}

// checkDecoded decodes pbBytes into *dst with serde and checks that the
// result converts to want and encodes back to pbBytes.
func checkDecoded[T any](t *testing.T, i int, what string, codec serde.Codec[T], pbBytes []byte, dst *T, want proto.Message, newPB func() proto.Message) {
	t.Helper()
	if err := codec.Decode(pbBytes, dst); err != nil {
		t.Fatalf("value %d: serde Decode of protobuf bytes %s: %v", i, what, err)
	}
	back := newPB()
	otlpToPB(reflect.ValueOf(*dst), back.ProtoReflect())
	if !proto.Equal(back, want) {
		t.Fatalf("value %d: serde Decode of protobuf bytes %s:\ngot  %v\nwant %v", i, what, prototext.Format(back), prototext.Format(want))
	}
	again, err := codec.Append(nil, dst)
	if err != nil {
		t.Fatalf("value %d: serde Append of the value decoded %s: %v", i, what, err)
	}
	if !bytes.Equal(again, pbBytes) {
		t.Fatalf("value %d: serde Append of the value decoded %s: %s", i, what, diffBytes(again, pbBytes))
	}
}

// countOneofs counts the oneofs set in m and the messages below it.
func countOneofs(m proto.Message) int {
	n := 0
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		oos := m.Descriptor().Oneofs()
		for i := range oos.Len() {
			if od := oos.Get(i); !od.IsSynthetic() && m.WhichOneof(od) != nil {
				n++
			}
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.Message() == nil:
			case fd.IsList():
				for j := range v.List().Len() {
					walk(v.List().Get(j).Message())
				}
			default:
				walk(v.Message())
			}
			return true
		})
	}
	walk(m.ProtoReflect())
	return n
}
