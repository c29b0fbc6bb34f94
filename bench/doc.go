// Package bench compares eddy's serde with golang/protobuf-generated code,
// vtprotobuf and encoding/json on the same sample order event and on an
// OpenTelemetry trace request, and checks that serde's bytes interoperate
// with the generated code, OTLP's own (go.opentelemetry.io/proto/otlp)
// included. It is a separate module so that those libraries stay out of the
// main module's dependencies.
package bench

import (
	"github.com/eddyflow/eddy/bench/orderpb"
	"github.com/eddyflow/eddy/connector/datagen"
)

// toPB converts a datagen order into its generated protobuf counterpart.
// Message-typed struct values (Total, UnitPrice, Metadata, ...) become
// non-nil messages, since serde always writes a struct value; empty slices
// and maps become nil, which protobuf does not distinguish from empty.
func toPB(v *datagen.OrderCreatedEvent) *orderpb.OrderCreatedEvent {
	m := &orderpb.OrderCreatedEvent{
		OrderId:         v.OrderID,
		CustomerId:      v.CustomerID,
		Total:           moneyPB(v.Total),
		DeliveryAddress: v.DeliveryAddress,
		CreatedAt:       v.CreatedAt,
		Metadata: &orderpb.OrderMetadata{
			Source:        v.Metadata.Source,
			CorrelationId: v.Metadata.CorrelationID,
		},
	}
	if len(v.Items) > 0 {
		m.Items = make([]*orderpb.OrderLineItem, len(v.Items))
		for i := range v.Items {
			it := &v.Items[i]
			m.Items[i] = &orderpb.OrderLineItem{
				ProductId: it.ProductID,
				Sku:       it.SKU,
				Quantity:  it.Quantity,
				UnitPrice: moneyPB(it.UnitPrice),
				LineTotal: moneyPB(it.LineTotal),
			}
		}
	}
	if len(v.Metadata.Tags) > 0 {
		m.Metadata.Tags = make(map[string]string, len(v.Metadata.Tags))
		for k, val := range v.Metadata.Tags {
			m.Metadata.Tags[k] = val
		}
	}
	return m
}

func moneyPB(v datagen.Money) *orderpb.Money {
	return &orderpb.Money{Currency: v.Currency, AmountMinor: v.AmountMinor}
}
