// Package otlpserde declares OpenTelemetry's OTLP trace, metrics and logs
// messages (opentelemetry-proto v1.11.0) as plain Go structs for serde, the
// way a user of serde would write them: singular messages as pointers (they
// have presence in proto3), repeated messages as slices of values, oneofs as
// pointer members tagged oneof=, enums as named int32 types.
//
// The bench module's tests check that serde's bytes for these structs are
// those of go.opentelemetry.io/proto/otlp's generated code, and its
// benchmarks compare serde on them with vtprotobuf.
package otlpserde

// ---- common/v1 ----

// AnyValue is opentelemetry.proto.common.v1.AnyValue: at most one member of
// the oneof value is set.
type AnyValue struct {
	StringValue         *string       `proto:"1,oneof=value"`
	BoolValue           *bool         `proto:"2,oneof=value"`
	IntValue            *int64        `proto:"3,oneof=value"`
	DoubleValue         *float64      `proto:"4,oneof=value"`
	ArrayValue          *ArrayValue   `proto:"5,oneof=value"`
	KvlistValue         *KeyValueList `proto:"6,oneof=value"`
	BytesValue          *[]byte       `proto:"7,oneof=value"`
	StringValueStrindex *int32        `proto:"8,oneof=value"`
}

// ArrayValue is opentelemetry.proto.common.v1.ArrayValue.
type ArrayValue struct {
	Values []AnyValue `proto:"1"`
}

// KeyValueList is opentelemetry.proto.common.v1.KeyValueList.
type KeyValueList struct {
	Values []KeyValue `proto:"1"`
}

// KeyValue is opentelemetry.proto.common.v1.KeyValue.
type KeyValue struct {
	Key         string    `proto:"1"`
	Value       *AnyValue `proto:"2"`
	KeyStrindex int32     `proto:"3"`
}

// InstrumentationScope is opentelemetry.proto.common.v1.InstrumentationScope.
type InstrumentationScope struct {
	Name                   string     `proto:"1"`
	Version                string     `proto:"2"`
	Attributes             []KeyValue `proto:"3"`
	DroppedAttributesCount uint32     `proto:"4"`
}

// EntityRef is opentelemetry.proto.common.v1.EntityRef.
type EntityRef struct {
	SchemaURL       string   `proto:"1,name=schema_url"`
	Type            string   `proto:"2"`
	IDKeys          []string `proto:"3,name=id_keys"`
	DescriptionKeys []string `proto:"4"`
}

// ---- resource/v1 ----

// Resource is opentelemetry.proto.resource.v1.Resource.
type Resource struct {
	Attributes             []KeyValue  `proto:"1"`
	DroppedAttributesCount uint32      `proto:"2"`
	EntityRefs             []EntityRef `proto:"3"`
}

// ---- trace/v1 and collector/trace/v1 ----

// ExportTraceServiceRequest is
// opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest, what an
// OTLP exporter sends; TracesData has the same fields.
type ExportTraceServiceRequest struct {
	ResourceSpans []ResourceSpans `proto:"1"`
}

// TracesData is opentelemetry.proto.trace.v1.TracesData.
type TracesData struct {
	ResourceSpans []ResourceSpans `proto:"1"`
}

// ResourceSpans is opentelemetry.proto.trace.v1.ResourceSpans.
type ResourceSpans struct {
	_          struct{}     `proto:"reserved=1000"`
	Resource   *Resource    `proto:"1"`
	ScopeSpans []ScopeSpans `proto:"2"`
	SchemaURL  string       `proto:"3,name=schema_url"`
}

// ScopeSpans is opentelemetry.proto.trace.v1.ScopeSpans.
type ScopeSpans struct {
	Scope     *InstrumentationScope `proto:"1"`
	Spans     []Span                `proto:"2"`
	SchemaURL string                `proto:"3,name=schema_url"`
}

// SpanKind is opentelemetry.proto.trace.v1.Span.SpanKind.
type SpanKind int32

// Span is opentelemetry.proto.trace.v1.Span.
type Span struct {
	TraceID                []byte      `proto:"1,name=trace_id"`
	SpanID                 []byte      `proto:"2,name=span_id"`
	TraceState             string      `proto:"3"`
	ParentSpanID           []byte      `proto:"4,name=parent_span_id"`
	Flags                  uint32      `proto:"16,fixed"`
	Name                   string      `proto:"5"`
	Kind                   SpanKind    `proto:"6"`
	StartTimeUnixNano      uint64      `proto:"7,fixed"`
	EndTimeUnixNano        uint64      `proto:"8,fixed"`
	Attributes             []KeyValue  `proto:"9"`
	DroppedAttributesCount uint32      `proto:"10"`
	Events                 []SpanEvent `proto:"11"`
	DroppedEventsCount     uint32      `proto:"12"`
	Links                  []SpanLink  `proto:"13"`
	DroppedLinksCount      uint32      `proto:"14"`
	Status                 *Status     `proto:"15"`
}

