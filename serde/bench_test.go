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
