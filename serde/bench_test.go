package serde_test

import (
	"testing"

	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/serde"
)

// These benchmarks profile serde alone; bench/ compares it with other
// libraries side by side.

var sinkBytes []byte

func BenchmarkAppendOrder(b *testing.B) {
	c := serde.MustFor[datagen.OrderCreatedEvent]()
	v := datagen.SampleOrder(1)
	buf, _ := c.Append(nil, &v)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = c.Append(buf[:0], &v)
	}
	sinkBytes = buf
}

func BenchmarkDecodeOrderFresh(b *testing.B) {
	c := serde.MustFor[datagen.OrderCreatedEvent]()
	v := datagen.SampleOrder(1)
	buf, _ := c.Append(nil, &v)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var out datagen.OrderCreatedEvent
	for b.Loop() {
		out = datagen.OrderCreatedEvent{}
		if err := c.Decode(buf, &out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeOrderReuse(b *testing.B) {
	c := serde.MustFor[datagen.OrderCreatedEvent]()
	v := datagen.SampleOrder(1)
	buf, _ := c.Append(nil, &v)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var out datagen.OrderCreatedEvent
	for b.Loop() {
		if err := c.Decode(buf, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// benchPoint is shaped like OTLP's NumberDataPoint: regular fields, then a
// oneof whose members are numbered between them.
type benchPoint struct {
	StartTimeUnixNano uint64   `proto:"2,fixed"`
	TimeUnixNano      uint64   `proto:"3,fixed"`
	AsDouble          *float64 `proto:"4,oneof=value"`
	AsInt             *int64   `proto:"6,oneof=value,fixed"`
	Flags             uint32   `proto:"8"`
	Labels            []string `proto:"9"`
}

func BenchmarkAppendOneof(b *testing.B) {
	c := serde.MustFor[benchPoint]()
	d := 12.5
	v := benchPoint{StartTimeUnixNano: 1e18, TimeUnixNano: 2e18, AsDouble: &d, Flags: 1, Labels: []string{"host", "region"}}
	buf, _ := c.Append(nil, &v)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = c.Append(buf[:0], &v)
	}
	sinkBytes = buf
}

func BenchmarkDecodeOneofReuse(b *testing.B) {
	c := serde.MustFor[benchPoint]()
	n := int64(7)
	v := benchPoint{StartTimeUnixNano: 1e18, TimeUnixNano: 2e18, AsInt: &n, Flags: 1, Labels: []string{"host", "region"}}
	buf, _ := c.Append(nil, &v)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var out benchPoint
	for b.Loop() {
		if err := c.Decode(buf, &out); err != nil {
			b.Fatal(err)
		}
	}
}