// SpanEvent is opentelemetry.proto.trace.v1.Span.Event.
type SpanEvent struct {
	TimeUnixNano           uint64     `proto:"1,fixed"`
	Name                   string     `proto:"2"`
	Attributes             []KeyValue `proto:"3"`
	DroppedAttributesCount uint32     `proto:"4"`
}

// SpanLink is opentelemetry.proto.trace.v1.Span.Link.
type SpanLink struct {
	TraceID                []byte     `proto:"1,name=trace_id"`
	SpanID                 []byte     `proto:"2,name=span_id"`
	TraceState             string     `proto:"3"`
	Attributes             []KeyValue `proto:"4"`
	DroppedAttributesCount uint32     `proto:"5"`
	Flags                  uint32     `proto:"6,fixed"`
}

// StatusCode is opentelemetry.proto.trace.v1.Status.StatusCode.
type StatusCode int32

// Status is opentelemetry.proto.trace.v1.Status.
type Status struct {
	_       struct{}   `proto:"reserved=1"`
	Message string     `proto:"2"`
	Code    StatusCode `proto:"3"`
}

// ---- metrics/v1 ----

// MetricsData is opentelemetry.proto.metrics.v1.MetricsData.
type MetricsData struct {
	ResourceMetrics []ResourceMetrics `proto:"1"`
}

// ResourceMetrics is opentelemetry.proto.metrics.v1.ResourceMetrics.
type ResourceMetrics struct {
	_            struct{}       `proto:"reserved=1000"`
	Resource     *Resource      `proto:"1"`
	ScopeMetrics []ScopeMetrics `proto:"2"`
	SchemaURL    string         `proto:"3,name=schema_url"`
}

// ScopeMetrics is opentelemetry.proto.metrics.v1.ScopeMetrics.
type ScopeMetrics struct {
	Scope     *InstrumentationScope `proto:"1"`
	Metrics   []Metric              `proto:"2"`
	SchemaURL string                `proto:"3,name=schema_url"`
}

// Metric is opentelemetry.proto.metrics.v1.Metric: at most one member of the
// oneof data is set.
type Metric struct {
	_                    struct{}              `proto:"reserved=4,6,8"`
	Name                 string                `proto:"1"`
	Description          string                `proto:"2"`
	Unit                 string                `proto:"3"`
	Gauge                *Gauge                `proto:"5,oneof=data"`
	Sum                  *Sum                  `proto:"7,oneof=data"`
	Histogram            *Histogram            `proto:"9,oneof=data"`
	ExponentialHistogram *ExponentialHistogram `proto:"10,oneof=data"`
	Summary              *Summary              `proto:"11,oneof=data"`
	Metadata             []KeyValue            `proto:"12"`
}

// AggregationTemporality is
// opentelemetry.proto.metrics.v1.AggregationTemporality.
type AggregationTemporality int32

// Gauge is opentelemetry.proto.metrics.v1.Gauge.
type Gauge struct {
	DataPoints []NumberDataPoint `proto:"1"`
}

// Sum is opentelemetry.proto.metrics.v1.Sum.
type Sum struct {
	DataPoints             []NumberDataPoint      `proto:"1"`
	AggregationTemporality AggregationTemporality `proto:"2"`
	IsMonotonic            bool                   `proto:"3"`
}

// Histogram is opentelemetry.proto.metrics.v1.Histogram.
type Histogram struct {
	DataPoints             []HistogramDataPoint   `proto:"1"`
	AggregationTemporality AggregationTemporality `proto:"2"`
}

// ExponentialHistogram is opentelemetry.proto.metrics.v1.ExponentialHistogram.
type ExponentialHistogram struct {
	DataPoints             []ExponentialHistogramDataPoint `proto:"1"`
	AggregationTemporality AggregationTemporality          `proto:"2"`
}

// Summary is opentelemetry.proto.metrics.v1.Summary.
type Summary struct {
	DataPoints []SummaryDataPoint `proto:"1"`
}

// NumberDataPoint is opentelemetry.proto.metrics.v1.NumberDataPoint: at most
// one member of the oneof value is set.
type NumberDataPoint struct {
	_                 struct{}   `proto:"reserved=1"`
	Attributes        []KeyValue `proto:"7"`
	StartTimeUnixNano uint64     `proto:"2,fixed"`
	TimeUnixNano      uint64     `proto:"3,fixed"`
	AsDouble          *float64   `proto:"4,oneof=value"`
	AsInt             *int64     `proto:"6,fixed,oneof=value"`
	Exemplars         []Exemplar `proto:"5"`
	Flags             uint32     `proto:"8"`
}

