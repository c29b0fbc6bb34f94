// Package otlpvt holds protobuf-go and vtprotobuf generated code for the
// OTLP trace messages (opentelemetry-proto v1.11.0), the vtprotobuf side of
// the serde OTLP benchmarks.
//
// The .proto files are OTLP's with the proto package renamed to
// eddybench.otlp, so this package and go.opentelemetry.io/proto/otlp can be
// registered in one binary. The generated files are committed, so building
// needs no protoc. To regenerate them, install the exact tool versions and
// run go generate in this directory:
//
//	protoc 3.21.12 (libprotoc), on PATH
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@v0.6.0
package otlpvt

//go:generate protoc --proto_path=.. --go_out=.. --go_opt=paths=source_relative --go-vtproto_out=.. --go-vtproto_opt=paths=source_relative --go-vtproto_opt=features=marshal+unmarshal+size otlpvt/common.proto otlpvt/resource.proto otlpvt/trace.proto otlpvt/trace_service.proto
