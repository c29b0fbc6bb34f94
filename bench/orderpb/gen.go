// Package orderpb holds the protobuf-generated counterpart of the datagen
// order event, for the serde benchmarks and interoperability test.
//
// order.pb.go and order_vtproto.pb.go are generated and committed, so building
// and testing need no protoc. To regenerate them, install the exact tool
// versions and run go generate in this directory:
//
//	protoc 3.21.12 (libprotoc), on PATH
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@v0.6.0
package orderpb

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go-vtproto_out=. --go-vtproto_opt=paths=source_relative --go-vtproto_opt=features=marshal+unmarshal+size order.proto
