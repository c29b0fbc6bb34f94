package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSerdeShowcaseRuns(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"serde", "--events", "500", "--seed", "3"}, &out, &errb); code != 0 {
		t.Fatalf("demo exited %d: %s", code, errb.String())
	}
	for _, want := range []string{"protobuf bytes", "encode:", "decode:", "checked: 64 distinct events"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBadArguments(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"frobnicate"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown command") {
		t.Fatalf("unknown command: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"serde", "--events", "0"}, &out, &errb); code != 2 {
		t.Fatalf("--events 0: exit %d", code)
	}
}
