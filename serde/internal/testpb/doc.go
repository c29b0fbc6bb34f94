// Package testpb holds the protobuf-generated counterpart of the Go structs of
// the serde interoperability test (serde/interop_test.go).
//
// all.pb.go is generated and committed, so building and testing need no
// protoc. To regenerate it, install the exact tool versions and run go
// generate in this directory:
//
//	protoc 3.21.12 (libprotoc), on PATH
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//
// oneof.pb.go, for the oneof tests (serde/oneof_test.go), needs no protoc:
// gen_oneof.go compiles oneof.proto with protocompile and runs
// protoc-gen-go's own generator on it in process (go run gen_oneof.go).
package testpb
