package datagen

import "time"

// OrderCreatedEvent is the marketplace order event of the serde seed: an order
// with line items, a total and free-form metadata.
type OrderCreatedEvent struct {
	OrderID         string          `proto:"1,name=order_id"`
	CustomerID      string          `proto:"2,name=customer_id"`
	Items           []OrderLineItem `proto:"3"`
	Total           Money           `proto:"4"`
	DeliveryAddress string          `proto:"5,name=delivery_address"`
	CreatedAt       int64           `proto:"6,name=created_at"`
	Metadata        OrderMetadata   `proto:"7"`
}

// OrderLineItem is one product line of an order.
type OrderLineItem struct {
	ProductID string `proto:"1,name=product_id"`
	SKU       string `proto:"2,name=sku"`
	Quantity  int32  `proto:"3"`
	UnitPrice Money  `proto:"4,name=unit_price"`
	LineTotal Money  `proto:"5,name=line_total"`
}

// Money is an amount in minor units (cents, kopecks) of a currency.
type Money struct {
	Currency    string `proto:"1"`
	AmountMinor int64  `proto:"2,name=amount_minor"`
}

// OrderMetadata says where an order came from.
type OrderMetadata struct {
	Source        string            `proto:"1"`
	CorrelationID string            `proto:"2,name=correlation_id"`
	Tags          map[string]string `proto:"3"`
}

// GPSPoint is one position report of a driver.
type GPSPoint struct {
	DriverID  string    `proto:"1,name=driver_id"`
	Lat       float64   `proto:"2"`
	Lon       float64   `proto:"3"`
	SpeedKmh  float32   `proto:"4,name=speed_kmh"`
	Timestamp time.Time `proto:"5"`
}
