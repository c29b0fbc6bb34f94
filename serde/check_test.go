package serde

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Types for the compatibility tests. Each holds one field numbered 1 (some a
// second one) so a pair of them differs in exactly the way a case names.
// Everything is prefixed ck so it cannot clash with other tests of the
// package.

type (
	ckI8 struct {
		A int8 `proto:"1"`
	}
	ckI16 struct {
		A int16 `proto:"1"`
	}
	ckI32 struct {
		A int32 `proto:"1"`
	}
	ckI64 struct {
		A int64 `proto:"1"`
	}
	ckU8 struct {
		A uint8 `proto:"1"`
	}
	ckU32 struct {
		A uint32 `proto:"1"`
	}
	ckU64 struct {
		A uint64 `proto:"1"`
	}
	ckS32 struct {
		A int32 `proto:"1,zigzag"`
	}
	ckS64 struct {
		A int64 `proto:"1,zigzag"`
	}
	ckF32 struct {
		A uint32 `proto:"1,fixed"`
	}
	ckF64 struct {
		A uint64 `proto:"1,fixed"`
	}
	ckSF32 struct {
		A int32 `proto:"1,fixed"`
	}
	ckSF64 struct {
		A int64 `proto:"1,fixed"`
	}
	ckFloat struct {
		A float32 `proto:"1"`
	}
	ckDouble struct {
		A float64 `proto:"1"`
	}
	ckBool struct {
		A bool `proto:"1"`
	}
	ckStr struct {
		A string `proto:"1"`
	}
	ckBytes struct {
		A []byte `proto:"1"`
	}
	ckTime struct {
		A time.Time `proto:"1"`
	}
	ckDur struct {
		A time.Duration `proto:"1"`
	}
	ckColorF struct {
		A ckColor `proto:"1"`
	}
	ckShadeF struct {
		A ckShade `proto:"1"`
	}
	ckMsg struct {
		A ckInner `proto:"1"`
	}
	ckMsgP struct {
		A *ckInner `proto:"1"`
	}
	ckMsg2 struct {
		A ckInner2 `proto:"1"`
	}

	ckOptI32 struct {
		A *int32 `proto:"1"`
	}
	ckOptStr struct {
		A *string `proto:"1"`
	}
	ckRepI32 struct {
		A []int32 `proto:"1"`
	}
	ckRepI64 struct {
		A []int64 `proto:"1"`
	}
	ckRepStr struct {
		A []string `proto:"1"`
	}
	ckRepByt struct {
		A [][]byte `proto:"1"`
	}
	ckRepMsg struct {
		A []ckInner `proto:"1"`
	}
	ckRepEnt struct {
		A []ckEntry `proto:"1"`
	}

	ckMapSI64 struct {
		A map[string]int64 `proto:"1"`
	}
	ckMapSI32 struct {
		A map[string]int32 `proto:"1"`
	}
	ckMapSI16 struct {
		A map[string]int16 `proto:"1"`
	}
	ckMapSStr struct {
		A map[string]string `proto:"1"`
	}
	ckMapI32 struct {
		A map[int32]int64 `proto:"1"`
	}
	ckMapI64 struct {
		A map[int64]int64 `proto:"1"`
	}
	ckMapI16 struct {
		A map[int16]int64 `proto:"1"`
	}
	ckMapSMsg struct {
		A map[string]ckInner `proto:"1"`
	}

	ckTwo struct {
		A int32  `proto:"1"`
		B string `proto:"2"`
	}
	ckRenamedA struct {
		Renamed int32 `proto:"1"`
	}

	ckInner struct {
		X int64 `proto:"1"`
	}
	ckInner2 struct {
		X int64 `proto:"1"`
	} // ckInner renamed
	ckEntry struct {
		Key   string `proto:"1"`
		Value int64  `proto:"2"`
	}

	// ckResvNum reserves number 2, which ckTwo uses.
	ckResvNum struct {
		A int32    `proto:"1"`
		_ struct{} `proto:"reserved=2,5-7"`
	}
	// ckResvName reserves the name b, which ckTwo uses with another number.
	ckResvName struct {
		A int32    `proto:"1"`
		_ struct{} `proto:"reserved=name=b"`
	}
	ckNameB struct {
		A int32  `proto:"1"`
		B string `proto:"3"`
	}
	// ckRenameToResv renames field 1 to a name ckResvA reserved.
	ckResvA struct {
		A int32    `proto:"1"`
		_ struct{} `proto:"reserved=name=total"`
	}
	ckRenameToResv struct {
		Total int32 `proto:"1"`
	}
)

type ckColor int32
type ckShade int32

// ckPair is one case of TestCheckRules: the schemas of O and N and the
// verdicts of Check in both directions.
type ckPair struct {
	name      string
	old, new  Schema
	fwd, back Verdict
	fwdRule   string // a substring of some reason's rule for old -> new
	backRule  string // likewise for new -> old
}

func ckSchema[T any]() Schema {
	s, err := SchemaOf[T]()
	if err != nil {
		panic(err)
	}
	return s
}

func pair[O, N any](name string, fwd, back Verdict, fwdRule, backRule string) ckPair {
	return ckPair{name: name, old: ckSchema[O](), new: ckSchema[N](), fwd: fwd, back: back, fwdRule: fwdRule, backRule: backRule}
}

func ckPairs() []ckPair {
	return []ckPair{
		// Widening and narrowing of varints.
		pair[ckI32, ckI64]("int32/int64", AsIs, AfterMigration, "widening int32 to int64", "narrowing int64 to int32 may truncate values"),
		pair[ckU32, ckU64]("uint32/uint64", AsIs, AfterMigration, "widening uint32 to uint64", "narrowing uint64 to uint32 may truncate values"),
		pair[ckS32, ckS64]("sint32/sint64", AsIs, AfterMigration, "widening sint32 to sint64", "narrowing sint64 to sint32 may truncate values"),
		// Go widths of one kind.
		pair[ckI16, ckI32]("Go int16/int32", AsIs, AfterMigration, "widening Go int16 to int32", "narrowing Go int32 to int16"),
		pair[ckI8, ckI16]("Go int8/int16", AsIs, AfterMigration, "widening Go int8 to int16", "narrowing Go int16 to int8"),
		pair[ckU8, ckU32]("Go uint8/uint32", AsIs, AfterMigration, "widening Go uint8 to uint32", "narrowing Go uint32 to uint8"),
		pair[ckI16, ckI64]("int32 (Go int16)/int64", AsIs, AfterMigration, "widening int32 to int64", "narrowing int64 to int32"),
		// Fixed-width and floating-point kinds change wire types.
		pair[ckF32, ckF64]("fixed32/fixed64", Incompatible, Incompatible, "fixed-width integers do not widen", "changes the wire type from fixed64 to fixed32"),
		pair[ckSF32, ckSF64]("sfixed32/sfixed64", Incompatible, Incompatible, "changes the wire type from fixed32 to fixed64", "changes the wire type"),
		pair[ckFloat, ckDouble]("float/double", Incompatible, Incompatible, "float and double cannot read each other", "float and double cannot read each other"),
		pair[ckI64, ckDouble]("int64/double", Incompatible, Incompatible, "from varint to fixed64", "from fixed64 to varint"),
		pair[ckI32, ckF32]("int32/fixed32", Incompatible, Incompatible, "from varint to fixed32", "from fixed32 to varint"),
		pair[ckI32, ckStr]("int32/string", Incompatible, Incompatible, "from varint to length-delimited", "from length-delimited to varint"),
		pair[ckDur, ckI64]("Duration/int64", Incompatible, Incompatible, "changes the wire type", "changes the wire type"),
		pair[ckFloat, ckF32]("float/fixed32", Incompatible, Incompatible, "bits of floating-point numbers", "bits of floating-point numbers"),
		pair[ckDouble, ckSF64]("double/sfixed64", Incompatible, Incompatible, "bits of floating-point numbers", "bits of floating-point numbers"),
		// Same wire type, reinterpreted or truncated.
		pair[ckI32, ckU32]("int32/uint32", AfterMigration, AfterMigration, "reinterprets the sign", "reinterprets the sign"),
		pair[ckI64, ckU64]("int64/uint64", AfterMigration, AfterMigration, "reinterprets the sign", "reinterprets the sign"),
		pair[ckU32, ckI64]("uint32/int64", AsIs, AfterMigration, "widening uint32 to int64", "narrowing int64 to uint32 may truncate values; int64 to uint32 reinterprets the sign"),
		pair[ckI32, ckU64]("int32/uint64", AfterMigration, AfterMigration, "int32 to uint64 reinterprets the sign", "narrowing uint64 to int32"),
		pair[ckI32, ckS32]("int32/sint32", AfterMigration, AfterMigration, "zigzag", "zigzag"),
		pair[ckI64, ckS64]("int64/sint64", AfterMigration, AfterMigration, "zigzag", "zigzag"),
		pair[ckI32, ckS64]("int32/sint64", AfterMigration, AfterMigration, "zigzag", "narrowing sint64 to int32"),
		pair[ckU32, ckS32]("uint32/sint32", AfterMigration, AfterMigration, "zigzag", "zigzag"),
		pair[ckF32, ckSF32]("fixed32/sfixed32", AfterMigration, AfterMigration, "reinterprets the sign", "reinterprets the sign"),
		pair[ckF64, ckSF64]("fixed64/sfixed64", AfterMigration, AfterMigration, "reinterprets the sign", "reinterprets the sign"),
		pair[ckBool, ckI32]("bool/int32", AfterMigration, AfterMigration, "true read as 0 and 1", "every non-zero value reads as true"),
		pair[ckBool, ckS64]("bool/sint64", AfterMigration, AfterMigration, "read as 0 and -1", "non-zero"),
		pair[ckBool, ckU64]("bool/uint64", AfterMigration, AfterMigration, "bool to uint64", "uint64 to bool"),
		pair[ckColorF, ckI32]("enum/int32", AfterMigration, AfterMigration, "enum to int", "int to enum"),
		pair[ckColorF, ckI64]("enum/int64", AfterMigration, AfterMigration, "enum to int", "int to enum"),
		pair[ckColorF, ckS32]("enum/sint32", AfterMigration, AfterMigration, "enum to int", "int to enum"),
		pair[ckColorF, ckU32]("enum/uint32", AfterMigration, AfterMigration, "reinterprets the sign", "int to enum"),
		pair[ckColorF, ckShadeF]("enum renamed", AsIs, AsIs, "enum ckColor renamed to ckShade", "enum ckShade renamed to ckColor"),
		pair[ckStr, ckBytes]("string/bytes", AfterMigration, AfterMigration, "string to bytes", "not valid UTF-8"),
		pair[ckBytes, ckMsg]("bytes/message", AfterMigration, AfterMigration, "parsed as a message", "read as their raw bytes"),
		pair[ckBytes, ckTime]("bytes/Timestamp", AfterMigration, AfterMigration, "parsed as a message", "read as their raw bytes"),
		// Length-delimited kinds that cannot read each other.
		pair[ckStr, ckMsg]("string/message", Incompatible, Incompatible, "text and messages", "text and messages"),
		pair[ckTime, ckDur]("Timestamp/Duration", Incompatible, Incompatible, "timestamps and durations", "timestamps and durations"),
		pair[ckTime, ckMsg]("Timestamp/message", Incompatible, Incompatible, "well-known type", "well-known type"),
		pair[ckDur, ckStr]("Duration/string", Incompatible, Incompatible, "text and messages", "text and messages"),
		// Messages: renamed, and pointer (presence) vs value.
		pair[ckMsg, ckMsg2]("message renamed", AsIs, AsIs, "message ckInner renamed to ckInner2", "message ckInner2 renamed to ckInner"),
		pair[ckMsg, ckMsgP]("message value/pointer", AsIs, AsIs, "singular to optional", "optional to singular"),
		// Cardinality.
		pair[ckI32, ckOptI32]("singular/optional int32", AsIs, AsIs, "singular to optional", "optional to singular"),
		pair[ckStr, ckOptStr]("singular/optional string", AsIs, AsIs, "singular to optional", "optional to singular"),
		pair[ckI32, ckRepI32]("int32/repeated int32", AfterMigration, Incompatible, "list of one element", "repeated int32 is written packed"),
		pair[ckOptI32, ckRepI32]("optional int32/repeated int32", AfterMigration, Incompatible, "optional to repeated", "cannot read a packed run"),
		pair[ckI32, ckRepI64]("int32/repeated int64", AfterMigration, Incompatible, "list of one element", "repeated int64 is written packed"),
		pair[ckStr, ckRepStr]("string/repeated string", AfterMigration, AfterMigration, "list of one element", "only the last old element is kept"),
		pair[ckOptStr, ckRepStr]("optional string/repeated string", AfterMigration, AfterMigration, "list of one element", "only the last old element is kept"),
		pair[ckBytes, ckRepByt]("bytes/repeated bytes", AfterMigration, AfterMigration, "list of one element", "only the last old element is kept"),
		pair[ckMsg, ckRepMsg]("message/repeated message", AfterMigration, AfterMigration, "list of one element", "merged into one message"),
		pair[ckStr, ckRepI32]("string/repeated int32", Incompatible, Incompatible, "from length-delimited to varint", "repeated int32 is written packed"),
		pair[ckMapSI64, ckI64]("map/scalar", Incompatible, Incompatible, "a map turned into a scalar", "a scalar turned into a map"),
		pair[ckMapSI64, ckStr]("map/string", Incompatible, Incompatible, "a map turned into a scalar", "a scalar turned into a map"),
		pair[ckMapSI64, ckRepEnt]("map/repeated entries", Incompatible, Incompatible, "a map turned into a repeated field", "a repeated field turned into a map"),
		pair[ckMapSMsg, ckMsg]("map of messages/message", Incompatible, Incompatible, "a map turned into a scalar", "a scalar turned into a map"),
		// Map keys and values follow the kind rules.
		pair[ckMapSI64, ckMapSI32]("map value int64/int32", AfterMigration, AsIs, "map value: narrowing int64 to int32", "map value: widening int32 to int64"),
		pair[ckMapSI32, ckMapSI16]("map value Go int32/int16", AfterMigration, AsIs, "map value: narrowing Go int32 to int16", "map value: widening Go int16 to int32"),
		pair[ckMapSI64, ckMapSStr]("map value int64/string", Incompatible, Incompatible, "map value: int64 to string changes the wire type", "map value: string to int64 changes the wire type"),
		pair[ckMapI32, ckMapI64]("map key int32/int64", AsIs, AfterMigration, "map key: widening int32 to int64", "map key: narrowing int64 to int32"),
		pair[ckMapI16, ckMapI32]("map key Go int16/int32", AsIs, AfterMigration, "map key: widening Go int16 to int32", "map key: narrowing Go int32 to int16"),
		pair[ckMapSI64, ckMapI64]("map key string/int64", Incompatible, Incompatible, "map key: string to int64 changes the wire type", "map key: int64 to string"),
		// Fields added, removed, renamed; reserved numbers and names.
		pair[ckI32, ckTwo]("field added/removed", AsIs, AsIs, "field added", "field removed"),
		pair[ckI32, ckRenamedA]("field renamed", AsIs, AsIs, "renamed from a to renamed", "renamed from renamed to a"),
		pair[ckResvNum, ckTwo]("reserved number reused", Incompatible, AsIs, "number 2 is reserved in old message ckResvNum", "field removed and its number reserved"),
		pair[ckResvName, ckNameB]("reserved name reused", Incompatible, AsIs, "name b is reserved in old message ckResvName", "field removed; old values are skipped"),
		pair[ckResvA, ckRenameToResv]("renamed to a reserved name", Incompatible, AsIs, "name total is reserved in old message ckResvA", "renamed from total to a"),
		// Oneofs: one field may move into a new oneof, fields may move out;
		// several fields into one oneof lose all but the last old value.
		pair[ckOoPlain, ckOoAIn]("one field into a new oneof", AsIs, AsIs, "moved into the new oneof g, alone", "moved out of oneof g"),
		pair[ckOoPlain, ckOoBoth]("two fields into a new oneof", Incompatible, AsIs, "moved into the new oneof g with 1 other field", "moved out of oneof g"),
		pair[ckOoAIn, ckOoBoth]("a field into an existing oneof", Incompatible, AsIs, "moved into oneof g, which holds members of old oneof g", "moved out of oneof g"),
		pair[ckOoOne, ckOoAWithNew]("a field into a new oneof with a new member", AsIs, AsIs, "moved into the new oneof g, alone", "moved out of oneof g"),
		pair[ckI64, ckOoSingular]("singular into a oneof", AsIs, AsIs, "moved into the new oneof g, alone", "optional to singular"),
		pair[ckOoTwoGroups, ckOoBoth]("two oneofs merged", Incompatible, AsIs, "oneofs g and h merged into g", "oneof g split into g and h"),
		pair[ckOoBoth, ckOoRenamed]("oneof renamed", AsIs, AsIs, "oneof g renamed to k", "oneof k renamed to g"),
		pair[ckOoTwoGroups, ckOoSwapped]("oneofs reordered", AsIs, AsIs, "oneofs declared in another order", "oneofs declared in another order"),
	}
}

// Oneof pairs.
type (
	ckOoPlain struct {
		A *int64  `proto:"1"`
		B *string `proto:"2"`
	}
	ckOoAIn struct {
		A *int64  `proto:"1,oneof=g"`
		B *string `proto:"2"`
	}
	ckOoBoth struct {
		A *int64  `proto:"1,oneof=g"`
		B *string `proto:"2,oneof=g"`
	}
	ckOoRenamed struct {
		A *int64  `proto:"1,oneof=k"`
		B *string `proto:"2,oneof=k"`
	}
	ckOoOne struct {
		A *int64 `proto:"1"`
	}
	ckOoAWithNew struct {
		A *int64  `proto:"1,oneof=g"`
		C *string `proto:"3,oneof=g"`
	}
	ckOoSingular struct {
		A *int64 `proto:"1,oneof=g"`
	}
	ckOoTwoGroups struct {
		A *int64  `proto:"1,oneof=g"`
		B *string `proto:"2,oneof=h"`
	}
	ckOoSwapped struct {
		B *string `proto:"2,oneof=h"`
		A *int64  `proto:"1,oneof=g"`
	}
)

// The oneof rules agree with what Decode does with old bytes: several
// fields moved into one oneof keep only the last; a field moved out reads
// the old value.
func TestCheckOneofMatchesDecode(t *testing.T) {
	one, s := int64(1), "s"
	both, err := MustFor[ckOoPlain]().Append(nil, &ckOoPlain{A: &one, B: &s})
	if err != nil {
		t.Fatal(err)
	}
	var in ckOoBoth
	if err := MustFor[ckOoBoth]().Decode(both, &in); err != nil || in.A != nil || in.B == nil || *in.B != "s" {
		t.Errorf("two fields into a oneof (Incompatible): want A lost and B kept, got %v, %+v", err, in)
	}
	member, err := MustFor[ckOoBoth]().Append(nil, &ckOoBoth{A: &one})
	if err != nil {
		t.Fatal(err)
	}
	var out ckOoPlain
	if err := MustFor[ckOoPlain]().Decode(member, &out); err != nil || out.A == nil || *out.A != 1 || out.B != nil {
		t.Errorf("out of a oneof (AsIs): got %v, %+v", err, out)
	}
}

func findRule(c Compatibility, sub string) bool {
	for _, r := range c.Reasons {
		if strings.Contains(r.Rule, sub) {
			return true
		}
	}
	return false
}

func TestCheckRules(t *testing.T) {
	for _, tc := range ckPairs() {
		t.Run(tc.name, func(t *testing.T) {
			for _, dir := range []struct {
				name     string
				old, new Schema
				want     Verdict
				rule     string
			}{
				{"forward", tc.old, tc.new, tc.fwd, tc.fwdRule},
				{"backward", tc.new, tc.old, tc.back, tc.backRule},
			} {
				c := Check(dir.old, dir.new)
				if c.Verdict != dir.want {
					t.Errorf("%s: verdict %s, want %s\n%s", dir.name, c.Verdict, dir.want, c)
				}
				if !findRule(c, dir.rule) {
					t.Errorf("%s: no reason says %q\n%s", dir.name, dir.rule, c)
				}
				worst := AsIs
				for _, r := range c.Reasons {
					worst = max(worst, r.Verdict)
				}
				if worst != c.Verdict {
					t.Errorf("%s: verdict %s, but the worst reason is %s", dir.name, c.Verdict, worst)
				}
				if (c.Err() != nil) != (dir.want == Incompatible) {
					t.Errorf("%s: Err() = %v with verdict %s", dir.name, c.Err(), c.Verdict)
				}
			}
		})
	}
}

func TestCheckIdentical(t *testing.T) {
	for _, tc := range ckPairs() {
		for _, s := range []Schema{tc.old, tc.new} {
			for _, c := range []Compatibility{Check(s, s), CheckKey(s, s)} {
				if c.Verdict != AsIs || len(c.Reasons) != 0 {
					t.Errorf("%s compared with itself: %s", s.Root, c)
				}
			}
		}
	}
}

func TestCheckReasonSides(t *testing.T) {
	for _, tc := range []struct {
		c             Compatibility
		path          string
		oldSide, news string
	}{
		{Check(ckSchema[ckI64](), ckSchema[ckI32]()), "ckI32.a (1)", "int64", "int32"},
		{Check(ckSchema[ckI32](), ckSchema[ckI16]()), "ckI16.a (1)", "int32", "int32 (Go int16)"},
		{Check(ckSchema[ckMapSI64](), ckSchema[ckI64]()), "ckI64.a (1)", "map<string, int64>", "int64"},
		{Check(ckSchema[ckMapI16](), ckSchema[ckRepEnt]()), "ckRepEnt.a (1)", "map<int32 (Go int16), int64>", "repeated ckEntry"},
		{Check(ckSchema[ckI32](), ckSchema[ckOptI32]()), "ckOptI32.a (1)", "int32", "optional int32"},
		{Check(ckSchema[ckColorF](), ckSchema[ckI32]()), "ckI32.a (1)", "enum ckColor", "int32"},
		{Check(ckSchema[ckI32](), ckSchema[ckTwo]()), "ckTwo.b (2)", "absent", "string"},
		{Check(ckSchema[ckTwo](), ckSchema[ckI32]()), "ckI32.b (2)", "string", "absent"},
		{Check(ckSchema[ckTwo](), ckSchema[ckResvNum]()), "ckResvNum.b (2)", "string", "reserved"},
		{Check(ckSchema[ckResvNum](), ckSchema[ckTwo]()), "ckTwo.b (2)", "reserved", "string"},
		{Check(ckSchema[ckTime](), ckSchema[ckDur]()), "ckDur.a (1)", "google.protobuf.Timestamp", "google.protobuf.Duration"},
	} {
		if len(tc.c.Reasons) != 1 {
			t.Errorf("want one reason, got %s", tc.c)
			continue
		}
		r := tc.c.Reasons[0]
		if r.Path != tc.path || r.Old != tc.oldSide || r.New != tc.news {
			t.Errorf("reason %+v, want path %q, old %q, new %q", r, tc.path, tc.oldSide, tc.news)
		}
	}
}

// Nested messages: the path grows with the proto names and numbers, and
// nested messages are found through Field.Type in each schema, whatever
// their names.

type ckItemV1 struct {
	SKU       string `proto:"1"`
	Qty       int32  `proto:"2"`
	UnitPrice int64  `proto:"4,name=unit_price"`
}

type ckItemV2 struct {
	SKU       string `proto:"1"`
	Qty       int64  `proto:"2"`
	UnitPrice int32  `proto:"4,name=unit_price"`
}

// The two versions of the event are local types of these functions, so both
// are named OrderCreatedEvent, as they would be in two builds of a program.
func ckOrderV1() Schema {
	type OrderCreatedEvent struct {
		ID       string     `proto:"1"`
		Customer string     `proto:"2"`
		Items    []ckItemV1 `proto:"3"`
	}
	return ckSchema[OrderCreatedEvent]()
}

func ckOrderV2() Schema {
	type OrderCreatedEvent struct {
		ID       string     `proto:"1"`
		Customer string     `proto:"2"`
		Items    []ckItemV2 `proto:"3"`
	}
	return ckSchema[OrderCreatedEvent]()
}

func TestCheckNestedPath(t *testing.T) {
	c := Check(ckOrderV1(), ckOrderV2())
	if c.Verdict != AfterMigration {
		t.Fatalf("verdict %s, want AfterMigration\n%s", c.Verdict, c)
	}
	byPath := map[string]Reason{}
	for _, r := range c.Reasons {
		byPath[r.Path] = r
	}
	price, ok := byPath["OrderCreatedEvent.items.unit_price (3.4)"]
	if !ok {
		t.Fatalf("no reason for OrderCreatedEvent.items.unit_price (3.4)\n%s", c)
	}
	if price.Old != "int64" || price.New != "int32" || price.Rule != "narrowing int64 to int32 may truncate values" || price.Verdict != AfterMigration {
		t.Errorf("unit_price reason %+v", price)
	}
	qty, ok := byPath["OrderCreatedEvent.items.qty (3.2)"]
	if !ok || qty.Verdict != AsIs {
		t.Errorf("qty reason %+v (found %v)\n%s", qty, ok, c)
	}
	items, ok := byPath["OrderCreatedEvent.items (3)"]
	if !ok || items.Verdict != AsIs || !strings.Contains(items.Rule, "message ckItemV1 renamed to ckItemV2") {
		t.Errorf("items reason %+v (found %v)", items, ok)
	}
	if len(c.Reasons) != 3 {
		t.Errorf("want 3 reasons (rename, qty, unit_price), got\n%s", c)
	}

	back := Check(ckOrderV2(), ckOrderV1())
	if back.Verdict != AfterMigration { // int64 -> int32 for qty
		t.Errorf("backward verdict %s\n%s", back.Verdict, back)
	}
	if !findRule(back, "widening int32 to int64") || !findRule(back, "narrowing int64 to int32") {
		t.Errorf("backward reasons\n%s", back)
	}
}

// Recursive messages.

type ckNode struct {
	Value    int32             `proto:"1"`
	Children []ckNode          `proto:"2"`
	Next     *ckNode           `proto:"3"`
	Other    *ckOther          `proto:"4"`
	Meta     map[string]ckNode `proto:"5"`
}

type ckOther struct {
	Back *ckNode `proto:"1"`
	N    int64   `proto:"2"`
}

type ckNode2 struct {
	Value    int64              `proto:"1"`
	Children []ckNode2          `proto:"2"`
	Next     *ckNode2           `proto:"3"`
	Other    *ckOther2          `proto:"4"`
	Meta     map[string]ckNode2 `proto:"5"`
}

type ckOther2 struct {
	Back *ckNode2 `proto:"1"`
	N    int32    `proto:"2"`
}

func TestCheckRecursive(t *testing.T) {
	a, b := ckSchema[ckNode](), ckSchema[ckNode2]()
	if c := Check(a, a); c.Verdict != AsIs || len(c.Reasons) != 0 {
		t.Errorf("recursive type with itself: %s", c)
	}
	// value widens and other.n narrows; backward the other way round. Each
	// difference is reported once, at the first path that reaches it.
	for _, tc := range []struct {
		old, new Schema
		want     []string
	}{
		{a, b, []string{"ckNode2.other.n (4.2)"}},
		{b, a, []string{"ckNode.value (1)"}},
	} {
		c := Check(tc.old, tc.new)
		if c.Verdict != AfterMigration {
			t.Errorf("narrowing in a recursive type: %s", c)
		}
		var paths []string
		for _, r := range c.Reasons {
			if r.Verdict == AfterMigration {
				paths = append(paths, r.Path)
			}
		}
		if fmt.Sprint(paths) != fmt.Sprint(tc.want) {
			t.Errorf("narrowing reported at %q, want %q\n%s", paths, tc.want, c)
		}
		renames := 0
		for _, r := range c.Reasons {
			if strings.Contains(r.Rule, "renamed to") {
				renames++
			}
		}
		// ckOther, once; the root's name does not matter, wherever it is
		// referenced.
		if renames != 1 {
			t.Errorf("%d message renames reported, want 1\n%s", renames, c)
		}
	}
	if k := CheckKey(a, a); k.Verdict != AsIs {
		t.Errorf("CheckKey of a recursive type with itself: %s", k)
	}
}

// Several differences at once: every one is reported, and Err lists them.

type ckManyOld struct {
	A int64   `proto:"1"`
	B string  `proto:"2"`
	C float32 `proto:"3"`
	D int32   `proto:"4"`
	E []int32 `proto:"5"`
	F string  `proto:"6"`
}

type ckManyNew struct {
	A  int32   `proto:"1"`
	B  []byte  `proto:"2"`
	C  float64 `proto:"3"`
	D2 int32   `proto:"4"`
	E  int32   `proto:"5"`
	G  bool    `proto:"7"`
}

func TestCheckCollectsAllReasons(t *testing.T) {
	c := Check(ckSchema[ckManyOld](), ckSchema[ckManyNew]())
	if c.Verdict != Incompatible {
		t.Fatalf("verdict %s\n%s", c.Verdict, c)
	}
	want := []struct {
		path string
		v    Verdict
	}{
		{"ckManyNew.a (1)", AfterMigration},
		{"ckManyNew.b (2)", AfterMigration},
		{"ckManyNew.c (3)", Incompatible},
		{"ckManyNew.d2 (4)", AsIs},
		{"ckManyNew.e (5)", Incompatible},
		{"ckManyNew.f (6)", AsIs},
		{"ckManyNew.g (7)", AsIs},
	}
	if len(c.Reasons) != len(want) {
		t.Fatalf("%d reasons, want %d\n%s", len(c.Reasons), len(want), c)
	}
	for i, w := range want {
		if r := c.Reasons[i]; r.Path != w.path || r.Verdict != w.v {
			t.Errorf("reason %d: %s, want path %q verdict %s", i, r, w.path, w.v)
		}
	}
	err := c.Err()
	if err == nil {
		t.Fatal("Err() is nil for an incompatible change")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 1+len(c.Reasons) {
		t.Errorf("Err() has %d lines, want a header and %d reasons:\n%v", len(lines), len(c.Reasons), err)
	}
	for i, r := range c.Reasons {
		if i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != r.String() {
			t.Errorf("Err() line %d = %q, want %q", i+1, lines[i+1], r.String())
		}
	}
	for _, s := range []string{"ckManyNew.c (3): float -> double", "[Incompatible]", "narrowing int64 to int32"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Err() lacks %q:\n%v", s, err)
		}
	}
	if s := c.String(); !strings.HasPrefix(s, "Incompatible (7 differences):") || !strings.Contains(s, "ckManyNew.e (5)") {
		t.Errorf("String() = %s", s)
	}
}

func TestCompatibilityFormatting(t *testing.T) {
	for v, want := range map[Verdict]string{AsIs: "AsIs", AfterMigration: "AfterMigration", Incompatible: "Incompatible", Verdict(7): "Verdict(7)"} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%d).String() = %q, want %q", int(v), got, want)
		}
	}
	var none Compatibility
	if none.Err() != nil || none.String() != "AsIs: the schemas encode alike" {
		t.Errorf("zero Compatibility: %v, %q", none.Err(), none.String())
	}
	mig := Check(ckSchema[ckI64](), ckSchema[ckI32]())
	if mig.Err() != nil {
		t.Errorf("Err() of AfterMigration: %v", mig.Err())
	}
	if got, want := mig.String(), "AfterMigration (1 difference):\n\tckI32.a (1): int64 -> int32: narrowing int64 to int32 may truncate values [AfterMigration]"; got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
}

