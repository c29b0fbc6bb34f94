//go:build ignore

// gen_oneof generates oneof.pb.go from oneof.proto without protoc: it
// compiles the file with protocompile and runs protoc-gen-go's generator
// (internal_gengo, the code behind the protoc-gen-go binary) in process.
//
//	go run gen_oneof.go
package main

import (
	"context"
	"log"
	"os"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	const src = "oneof.proto"
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	files, err := c.Compile(context.Background(), src)
	if err != nil {
		log.Fatal(err)
	}
	// The request lists the file and its imports, dependencies first.
	var protos []*descriptorpb.FileDescriptorProto
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i := 0; i < fd.Imports().Len(); i++ {
			add(fd.Imports().Get(i).FileDescriptor)
		}
		protos = append(protos, protodesc.ToFileDescriptorProto(fd))
	}
	add(files[0])
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: []string{src},
		Parameter:      proto.String("paths=source_relative"),
		ProtoFile:      protos,
	}
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range gen.Files {
		if f.Generate {
			internal_gengo.GenerateFile(gen, f)
		}
	}
	resp := gen.Response()
	if resp.Error != nil {
		log.Fatal(resp.GetError())
	}
	for _, f := range resp.File {
		if err := os.WriteFile(f.GetName(), []byte(f.GetContent()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
