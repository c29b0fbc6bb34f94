package testpb

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative all.proto
//go:generate go run gen_oneof.go