// State keys: any change of encoding is Incompatible, renames are not.

func TestCheckKey(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new Schema
		want     Verdict
	}{
		{"identical", ckSchema[ckTwo](), ckSchema[ckTwo](), AsIs},
		{"root renamed", ckSchema[ckMsg](), ckSchema[ckMsgRootRenamed](), AsIs},
		{"field renamed", ckSchema[ckI32](), ckSchema[ckRenamedA](), AsIs},
		{"nested message renamed", ckSchema[ckMsg](), ckSchema[ckMsg2](), AsIs},
		{"enum renamed", ckSchema[ckColorF](), ckSchema[ckShadeF](), AsIs},
		{"widening", ckSchema[ckI32](), ckSchema[ckI64](), Incompatible},
		{"narrowing", ckSchema[ckI64](), ckSchema[ckI32](), Incompatible},
		{"Go width", ckSchema[ckI16](), ckSchema[ckI32](), Incompatible},
		{"field added", ckSchema[ckI32](), ckSchema[ckTwo](), Incompatible},
		{"field removed", ckSchema[ckTwo](), ckSchema[ckI32](), Incompatible},
		{"field removed and reserved", ckSchema[ckTwo](), ckSchema[ckResvNum](), Incompatible},
		{"singular to optional", ckSchema[ckI32](), ckSchema[ckOptI32](), Incompatible},
		{"optional to singular", ckSchema[ckOptI32](), ckSchema[ckI32](), Incompatible},
		{"map key", ckSchema[ckMapI32](), ckSchema[ckMapI64](), Incompatible},
		{"map key Go width", ckSchema[ckMapI16](), ckSchema[ckMapI32](), Incompatible},
		{"nested", ckOrderV1(), ckOrderV2(), Incompatible},
		{"string to bytes", ckSchema[ckStr](), ckSchema[ckBytes](), Incompatible},
		{"kind", ckSchema[ckI32](), ckSchema[ckS32](), Incompatible},
		{"oneof renamed", ckSchema[ckOoBoth](), ckSchema[ckOoRenamed](), AsIs},
		{"oneofs reordered", ckSchema[ckOoTwoGroups](), ckSchema[ckOoSwapped](), Incompatible},
		{"into a oneof", ckSchema[ckOoPlain](), ckSchema[ckOoAIn](), Incompatible},
		{"out of a oneof", ckSchema[ckOoAIn](), ckSchema[ckOoPlain](), Incompatible},
	} {
		c := CheckKey(tc.old, tc.new)
		if c.Verdict != tc.want {
			t.Errorf("%s: verdict %s, want %s\n%s", tc.name, c.Verdict, tc.want, c)
		}
		for _, r := range c.Reasons {
			if r.Verdict == Incompatible && !strings.HasPrefix(r.Rule, "state keys must encode identically; ") {
				t.Errorf("%s: reason %s does not say why keys are strict", tc.name, r)
			}
		}
		// Check is never stricter than CheckKey.
		if v := Check(tc.old, tc.new).Verdict; v > c.Verdict {
			t.Errorf("%s: Check says %s, CheckKey %s", tc.name, v, c.Verdict)
		}
	}
}

