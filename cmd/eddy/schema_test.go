package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestSchemaProto(t *testing.T) {
	code, out, errs := runCmd(t, "schema", "proto")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{`syntax = "proto3";`, "package eddy.demo.v1;", "message OrderCreatedEvent {", "repeated OrderLineItem items = 3;", "google.protobuf.Timestamp timestamp = 5;"} {
		if !strings.Contains(out, want) {
			t.Errorf(".proto lacks %q", want)
		}
	}
}

func TestSchemaShowAndCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	_, orderJSON, _ := runCmd(t, "schema", "show", "--type", "order")
	_, orderBin, _ := runCmd(t, "schema", "show", "--type", "order", "--binary")
	_, gpsJSON, _ := runCmd(t, "schema", "show", "--type", "gps")
	oj, ob, gj := write("order.json", orderJSON), write("order.bin", orderBin), write("gps.json", gpsJSON)

	if code, out, errs := runCmd(t, "schema", "check", oj, ob); code != 0 || !strings.HasPrefix(out, "AsIs") {
		t.Fatalf("same schema, JSON vs binary: exit %d, %q %q", code, out, errs)
	}
	code, out, _ := runCmd(t, "schema", "check", oj, gj)
	if code != 1 || !strings.Contains(out, "Incompatible") || !strings.Contains(out, "GPSPoint.lat (2)") {
		t.Fatalf("order vs gps: exit %d, %q", code, out)
	}
	// A compatible evolution: drop a field from the JSON (a removed field).
	evolved := strings.Replace(orderJSON, `"name": "delivery_address"`, `"name": "address"`, 1)
	if code, out, _ := runCmd(t, "schema", "check", oj, write("evolved.json", evolved)); code != 0 || !strings.Contains(out, "renamed") {
		t.Fatalf("renamed field: exit %d, %q", code, out)
	}
	if code, out, _ := runCmd(t, "schema", "check", "--key", oj, write("evolved2.json", evolved)); code != 0 {
		t.Fatalf("renamed key field: exit %d, %q", code, out)
	}
	// Corrupt and missing inputs are errors naming the file.
	corrupt := write("corrupt.bin", orderBin[:len(orderBin)-3])
	if code, _, errs := runCmd(t, "schema", "check", oj, corrupt); code != 1 || !strings.Contains(errs, "corrupt.bin") {
		t.Fatalf("corrupt schema: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd(t, "schema", "check", oj, filepath.Join(dir, "nope.json")); code != 1 || !strings.Contains(errs, "nope.json") {
		t.Fatalf("missing schema: exit %d, %q", code, errs)
	}
	if code, _, _ := runCmd(t, "schema", "check", oj); code != 2 {
		t.Fatalf("one argument: exit %d", code)
	}
	if code, _, _ := runCmd(t, "schema", "show", "--type", "nope"); code != 2 {
		t.Fatalf("unknown type: exit %d", code)
	}
}
