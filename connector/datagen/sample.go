package datagen

import (
	"fmt"
	"math/rand/v2"
)

// SampleOrder returns a deterministic order for a seed: 12 line items with
// prices in one currency, a total, and metadata with three tags. Its protobuf
// encoding is about 890 bytes, close to the 865 of the serde seed's
// OrderCreatedEvent.
func SampleOrder(seed uint64) OrderCreatedEvent {
	r := rand.New(rand.NewPCG(seed, 0x0dde))
	const currency = "EUR"
	items := make([]OrderLineItem, 12)
	var total int64
	for i := range items {
		qty := int32(1 + r.IntN(5))
		price := int64(199 + r.IntN(25_000))
		items[i] = OrderLineItem{
			ProductID: fmt.Sprintf("prod-%08d-%04d", r.IntN(100_000_000), i),
			SKU:       fmt.Sprintf("SKU-%06X", r.IntN(1<<24)),
			Quantity:  qty,
			UnitPrice: Money{Currency: currency, AmountMinor: price},
			LineTotal: Money{Currency: currency, AmountMinor: price * int64(qty)},
		}
		total += price * int64(qty)
	}
	return OrderCreatedEvent{
		OrderID:         fmt.Sprintf("ord-%016x", r.Uint64()),
		CustomerID:      fmt.Sprintf("cus-%010d", r.IntN(1_000_000_000)),
		Items:           items,
		Total:           Money{Currency: currency, AmountMinor: total},
		DeliveryAddress: fmt.Sprintf("%d Rue de la Station, %05d Lyon, France", 1+r.IntN(200), 69001+r.IntN(9)),
		CreatedAt:       1_764_000_000_000 + r.Int64N(10_000_000_000),
		Metadata: OrderMetadata{
			Source:        "mobile-app",
			CorrelationID: fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint64()&0xffffffffffff),
			Tags: map[string]string{
				"channel": "app",
				"region":  "eu-west",
				"promo":   fmt.Sprintf("WINTER%02d", r.IntN(100)),
			},
		},
	}
}