type ckMsgRootRenamed struct {
	A ckInner `proto:"1"`
}

// Schemas that do not hang together (as a corrupt or hand-written one might)
// are reported, not panicked on.
func TestCheckBrokenSchemas(t *testing.T) {
	good := ckSchema[ckMsg]()
	noRoot := Schema{Root: "Missing", Messages: good.Messages}
	if c := Check(noRoot, good); c.Verdict != Incompatible {
		t.Errorf("old without its root: %s", c)
	}
	if c := Check(good, noRoot); c.Verdict != Incompatible {
		t.Errorf("new without its root: %s", c)
	}
	noNested := Schema{Root: good.Root, Messages: good.Messages[:1]}
	if c := Check(noNested, good); c.Verdict != Incompatible || !findRule(c, "the old schema lacks message") {
		t.Errorf("old without a nested message: %s", c)
	}
	if c := Check(good, noNested); c.Verdict != Incompatible || !findRule(c, "the new schema lacks message") {
		t.Errorf("new without a nested message: %s", c)
	}
}

// The rules agree with what Decode does with old bytes.
func TestCheckRulesMatchDecode(t *testing.T) {
	i32 := MustFor[ckI32]()
	old, err := i32.Append(nil, &ckI32{A: -5})
	if err != nil {
		t.Fatal(err)
	}
	var wide ckI64
	if err := MustFor[ckI64]().Decode(old, &wide); err != nil || wide.A != -5 {
		t.Errorf("int32 -> int64 (AsIs): %v, %d", err, wide.A)
	}
	var rep ckRepI32
	if err := MustFor[ckRepI32]().Decode(old, &rep); err != nil || len(rep.A) != 1 || rep.A[0] != -5 {
		t.Errorf("int32 -> repeated int32 (AfterMigration): %v, %v", err, rep.A)
	}
	packed, err := MustFor[ckRepI32]().Append(nil, &ckRepI32{A: []int32{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	// Incompatible: the value is lost. A known field with another wire type
	// is an unknown field to Decode, as to protobuf-go.
	var single ckI32
	if err := i32.Decode(packed, &single); err != nil || single.A != 0 {
		t.Errorf("repeated int32 -> int32 (Incompatible): want the value skipped as unknown, got %v, %d", err, single.A)
	}
	f32, err := MustFor[ckF32]().Append(nil, &ckF32{A: 7})
	if err != nil {
		t.Fatal(err)
	}
	var f64 ckF64
	if err := MustFor[ckF64]().Decode(f32, &f64); err != nil || f64.A != 0 {
		t.Errorf("fixed32 -> fixed64 (Incompatible): want the value skipped as unknown, got %v, %d", err, f64.A)
	}
	strs, err := MustFor[ckRepStr]().Append(nil, &ckRepStr{A: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	var last ckStr
	if err := MustFor[ckStr]().Decode(strs, &last); err != nil || last.A != "b" {
		t.Errorf("repeated string -> string (AfterMigration, keeps the last): %v, %q", err, last.A)
	}
}

// Custom codecs. Each test uses its own Go type, because Register is global.

// ckMoneyCodec writes the units of a money type times scale as a varint.
// Its name, version and scale are fields, so a test can register a changed
// codec under the same name.
type ckMoneyCodec[T any] struct {
	name    string
	version uint32
	scale   int64
	units   func(*T) *int64
}

func (c ckMoneyCodec[T]) CodecName() string    { return c.name }
func (c ckMoneyCodec[T]) CodecVersion() uint32 { return c.version }

func (c ckMoneyCodec[T]) Append(dst []byte, v *T) ([]byte, error) {
	return binary.AppendVarint(dst, *c.units(v)*c.scale), nil
}

func (c ckMoneyCodec[T]) Decode(src []byte, v *T) error {
	x, n := binary.Varint(src)
	if n <= 0 || n != len(src) {
		return errors.New("bad money")
	}
	*c.units(v) = x / c.scale
	return nil
}

func (c ckMoneyCodec[T]) Size(v *T) int {
	b, _ := c.Append(nil, v)
	return len(b)
}

// ckSampledCodec is ckMoneyCodec with a sample value.
type ckSampledCodec[T any] struct{ ckMoneyCodec[T] }

func (c ckSampledCodec[T]) Sample() T {
	var v T
	*c.units(&v) = 12345
	return v
}

type (
	ckVerMoney  struct{ Units int64 }
	ckVerHolder struct {
		M ckVerMoney `proto:"1"`
	}
	ckNameMoney  struct{ Units int64 }
	ckNameHolder struct {
		M ckNameMoney `proto:"1"`
	}
	ckSampleMoney  struct{ Units int64 }
	ckSampleHolder struct {
		M  ckSampleMoney            `proto:"1"`
		Ms map[string]ckSampleMoney `proto:"2"`
	}
	ckKindMoney  struct{ Units int64 }
	ckKindHolder struct {
		M ckKindMoney `proto:"1"`
	}
	ckPlainMoney struct {
		Units int64 `proto:"1"`
	}
	ckPlainHolder struct {
		M ckPlainMoney `proto:"1"`
	}
	ckBytesHolder struct {
		M []byte `proto:"1"`
	}
	ckKeyMoney    struct{ Units int64 }
	ckKeyMoneyFld struct {
		M ckKeyMoney `proto:"1"`
	}
	ckRootMoney struct{ Units int64 }
)

// ckForgetMigration removes a migration when the test ends, so the test can
// run again (-count) against a clean registry.
func ckForgetMigration(t *testing.T, name string, from uint32) {
	t.Cleanup(func() { migrations.Delete(migrationKey{name, from}) })
}

func TestCheckCodecVersion(t *testing.T) {
	ckForgetMigration(t, "ck.vmoney", 1)
	Register[ckVerMoney](ckMoneyCodec[ckVerMoney]{"ck.vmoney", 1, 1, ckUnitsVer})
	v1 := ckSchema[ckVerHolder]()
	Register[ckVerMoney](ckMoneyCodec[ckVerMoney]{"ck.vmoney", 2, 1, ckUnitsVer})
	v2 := ckSchema[ckVerHolder]()

	if got := describeField(&v1.Messages[0].Fields[0]); got != "codec ck.vmoney v1" {
		t.Errorf("describeField = %q", got)
	}
	c := Check(v1, v2)
	if c.Verdict != Incompatible || len(c.Reasons) != 1 {
		t.Fatalf("version bump without a migration: %s", c)
	}
	want := Reason{Path: "ckVerHolder.m (1)", Old: "codec ck.vmoney v1", New: "codec ck.vmoney v2",
		Rule: "codec ck.vmoney changed from version 1 to 2 and no migration from version 1 is registered (serde.RegisterMigration)", Verdict: Incompatible}
	if c.Reasons[0] != want {
		t.Errorf("reason %+v\nwant   %+v", c.Reasons[0], want)
	}
	if c := Check(v2, v1); c.Verdict != Incompatible || !findRule(c, "from version 2 to 1 and no migration from version 2") {
		t.Errorf("version 2 to 1: %s", c)
	}

	RegisterMigration[ckVerMoney](1, func(old []byte, v *ckVerMoney) error {
		return ckMoneyCodec[ckVerMoney]{"ck.vmoney", 1, 1, ckUnitsVer}.Decode(old, v)
	})
	if c := Check(v1, v2); c.Verdict != AfterMigration || !findRule(c, "migration registered from version 1") {
		t.Errorf("version bump with a migration: %s", c)
	}
	if c := Check(v2, v1); c.Verdict != Incompatible {
		t.Errorf("version 2 to 1 with a migration from 1 only: %s", c)
	}
	if c := CheckKey(v1, v2); c.Verdict != Incompatible {
		t.Errorf("CheckKey of a version bump with a migration: %s", c)
	}
	if c := Check(v2, v2); c.Verdict != AsIs || len(c.Reasons) != 0 {
		t.Errorf("same codec: %s", c)
	}
}

func TestCheckCodecName(t *testing.T) {
	Register[ckNameMoney](ckMoneyCodec[ckNameMoney]{"ck.nmoney", 1, 1, ckUnitsName})
	a := ckSchema[ckNameHolder]()
	Register[ckNameMoney](ckMoneyCodec[ckNameMoney]{"ck.nmoney2", 1, 1, ckUnitsName})
	b := ckSchema[ckNameHolder]()
	for _, c := range []Compatibility{Check(a, b), Check(b, a), CheckKey(a, b)} {
		if c.Verdict != Incompatible || !findRule(c, "replaced by codec") {
			t.Errorf("codec renamed: %s", c)
		}
	}
}

func TestCheckCodecSample(t *testing.T) {
	Register[ckSampleMoney](ckSampledCodec[ckSampleMoney]{ckMoneyCodec[ckSampleMoney]{"ck.smoney", 1, 1, ckUnitsSample}})
	old := ckSchema[ckSampleHolder]()
	if len(old.Messages[0].Fields[0].Codec.Sample) == 0 {
		t.Fatal("the schema holds no sample")
	}
	if c := Check(old, old); c.Verdict != AsIs {
		t.Errorf("unchanged codec: %s", c)
	}
	// The same name and version, but amounts are now written in cents.
	Register[ckSampleMoney](ckSampledCodec[ckSampleMoney]{ckMoneyCodec[ckSampleMoney]{"ck.smoney", 1, 100, ckUnitsSample}})
	c := Check(old, ckSchema[ckSampleHolder]())
	if c.Verdict != Incompatible || len(c.Reasons) != 2 {
		t.Fatalf("layout changed without a version bump: %s", c)
	}
	want := "codec ck.smoney v1: byte layout changed without a version bump: the stored sample re-encodes to different bytes"
	if r := c.Reasons[0]; r.Path != "ckSampleHolder.m (1)" || !strings.HasPrefix(r.Rule, want) {
		t.Errorf("reason %s, want rule %q", r, want)
	}
	if r := c.Reasons[1]; r.Path != "ckSampleHolder.ms (2)" || !strings.HasPrefix(r.Rule, "map value: "+want) {
		t.Errorf("map value reason %s", r)
	}
	if !strings.Contains(c.Err().Error(), "without a version bump") {
		t.Errorf("Err() = %v", c.Err())
	}
}

func TestCheckCustomVersusOther(t *testing.T) {
	Register[ckKindMoney](ckMoneyCodec[ckKindMoney]{"ck.kmoney", 1, 1, ckUnitsKind})
	custom := ckSchema[ckKindHolder]()
	for _, other := range []Schema{ckSchema[ckPlainHolder](), ckSchema[ckBytesHolder](), ckSchema[ckI64]()} {
		for _, c := range []Compatibility{Check(custom, other), Check(other, custom)} {
			if c.Verdict != Incompatible || !findRule(c, "custom codec") {
				t.Errorf("custom versus %s: %s", other.Root, c)
			}
		}
	}
}

func TestCheckCustomRoot(t *testing.T) {
	Register[ckRootMoney](ckMoneyCodec[ckRootMoney]{"ck.rmoney", 3, 1, ckUnitsRoot})
	a := ckSchema[ckRootMoney]()
	Register[ckRootMoney](ckMoneyCodec[ckRootMoney]{"ck.rmoney", 4, 1, ckUnitsRoot})
	b := ckSchema[ckRootMoney]()
	if c := Check(a, b); c.Verdict != Incompatible || c.Reasons[0].Path != "ckRootMoney.value (1)" {
		t.Errorf("custom root: %s", c)
	}
}

func TestCheckKeyCodec(t *testing.T) {
	ckForgetMigration(t, "ck.keymoney", 1)
	Register[ckKeyMoney](ckMoneyCodec[ckKeyMoney]{"ck.keymoney", 1, 1, ckUnitsKey})
	a := ckSchema[ckKeyMoneyFld]()
	if c := CheckKey(a, a); c.Verdict != AsIs {
		t.Errorf("same key codec: %s", c)
	}
	Register[ckKeyMoney](ckMoneyCodec[ckKeyMoney]{"ck.keymoney", 2, 1, ckUnitsKey})
	RegisterMigration[ckKeyMoney](1, func([]byte, *ckKeyMoney) error { return nil })
	b := ckSchema[ckKeyMoneyFld]()
	if c := Check(a, b); c.Verdict != AfterMigration {
		t.Errorf("value with a migration: %s", c)
	}
	if c := CheckKey(a, b); c.Verdict != Incompatible || !strings.HasPrefix(c.Reasons[0].Rule, "state keys must encode identically; codec ck.keymoney changed") {
		t.Errorf("key with a migration: %s", c)
	}
}

func ckUnitsVer(v *ckVerMoney) *int64       { return &v.Units }
func ckUnitsName(v *ckNameMoney) *int64     { return &v.Units }
func ckUnitsSample(v *ckSampleMoney) *int64 { return &v.Units }
func ckUnitsKind(v *ckKindMoney) *int64     { return &v.Units }
func ckUnitsKey(v *ckKeyMoney) *int64       { return &v.Units }
func ckUnitsRoot(v *ckRootMoney) *int64     { return &v.Units }
