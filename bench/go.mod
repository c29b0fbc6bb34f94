module github.com/eddyflow/eddy/bench

go 1.26.0

replace github.com/eddyflow/eddy => ../

require (
	github.com/eddyflow/eddy v0.0.0-00010101000000-000000000000
	github.com/planetscale/vtprotobuf v0.6.0
	google.golang.org/protobuf v1.36.12
)

require go.opentelemetry.io/proto/otlp v1.11.1
