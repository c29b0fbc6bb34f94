package bench

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/eddyflow/eddy/bench/orderpb"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/serde"
)

// interopCases are the values TestInterop checks: the sample orders of seeds
// 1..50, then a few hand-made edge cases.
func interopCases() []struct {
	name string
	v    datagen.OrderCreatedEvent
} {
	var cases []struct {
		name string
		v    datagen.OrderCreatedEvent
	}
	add := func(name string, v datagen.OrderCreatedEvent) {
		cases = append(cases, struct {
			name string
			v    datagen.OrderCreatedEvent
		}{name, v})
	}
	for seed := uint64(1); seed <= 50; seed++ {
		add(fmt.Sprintf("seed=%d", seed), datagen.SampleOrder(seed))
	}

	// The zero value: serde always writes struct values, so Total and
	// Metadata are present as empty messages, as toPB makes them.
	add("zero", datagen.OrderCreatedEvent{})

	// Negative integers (10-byte varints), zero-valued line items and map
	// entries whose key or value is empty (protobuf writes both anyway).
	edge := datagen.SampleOrder(7)
	edge.CreatedAt = -1
	edge.Total.AmountMinor = -123_456
	edge.Items[0].Quantity = -3
	edge.Items[1] = datagen.OrderLineItem{}
	edge.Metadata.Tags[""] = "empty-key"
	edge.Metadata.Tags["empty-value"] = ""
	add("edge", edge)

	// Non-ASCII strings and a single item, no tags.
	small := datagen.OrderCreatedEvent{
		OrderID:         "ord-é-😀",
		DeliveryAddress: "1 Straße, 10115 Berlin",
		Items:           []datagen.OrderLineItem{{ProductID: "p", Quantity: 1 << 30}},
		Metadata:        datagen.OrderMetadata{Source: "web"},
	}
	add("small", small)
	return cases
}

// TestInterop checks that serde and the protobuf-generated code agree on the
// wire format of the order event, in both directions:
//
//   - serde's Append writes exactly the bytes of deterministic proto.Marshal,
//     and Size predicts their length;
//   - proto.Unmarshal of serde's bytes equals the converted message;
//   - serde's Decode of protobuf's and vtprotobuf's bytes gives back the
//     original value, also when decoding into a value that held another order.
func TestInterop(t *testing.T) {
	codec, err := serde.For[datagen.OrderCreatedEvent]()
	if err != nil {
		t.Fatalf("serde.For[OrderCreatedEvent]: %v", err)
	}
	// reused is decoded into by every case in turn, so each decode starts
	// from the previous case's order and must reset it.
	reused := datagen.SampleOrder(1000)

	for _, tc := range interopCases() {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.v
			want := toPB(&v)

			pbBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
			if err != nil {
				t.Fatalf("proto.Marshal: %v", err)
			}
			eddyBytes, err := codec.Append(nil, &v)
			if err != nil {
				t.Fatalf("serde Append: %v", err)
			}
			if !bytes.Equal(eddyBytes, pbBytes) {
				t.Errorf("serde Append bytes differ from deterministic proto.Marshal: %s", diffBytes(eddyBytes, pbBytes))
			}
			if n := codec.Size(&v); n != len(eddyBytes) {
				t.Errorf("serde Size = %d, Append wrote %d bytes", n, len(eddyBytes))
			}

			// Appending must keep what dst already holds.
			prefix := []byte("prefix")
			appended, err := codec.Append(append([]byte(nil), prefix...), &v)
			if err != nil {
				t.Fatalf("serde Append to non-empty dst: %v", err)
			}
			if !bytes.HasPrefix(appended, prefix) || !bytes.Equal(appended[len(prefix):], eddyBytes) {
				t.Errorf("serde Append to non-empty dst: got %x, want %x followed by %x", appended, prefix, eddyBytes)
			}

			got := new(orderpb.OrderCreatedEvent)
			if err := proto.Unmarshal(eddyBytes, got); err != nil {
				t.Errorf("proto.Unmarshal of serde bytes: %v", err)
			} else if !proto.Equal(got, want) {
				t.Errorf("proto.Unmarshal of serde bytes:\ngot  %v\nwant %v", prototext.Format(got), prototext.Format(want))
			}

			var fresh datagen.OrderCreatedEvent
			if err := codec.Decode(pbBytes, &fresh); err != nil {
				t.Errorf("serde Decode of protobuf bytes: %v", err)
			} else {
				checkOrder(t, "serde Decode of protobuf bytes", &fresh, &v)
			}

			if err := codec.Decode(pbBytes, &reused); err != nil {
				t.Errorf("serde Decode of protobuf bytes into a used value: %v", err)
			} else {
				checkOrder(t, "serde Decode of protobuf bytes into a used value", &reused, &v)
			}

			// vtprotobuf writes map entries in Go map order, so its bytes
			// may differ from protobuf's; they must decode the same.
			vtBytes, err := want.MarshalVT()
			if err != nil {
				t.Fatalf("MarshalVT: %v", err)
			}
			if len(vtBytes) != len(pbBytes) {
				t.Errorf("MarshalVT wrote %d bytes, proto.Marshal %d", len(vtBytes), len(pbBytes))
			}
			var fromVT datagen.OrderCreatedEvent
			if err := codec.Decode(vtBytes, &fromVT); err != nil {
				t.Errorf("serde Decode of vtprotobuf bytes: %v", err)
			} else {
				checkOrder(t, "serde Decode of vtprotobuf bytes", &fromVT, &v)
			}
		})
	}
}

// checkOrder reports whether got equals want, treating nil and empty slices
// and maps as equal: protobuf cannot tell them apart.
func checkOrder(t *testing.T, what string, got, want *datagen.OrderCreatedEvent) {
	t.Helper()
	g, w := normalize(*got), normalize(*want)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\ngot  %+v\nwant %+v", what, g, w)
	}
}

// normalize returns a copy of v with empty slices and maps replaced by nil.
func normalize(v datagen.OrderCreatedEvent) datagen.OrderCreatedEvent {
	if len(v.Items) == 0 {
		v.Items = nil
	} else {
		v.Items = append([]datagen.OrderLineItem(nil), v.Items...)
	}
	if len(v.Metadata.Tags) == 0 {
		v.Metadata.Tags = nil
	}
	return v
}

// diffBytes describes where two encodings first differ.
func diffBytes(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(i-16, 0)
	window := func(b []byte) string {
		return hex.EncodeToString(b[lo:min(i+16, len(b))])
	}
	return fmt.Sprintf("len(got)=%d len(want)=%d, first difference at offset %d\ngot  [%d:] %s\nwant [%d:] %s",
		len(got), len(want), i, lo, window(got), lo, window(want))
}