// HistogramDataPoint is opentelemetry.proto.metrics.v1.HistogramDataPoint.
type HistogramDataPoint struct {
	_                 struct{}   `proto:"reserved=1"`
	Attributes        []KeyValue `proto:"9"`
	StartTimeUnixNano uint64     `proto:"2,fixed"`
	TimeUnixNano      uint64     `proto:"3,fixed"`
	Count             uint64     `proto:"4,fixed"`
	Sum               *float64   `proto:"5"`
	BucketCounts      []uint64   `proto:"6,fixed"`
	ExplicitBounds    []float64  `proto:"7"`
	Exemplars         []Exemplar `proto:"8"`
	Flags             uint32     `proto:"10"`
	Min               *float64   `proto:"11"`
	Max               *float64   `proto:"12"`
}

// ExponentialHistogramDataPoint is
// opentelemetry.proto.metrics.v1.ExponentialHistogramDataPoint.
type ExponentialHistogramDataPoint struct {
	Attributes        []KeyValue `proto:"1"`
	StartTimeUnixNano uint64     `proto:"2,fixed"`
	TimeUnixNano      uint64     `proto:"3,fixed"`
	Count             uint64     `proto:"4,fixed"`
	Sum               *float64   `proto:"5"`
	Scale             int32      `proto:"6,zigzag"`
	ZeroCount         uint64     `proto:"7,fixed"`
	Positive          *Buckets   `proto:"8"`
	Negative          *Buckets   `proto:"9"`
	Flags             uint32     `proto:"10"`
	Exemplars         []Exemplar `proto:"11"`
	Min               *float64   `proto:"12"`
	Max               *float64   `proto:"13"`
	ZeroThreshold     float64    `proto:"14"`
}

// Buckets is opentelemetry.proto.metrics.v1.ExponentialHistogramDataPoint.Buckets.
type Buckets struct {
	Offset       int32    `proto:"1,zigzag"`
	BucketCounts []uint64 `proto:"2"`
}

// SummaryDataPoint is opentelemetry.proto.metrics.v1.SummaryDataPoint.
type SummaryDataPoint struct {
	_                 struct{}          `proto:"reserved=1"`
	Attributes        []KeyValue        `proto:"7"`
	StartTimeUnixNano uint64            `proto:"2,fixed"`
	TimeUnixNano      uint64            `proto:"3,fixed"`
	Count             uint64            `proto:"4,fixed"`
	Sum               float64           `proto:"5"`
	QuantileValues    []ValueAtQuantile `proto:"6"`
	Flags             uint32            `proto:"8"`
}

// ValueAtQuantile is
// opentelemetry.proto.metrics.v1.SummaryDataPoint.ValueAtQuantile.
type ValueAtQuantile struct {
	Quantile float64 `proto:"1"`
	Value    float64 `proto:"2"`
}

// Exemplar is opentelemetry.proto.metrics.v1.Exemplar: at most one member of
// the oneof value is set.
type Exemplar struct {
	_                  struct{}   `proto:"reserved=1"`
	FilteredAttributes []KeyValue `proto:"7"`
	TimeUnixNano       uint64     `proto:"2,fixed"`
	AsDouble           *float64   `proto:"3,oneof=value"`
	AsInt              *int64     `proto:"6,fixed,oneof=value"`
	SpanID             []byte     `proto:"4,name=span_id"`
	TraceID            []byte     `proto:"5,name=trace_id"`
}

// ---- logs/v1 ----

// LogsData is opentelemetry.proto.logs.v1.LogsData.
type LogsData struct {
	ResourceLogs []ResourceLogs `proto:"1"`
}

// ResourceLogs is opentelemetry.proto.logs.v1.ResourceLogs.
type ResourceLogs struct {
	_         struct{}    `proto:"reserved=1000"`
	Resource  *Resource   `proto:"1"`
	ScopeLogs []ScopeLogs `proto:"2"`
	SchemaURL string      `proto:"3,name=schema_url"`
}

// ScopeLogs is opentelemetry.proto.logs.v1.ScopeLogs.
type ScopeLogs struct {
	Scope      *InstrumentationScope `proto:"1"`
	LogRecords []LogRecord           `proto:"2"`
	SchemaURL  string                `proto:"3,name=schema_url"`
}

// SeverityNumber is opentelemetry.proto.logs.v1.SeverityNumber.
type SeverityNumber int32

// LogRecord is opentelemetry.proto.logs.v1.LogRecord.
type LogRecord struct {
	_                      struct{}       `proto:"reserved=4"`
	TimeUnixNano           uint64         `proto:"1,fixed"`
	ObservedTimeUnixNano   uint64         `proto:"11,fixed"`
	SeverityNumber         SeverityNumber `proto:"2"`
	SeverityText           string         `proto:"3"`
	Body                   *AnyValue      `proto:"5"`
	Attributes             []KeyValue     `proto:"6"`
	DroppedAttributesCount uint32         `proto:"7"`
	Flags                  uint32         `proto:"8,fixed"`
	TraceID                []byte         `proto:"9,name=trace_id"`
	SpanID                 []byte         `proto:"10,name=span_id"`
	EventName              string         `proto:"12"`
}
