package serde_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/serde"
)

// These tests cover the encode program's inlined loops (repeated structs held
// by value): nesting, empty and long elements, recursion and error paths.

type progLeaf struct {
	S string `proto:"1"`
	N int64  `proto:"2"`
}

type progMid struct {
	Leaves []progLeaf `proto:"1"`
	Tag    string     `proto:"2"`
	One    progLeaf   `proto:"3"`
	Q      int32      `proto:"4"`
}

type progTop struct {
	Mids []progMid         `proto:"1"`
	Tree []progTree        `proto:"2"`
	M    map[string]string `proto:"3"`
}

type progTree struct {
	V    int32      `proto:"1"`
	Kids []progTree `proto:"2"`
}

func TestProgNestedLoops(t *testing.T) {
	c := serde.MustFor[progTop]()
	long := strings.Repeat("x", 300)
	v := progTop{
		Mids: []progMid{
			{},
			{Leaves: []progLeaf{{S: "a", N: 1}, {}, {S: long, N: -1}}, Tag: "é", One: progLeaf{S: "ünïcode", N: 1 << 40}, Q: -5},
			{Leaves: []progLeaf{{S: strings.Repeat("y", 31)}, {S: strings.Repeat("z", 33)}}},
		},
		Tree: []progTree{{V: 1, Kids: []progTree{{V: 2, Kids: []progTree{{V: 3}}}, {}}}},
		M:    map[string]string{"b": "2", "a": "1", "": "", "long": long, "é": "ü"},
	}
	b, err := c.Append(nil, &v)
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Size(&v); n != len(b) {
		t.Fatalf("Size %d, Append wrote %d", n, len(b))
	}
	var got progTop
	if err := c.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	// Empty elements decode as zero values, which is what they were.
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, v)
	}
	// Appending after existing bytes leaves them alone.
	b2, err := c.Append([]byte("prefix"), &v)
	if err != nil || string(b2[:6]) != "prefix" || string(b2[6:]) != string(b) {
		t.Fatalf("append after a prefix: %v", err)
	}
}

func TestProgErrorPaths(t *testing.T) {
	c := serde.MustFor[progTop]()
	cases := []struct {
		v    progTop
		path string
	}{
		{progTop{Mids: []progMid{{}, {Leaves: []progLeaf{{}, {S: "bad\xff"}}}}}, "progTop.Mids[1].Leaves[1].S"},
		{progTop{Mids: []progMid{{}, {}, {Tag: "\xc0"}}}, "progTop.Mids[2].Tag"},
		{progTop{Mids: []progMid{{One: progLeaf{S: strings.Repeat("a", 40) + "\xff"}}}}, "progTop.Mids[0].One.S"},
	}
	for _, tc := range cases {
		_, err := c.Append(nil, &tc.v)
		var ee *serde.EncodeError
		if err == nil || !asEncodeError(err, &ee) || ee.Path != tc.path {
			t.Errorf("want EncodeError at %s, got %v", tc.path, err)
		}
	}
}
