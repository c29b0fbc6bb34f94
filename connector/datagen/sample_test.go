package datagen

import (
	"reflect"
	"testing"
)

func TestSampleOrderDeterministic(t *testing.T) {
	a, b := SampleOrder(5), SampleOrder(5)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two different orders")
	}
	if reflect.DeepEqual(a, SampleOrder(6)) {
		t.Fatal("different seeds gave the same order")
	}
	var sum int64
	for _, it := range a.Items {
		if it.LineTotal.AmountMinor != it.UnitPrice.AmountMinor*int64(it.Quantity) {
			t.Fatalf("line total %d != %d x %d", it.LineTotal.AmountMinor, it.UnitPrice.AmountMinor, it.Quantity)
		}
		sum += it.LineTotal.AmountMinor
	}
	if len(a.Items) != 12 || len(a.Metadata.Tags) != 3 || a.Total.AmountMinor != sum {
		t.Fatalf("order shape: %d items, %d tags, total %d (sum %d)", len(a.Items), len(a.Metadata.Tags), a.Total.AmountMinor, sum)
	}
}
