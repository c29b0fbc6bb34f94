package serde_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/serde"
)

var updateProtoFile = flag.Bool("update", false, "rewrite testdata/protofile/*.proto")

// ptStatus names its values, including 0 and a negative one.
type ptStatus int32

func (ptStatus) EnumValues() map[string]int32 {
	return map[string]int32{"PT_STATUS_UNKNOWN": 0, "PT_STATUS_PENDING": 1, "PT_STATUS_SHIPPED": 2, "PT_STATUS_RETURNED": -1}
}

// ptChannel names its values but not 0, so ProtoFile adds PT_CHANNEL_UNSPECIFIED.
type ptChannel int32

func (ptChannel) EnumValues() map[string]int32 {
	return map[string]int32{"PT_CHANNEL_WEB": 1, "PT_CHANNEL_APP": 2}
}

// ptPriority names no values.
type ptPriority int32

type ptMoney struct {
	Currency string `proto:"1"`
	Minor    int64  `proto:"2,zigzag"`
}

type ptParcel struct {
	ID      string    `proto:"1,name=id"`
	WeightG uint32    `proto:"2,fixed"`
	Dims    []float32 `proto:"3"`
	Fragile bool      `proto:"4"`
}

type ptNode struct {
	Name     string    `proto:"1"`
	Children []*ptNode `proto:"2"`
	Weight   float64   `proto:"3"`
}

// ptMeter has a registered codec (see pfSetup): a field of it is bytes.
type ptMeter struct{ Millis int64 }

type ptMeterCodec struct{}

func (ptMeterCodec) Append(dst []byte, v *ptMeter) ([]byte, error) {
	return binary.LittleEndian.AppendUint64(dst, uint64(v.Millis)), nil
}

func (ptMeterCodec) Decode(src []byte, v *ptMeter) error {
	if len(src) != 8 {
		return fmt.Errorf("meter: %d bytes", len(src))
	}
	v.Millis = int64(binary.LittleEndian.Uint64(src))
	return nil
}

func (ptMeterCodec) Size(*ptMeter) int       { return 8 }
func (ptMeterCodec) CodecName() string       { return "eddy.test.meter" }
func (ptMeterCodec) CodecVersion() uint32    { return 2 }
func (ptMeterCodec) encode(v ptMeter) []byte { b, _ := ptMeterCodec{}.Append(nil, &v); return b }

type ptShipment struct {
	_          struct{}             `proto:"reserved=4,9-11,name=old_total"`
	ID         string               `proto:"1,name=id"`
	Status     ptStatus             `proto:"2"`
	Priority   ptPriority           `proto:"3"`
	Parcels    []ptParcel           `proto:"5"`
	ByCode     map[string]ptParcel  `proto:"6,name=by_code"`
	Notes      map[int64]string     `proto:"7"`
	Tags       []string             `proto:"8"`
	Counts     []int32              `proto:"12"`
	CreatedAt  time.Time            `proto:"13,name=created_at"`
	Timeout    time.Duration        `proto:"14"`
	Retries    *int64               `proto:"15"`
	Comment    *string              `proto:"16"`
	Delta      int64                `proto:"17,zigzag"`
	Checksum   uint64               `proto:"18,fixed"`
	Offset     int32                `proto:"19,fixed"`
	Cost       ptMoney              `proto:"20"`
	Insurance  *ptMoney             `proto:"21"`
	Route      *ptNode              `proto:"22"`
	Channels   []ptChannel          `proto:"23"`
	Level      int8                 `proto:"24"`
	Payload    []byte               `proto:"25"`
	Ratio      float32              `proto:"26"`
	ByStatus   map[string]ptStatus  `proto:"27,name=by_status"`
	Boxes      map[uint32]*ptParcel `proto:"28"`
	Flag       *bool                `proto:"29"`
	Meter      ptMeter              `proto:"30"`
	Port       uint16               `proto:"31"`
	Deadlines  []time.Time          `proto:"32"`
	Sparse     int64                `proto:"1000"`
	Calibrated *ptMeter             `proto:"33"`
}

// ptTagList is not a struct: it is wrapped as a message with field 1.
type ptTagList []string

var pfSetupOnce sync.Once

func pfSetup() { pfSetupOnce.Do(func() { serde.Register[ptMeter](ptMeterCodec{}) }) }

func pfShipment() ptShipment {
	retries, comment, flagv := int64(0), "leave at the door", true
	return ptShipment{
		ID:       "shp-1",
		Status:   ptStatus(-1),
		Priority: ptPriority(7), // not declared: proto3 enums are open
		Parcels: []ptParcel{
			{ID: "p1", WeightG: 1200, Dims: []float32{1.5, 2, float32(math.Inf(1))}, Fragile: true},
			{}, // an empty element is still an element
			{ID: "p3", WeightG: math.MaxUint32},
		},
		ByCode:    map[string]ptParcel{"b": {ID: "pb"}, "a": {ID: "pa", Dims: []float32{-0.5}}, "": {}},
		Notes:     map[int64]string{-3: "minus three", 0: "", 1 << 40: "big"},
		Tags:      []string{"x", "", "ünïcødé"},
		Counts:    []int32{0, -1, math.MaxInt32, math.MinInt32},
		CreatedAt: time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC),
		Timeout:   -(90*time.Second + 250*time.Millisecond),
		Retries:   &retries, // present although zero
		Comment:   &comment,
		Delta:     -123456789,
		Checksum:  math.MaxUint64,
		Offset:    -42,
		Cost:      ptMoney{Currency: "EUR", Minor: -999},
		Insurance: &ptMoney{}, // present although empty
		Route: &ptNode{Name: "hub", Weight: 0.25, Children: []*ptNode{
			{Name: "a", Children: []*ptNode{{Name: "a1"}, {Name: "a2", Weight: -1}}},
			{Name: "b"},
		}},
		Channels:   []ptChannel{1, 2, 0, 9},
		Level:      -128,
		Payload:    []byte{0, 1, 2, 0xff},
		Ratio:      -3.5,
		ByStatus:   map[string]ptStatus{"ok": 2, "zero": 0, "odd": 99},
		Boxes:      map[uint32]*ptParcel{7: {ID: "seven"}, 0: {}},
		Flag:       &flagv,
		Meter:      ptMeter{Millis: 1234},
		Port:       65535,
		Deadlines:  []time.Time{time.Unix(-86400*365, 5).UTC(), time.Unix(1, 0).UTC()},
		Sparse:     1,
		Calibrated: &ptMeter{Millis: -1},
	}
}

// pfCase encodes a Go value with serde and decodes bytes back into its type.
type pfCase struct {
	msg    string // the proto message name
	label  string
	encode func() ([]byte, reflect.Value, error)
	decode func([]byte) (reflect.Value, error)
}

func pfSample[T any](msg, label string, v T) pfCase {
	return pfCase{
		msg: msg, label: label,
		encode: func() ([]byte, reflect.Value, error) {
			c, err := serde.For[T]()
			if err != nil {
				return nil, reflect.Value{}, err
			}
			b, err := c.Append(nil, &v)
			return b, reflect.ValueOf(v), err
		},
		decode: func(b []byte) (reflect.Value, error) {
			c, err := serde.For[T]()
			if err != nil {
				return reflect.Value{}, err
			}
			var out T
			err = c.Decode(b, &out)
			return reflect.ValueOf(out), err
		},
	}
}

// compileProto compiles text with protocompile; warnings fail the test too.
func compileProto(t *testing.T, text string) protoreflect.FileDescriptor {
	t.Helper()
	var warnings []string
	rep := reporter.NewReporter(
		func(err reporter.ErrorWithPos) error { return err },
		func(w reporter.ErrorWithPos) { warnings = append(warnings, w.Error()) },
	)
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{"x.proto": text}),
		}),
		Reporter: rep,
	}
	files, err := c.Compile(context.Background(), "x.proto")
	if err != nil {
		t.Fatalf("the generated .proto does not compile: %v\n%s", err, numbered(text))
	}
	if len(warnings) > 0 {
		t.Fatalf("the generated .proto compiles with warnings:\n%s\n%s", strings.Join(warnings, "\n"), numbered(text))
	}
	return files[0]
}

func numbered(text string) string {
	var b strings.Builder
	for i, line := range strings.Split(text, "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, line)
	}
	return b.String()
}

// TestProtoFileRoundTrip compiles the generated file and checks, for every
// message it declares, that a protobuf library reads serde's bytes into the
// same values and writes the same bytes back, which serde reads again.
func TestProtoFileRoundTrip(t *testing.T) {
	pfSetup()
	text, err := serde.ProtoFile("eddy.test.v1", ptShipment{}, ptTagList{}, datagen.OrderCreatedEvent{}, &datagen.GPSPoint{})
	if err != nil {
		t.Fatal(err)
	}
	fd := compileProto(t, text)

	order := datagen.SampleOrder(7)
	cases := []pfCase{
		pfSample("ptShipment", "populated", pfShipment()),
		pfSample("ptShipment", "zero", ptShipment{}),
		pfSample("ptParcel", "populated", ptParcel{ID: "p", WeightG: 3, Dims: []float32{float32(math.NaN()), 0}, Fragile: true}),
		pfSample("ptMoney", "populated", ptMoney{Currency: "USD", Minor: math.MinInt64}),
		pfSample("ptNode", "tree", *pfShipment().Route),
		pfSample("ptTagList", "populated", ptTagList{"a", "", "c"}),
		pfSample("OrderCreatedEvent", "sample", order),
		pfSample("OrderLineItem", "sample", order.Items[0]),
		pfSample("Money", "sample", order.Total),
		pfSample("OrderMetadata", "sample", order.Metadata),
		pfSample("GPSPoint", "populated", datagen.GPSPoint{DriverID: "drv-9", Lat: 45.764, Lon: 4.8357, SpeedKmh: 87.5,
			Timestamp: time.Date(2025, 11, 30, 23, 59, 59, 999_999_999, time.UTC)}),
		pfSample("GPSPoint", "zero", datagen.GPSPoint{}),
	}
	byMsg := map[string][]pfCase{}
	for _, c := range cases {
		byMsg[c.msg] = append(byMsg[c.msg], c)
	}
	msgs := fd.Messages()
	if msgs.Len() != len(byMsg) {
		t.Errorf("the file declares %d messages, the test has samples for %d", msgs.Len(), len(byMsg))
	}
	for i := 0; i < msgs.Len(); i++ {
		md := msgs.Get(i)
		name := string(md.Name())
		if len(byMsg[name]) == 0 {
			t.Errorf("message %s has no sample value in this test", name)
		}
		for _, c := range byMsg[name] {
			t.Run(name+"/"+c.label, func(t *testing.T) {
				b, gv, err := c.encode()
				if err != nil {
					t.Fatal(err)
				}
				dyn := dynamicpb.NewMessage(md)
				if err := proto.Unmarshal(b, dyn); err != nil {
					t.Fatalf("protobuf cannot read serde's bytes: %v", err)
				}
				if u := dyn.GetUnknown(); len(u) > 0 {
					t.Errorf("serde's bytes have %d bytes of fields the .proto does not declare", len(u))
				}
				if err := compareValue(name, gv, dyn); err != nil {
					t.Errorf("protobuf read serde's bytes as a different value: %v", err)
				}
				back, err := proto.MarshalOptions{Deterministic: true}.Marshal(dyn)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(back, b) {
					t.Errorf("protobuf writes different bytes:\nserde    %x\nprotobuf %x", b, back)
				}
				dv, err := c.decode(back)
				if err != nil {
					t.Fatalf("serde cannot read protobuf's bytes: %v", err)
				}
				if err := compareValue(name, dv, dyn); err != nil {
					t.Errorf("serde read protobuf's bytes as a different value: %v", err)
				}
			})
		}
	}

	// The enums, as declared.
	wantEnums := map[string]string{
		"ptStatus":   "PT_STATUS_UNKNOWN=0 PT_STATUS_RETURNED=-1 PT_STATUS_PENDING=1 PT_STATUS_SHIPPED=2",
		"ptChannel":  "PT_CHANNEL_UNSPECIFIED=0 PT_CHANNEL_WEB=1 PT_CHANNEL_APP=2",
		"ptPriority": "PT_PRIORITY_UNSPECIFIED=0",
	}
	if fd.Enums().Len() != len(wantEnums) {
		t.Errorf("the file declares %d enums, want %d", fd.Enums().Len(), len(wantEnums))
	}
	for name, want := range wantEnums {
		ed := fd.Enums().ByName(protoreflect.Name(name))
		if ed == nil {
			t.Errorf("enum %s is missing", name)
			continue
		}
		var got []string
		for i := 0; i < ed.Values().Len(); i++ {
			v := ed.Values().Get(i)
			got = append(got, fmt.Sprintf("%s=%d", v.Name(), v.Number()))
		}
		if g := strings.Join(got, " "); g != want {
			t.Errorf("enum %s = %s, want %s", name, g, want)
		}
	}

	// Declarations that the round trip does not see.
	ship := fd.Messages().ByName("ptShipment")
	var reserved []string
	for i := 0; i < ship.ReservedRanges().Len(); i++ {
		r := ship.ReservedRanges().Get(i)
		reserved = append(reserved, fmt.Sprintf("%d-%d", r[0], r[1]-1))
	}
	if g := strings.Join(reserved, ","); g != "4-4,9-11" {
		t.Errorf("reserved ranges %s, want 4-4,9-11", g)
	}
	if n := ship.ReservedNames(); n.Len() != 1 || n.Get(0) != "old_total" {
		t.Errorf("reserved names %v, want old_total", n)
	}
	for _, c := range []struct {
		field    string
		kind     protoreflect.Kind
		presence bool
	}{
		{"retries", protoreflect.Int64Kind, true},
		{"comment", protoreflect.StringKind, true},
		{"flag", protoreflect.BoolKind, true},
		{"delta", protoreflect.Sint64Kind, false},
		{"checksum", protoreflect.Fixed64Kind, false},
		{"offset", protoreflect.Sfixed32Kind, false},
		{"meter", protoreflect.BytesKind, false},
		{"calibrated", protoreflect.BytesKind, true},
		{"port", protoreflect.Uint32Kind, false},
		{"level", protoreflect.Int32Kind, false},
	} {
		f := ship.Fields().ByName(protoreflect.Name(c.field))
		if f == nil {
			t.Errorf("field ptShipment.%s is missing", c.field)
			continue
		}
		if f.Kind() != c.kind || f.HasPresence() != c.presence {
			t.Errorf("field ptShipment.%s: kind %v presence %v, want %v %v", c.field, f.Kind(), f.HasPresence(), c.kind, c.presence)
		}
	}
	for _, want := range []string{
		"  // custom codec eddy.test.meter v2: opaque to other languages\n  bytes meter = 30;\n",
		"  // Go int8: -128..127 (Eddy rejects numbers outside the range)\n  int32 level = 24;\n",
		"  reserved 4, 9 to 11;\n  reserved \"old_total\";\n",
		"import \"google/protobuf/duration.proto\";\nimport \"google/protobuf/timestamp.proto\";\n",
		"// Go type github.com/eddyflow/eddy/serde_test.ptTagList, wrapped as a message with one field.\nmessage ptTagList {\n  repeated string value = 1;\n}\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the file lacks %q:\n%s", want, text)
		}
	}
}

// compareValue compares a Go value that serde encodes as a message with a
// protobuf message, field by field.
func compareValue(path string, gv reflect.Value, m protoreflect.Message) error {
	md := m.Descriptor()
	if gv.Kind() != reflect.Struct || gv.Type() == reflect.TypeFor[time.Time]() {
		// A wrapper: the whole value is field 1.
		if md.Fields().Len() != 1 {
			return fmt.Errorf("%s: wrapper message has %d fields", path, md.Fields().Len())
		}
		return compareField(path+".value", gv, md.Fields().ByNumber(1), m)
	}
	seen := 0
	for i := 0; i < gv.NumField(); i++ {
		sf := gv.Type().Field(i)
		tag, ok := sf.Tag.Lookup("proto")
		if !ok || tag == "-" || tag == "unknown" || sf.Name == "_" {
			continue
		}
		num, err := strconv.Atoi(strings.Split(tag, ",")[0])
		if err != nil {
			return fmt.Errorf("%s.%s: tag %q: %v", path, sf.Name, tag, err)
		}
		fd := md.Fields().ByNumber(protoreflect.FieldNumber(num))
		if fd == nil {
			return fmt.Errorf("%s.%s: message %s has no field %d", path, sf.Name, md.FullName(), num)
		}
		seen++
		if err := compareField(path+"."+sf.Name, gv.Field(i), fd, m); err != nil {
			return err
		}
	}
	if seen != md.Fields().Len() {
		return fmt.Errorf("%s: Go type %s has %d fields, message %s %d", path, gv.Type(), seen, md.FullName(), md.Fields().Len())
	}
	return nil
}

func compareField(path string, gv reflect.Value, fd protoreflect.FieldDescriptor, m protoreflect.Message) error {
	switch {
	case fd.IsMap():
		pm := m.Get(fd).Map()
		if pm.Len() != gv.Len() {
			return fmt.Errorf("%s: %d map entries, Go has %d", path, pm.Len(), gv.Len())
		}
		iter := gv.MapRange()
		for iter.Next() {
			k := iter.Key()
			pv := pm.Get(goMapKey(k, fd.MapKey()))
			if !pv.IsValid() {
				return fmt.Errorf("%s: map lacks key %v", path, k)
			}
			v := iter.Value()
			if v.Kind() == reflect.Pointer {
				v = v.Elem()
			}
			if err := compareElem(fmt.Sprintf("%s[%v]", path, k), v, fd.MapValue(), pv); err != nil {
				return err
			}
		}
		return nil
	case fd.IsList():
		l := m.Get(fd).List()
		if l.Len() != gv.Len() {
			return fmt.Errorf("%s: %d list elements, Go has %d", path, l.Len(), gv.Len())
		}
		for i := 0; i < gv.Len(); i++ {
			v := gv.Index(i)
			if v.Kind() == reflect.Pointer {
				v = v.Elem()
			}
			if err := compareElem(fmt.Sprintf("%s[%d]", path, i), v, fd, l.Get(i)); err != nil {
				return err
			}
		}
		return nil
	case gv.Kind() == reflect.Pointer:
		if has := m.Has(fd); has == gv.IsNil() {
			return fmt.Errorf("%s: present %v, Go pointer nil %v", path, has, gv.IsNil())
		}
		if gv.IsNil() {
			return nil
		}
		return compareElem(path, gv.Elem(), fd, m.Get(fd))
	}
	switch gv.Type() {
	case reflect.TypeFor[time.Time](), reflect.TypeFor[time.Duration]():
		if has := m.Has(fd); has == gv.IsZero() {
			return fmt.Errorf("%s: present %v, Go zero %v (serde omits zero times)", path, has, gv.IsZero())
		}
		if gv.IsZero() {
			return nil
		}
	default:
		if fd.Message() != nil && !m.Has(fd) {
			return fmt.Errorf("%s: a struct held by value is always written, but the message lacks it", path)
		}
	}
	return compareElem(path, gv, fd, m.Get(fd))
}

// compareElem compares one element: a singular value, a list element or a
// map value.
func compareElem(path string, gv reflect.Value, fd protoreflect.FieldDescriptor, pv protoreflect.Value) error {
	bad := func(got any) error {
		return fmt.Errorf("%s: protobuf %v (%v), Go %v", path, got, fd.Kind(), gv.Interface())
	}
	switch gv.Type() {
	case reflect.TypeFor[time.Time]():
		sec, nanos := secondsNanos(pv.Message())
		tv := gv.Interface().(time.Time)
		if sec != tv.Unix() || nanos != int64(tv.Nanosecond()) {
			return bad(fmt.Sprintf("Timestamp{%d, %d}", sec, nanos))
		}
		return nil
	case reflect.TypeFor[time.Duration]():
		sec, nanos := secondsNanos(pv.Message())
		d := time.Duration(gv.Int())
		if sec != int64(d/time.Second) || nanos != int64(d%time.Second) {
			return bad(fmt.Sprintf("Duration{%d, %d}", sec, nanos))
		}
		return nil
	case reflect.TypeFor[ptMeter]():
		if want := (ptMeterCodec{}).encode(gv.Interface().(ptMeter)); !bytes.Equal(pv.Bytes(), want) {
			return bad(pv.Bytes())
		}
		return nil
	}
	switch gv.Kind() {
	case reflect.Struct:
		return compareValue(path, gv, pv.Message())
	case reflect.Bool:
		if pv.Bool() != gv.Bool() {
			return bad(pv.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		got := int64(0)
		if fd.Kind() == protoreflect.EnumKind {
			got = int64(pv.Enum())
		} else {
			got = pv.Int()
		}
		if got != gv.Int() {
			return bad(got)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if pv.Uint() != gv.Uint() {
			return bad(pv.Uint())
		}
	case reflect.Float32, reflect.Float64:
		got, want := pv.Float(), gv.Float()
		if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			return bad(got)
		}
	case reflect.String:
		if pv.String() != gv.String() {
			return bad(pv.String())
		}
	case reflect.Slice:
		if gv.Type().Elem().Kind() != reflect.Uint8 {
			return fmt.Errorf("%s: unexpected Go slice %s as an element", path, gv.Type())
		}
		if !bytes.Equal(pv.Bytes(), gv.Bytes()) {
			return bad(pv.Bytes())
		}
	default:
		return fmt.Errorf("%s: the test cannot compare Go %s", path, gv.Type())
	}
	return nil
}

func secondsNanos(m protoreflect.Message) (sec, nanos int64) {
	f := m.Descriptor().Fields()
	return m.Get(f.ByName("seconds")).Int(), m.Get(f.ByName("nanos")).Int()
}

func goMapKey(k reflect.Value, kd protoreflect.FieldDescriptor) protoreflect.MapKey {
	switch kd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(k.Bool()).MapKey()
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(k.Int())).MapKey()
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(k.Int()).MapKey()
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(uint32(k.Uint())).MapKey()
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(k.Uint()).MapKey()
	}
	return protoreflect.ValueOfString(k.String()).MapKey()
}

// TestProtoFileGolden pins the .proto of the demo types. Regenerate with
//
//	go test ./serde -run TestProtoFileGolden -update
func TestProtoFileGolden(t *testing.T) {
	got, err := serde.ProtoFile("eddy.demo.v1", datagen.OrderCreatedEvent{}, datagen.GPSPoint{})
	if err != nil {
		t.Fatal(err)
	}
	compileProto(t, got)
	path := filepath.Join("testdata", "protofile", "demo.proto")
	if *updateProtoFile {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./serde -run TestProtoFileGolden -update)", err)
	}
	if got != string(want) {
		t.Errorf("ProtoFile output differs from %s (if intended, rerun with -update):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
	// The order of the arguments does not matter, and repeats are merged.
	again, err := serde.ProtoFile("eddy.demo.v1", &datagen.GPSPoint{}, datagen.OrderCreatedEvent{}, datagen.Money{}, datagen.GPSPoint{})
	if err != nil {
		t.Fatal(err)
	}
	if again != got {
		t.Errorf("ProtoFile depends on the order of its arguments:\n%s", again)
	}
}

// pfItemA and pfItemB declare distinct types that are both named Item.
func pfItemA() any {
	type Item struct {
		N int32 `proto:"1"`
	}
	type Basket struct {
		Items []Item `proto:"1"`
	}
	return Basket{}
}

func pfItemB() any {
	type Item struct {
		S string `proto:"1"`
	}
	return &Item{}
}

func pfEnumItem() any {
	type Item int32
	type Holder struct {
		I Item `proto:"1"`
	}
	return Holder{}
}

type ptClashA int32

func (ptClashA) EnumValues() map[string]int32 { return map[string]int32{"UNKNOWN": 0} }

type ptClashB int32

func (ptClashB) EnumValues() map[string]int32 { return map[string]int32{"UNKNOWN": 0, "B": 1} }

type ptCaseClash int32

func (ptCaseClash) EnumValues() map[string]int32 {
	return map[string]int32{"PT_CASE_CLASH_RED": 1, "Red": 2, "ZERO": 0}
}

type ptBadUnspecified int32

func (ptBadUnspecified) EnumValues() map[string]int32 {
	return map[string]int32{"PT_BAD_UNSPECIFIED_UNSPECIFIED": 3}
}

type ptBadValueName int32

func (ptBadValueName) EnumValues() map[string]int32 { return map[string]int32{"A-B": 0} }

func TestProtoFileErrors(t *testing.T) {
	for _, pkg := range []string{"", "1shop", "shop..v1", "shop.v1.", ".shop", "shop-v1", "shop v1", "shop/v1", "café.v1"} {
		_, err := serde.ProtoFile(pkg, ptMoney{})
		if err == nil || !strings.Contains(err.Error(), "package") {
			t.Errorf("ProtoFile(%q): error %v, want one about the package", pkg, err)
		}
	}
	for _, pkg := range []string{"shop", "shop.v1", "_x.Y9.z_"} {
		if _, err := serde.ProtoFile(pkg, ptMoney{}); err != nil {
			t.Errorf("ProtoFile(%q): %v", pkg, err)
		}
	}

	errCase := func(name string, want []string, types ...any) {
		t.Helper()
		_, err := serde.ProtoFile("x.v1", types...)
		if err == nil {
			t.Errorf("%s: no error", name)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", name, err, w)
			}
		}
	}
	errCase("two Go types named Item",
		[]string{"serde_test.Item (field Basket.items of argument 1", "serde_test.Item (argument 2", "proto message Item", "declared in different functions"},
		pfItemA(), pfItemB())
	errCase("a message and an enum named Item",
		[]string{"serde_test.Item", "proto message and enum Item", "argument 1", "argument 2"},
		pfItemB(), pfEnumItem())
	errCase("two enums with the same value name",
		[]string{"UNKNOWN", "ptClashA", "ptClashB"},
		struct {
			A ptClashA `proto:"1"`
			B ptClashB `proto:"2"`
		}{})
	errCase("enum values that differ in case and prefix",
		[]string{"PT_CASE_CLASH_RED", "Red", "ptCaseClash"},
		struct {
			C ptCaseClash `proto:"1"`
		}{})
	errCase("the unspecified name with another number",
		[]string{"PT_BAD_UNSPECIFIED_UNSPECIFIED", "no value 0"},
		struct {
			C ptBadUnspecified `proto:"1"`
		}{})
	errCase("a value name that is no identifier",
		[]string{`"A-B"`},
		struct {
			C ptBadValueName `proto:"1"`
		}{})
	errCase("a field name that is no identifier",
		[]string{"Größe", "not a proto identifier"},
		struct {
			Größe int32 `proto:"1"`
		}{})
	errCase("fields with the same JSON name",
		[]string{"foo_bar", "fooBar", "JSON name"},
		struct {
			A int32 `proto:"1,name=foo_bar"`
			B int32 `proto:"2,name=fooBar"`
		}{})
	errCase("a nil argument", []string{"argument 2 is nil"}, ptMoney{}, nil)
	errCase("no types", []string{"no types"})
	errCase("a type serde cannot encode", []string{"argument 1", "no proto tag"}, struct{ A int32 }{})
}

// ptScoped has fields whose names would capture the unqualified names of the
// types they refer to: ProtoFile qualifies those references fully.
type ptScoped struct {
	Money  ptMoney            `proto:"1,name=ptMoney"`
	Google time.Time          `proto:"2,name=google"`
	Status ptStatus           `proto:"3,name=ptStatus"`
	Pairs  map[int32]ptMoney  `proto:"4"`
	Wait   time.Duration      `proto:"6"`
	Keyed  map[ptStatus]int16 `proto:"7"`
}

func TestProtoFileScopes(t *testing.T) {
	for _, pkg := range []string{"eddy.test.v1", "acme.google.v1", "google.acme"} {
		text, err := serde.ProtoFile(pkg, ptScoped{})
		if err != nil {
			t.Fatal(err)
		}
		fd := compileProto(t, text)
		md := fd.Messages().ByName("ptScoped")
		for field, want := range map[string]string{
			"ptMoney":  pkg + ".ptMoney",
			"google":   "google.protobuf.Timestamp",
			"ptStatus": pkg + ".ptStatus",
			"wait":     "google.protobuf.Duration",
		} {
			f := md.Fields().ByName(protoreflect.Name(field))
			var got protoreflect.FullName
			if f.Message() != nil {
				got = f.Message().FullName()
			} else if f.Enum() != nil {
				got = f.Enum().FullName()
			}
			if string(got) != want {
				t.Errorf("package %s: field %s has type %s, want %s", pkg, field, got, want)
			}
		}
		if k := md.Fields().ByName("keyed").MapKey().Kind(); k != protoreflect.Int32Kind {
			t.Errorf("enum map key declared as %v, want int32", k)
		}
		if !strings.Contains(text, "  // values Go int16: -32768..32767 (Eddy rejects numbers outside the range)\n  map<int32, int32> keyed = 7;\n") {
			t.Errorf("no range comment for the int16 map values:\n%s", text)
		}
		v := ptScoped{Money: ptMoney{Currency: "x"}, Google: time.Unix(5, 6), Status: 1,
			Pairs: map[int32]ptMoney{-1: {Minor: 2}}, Keyed: map[ptStatus]int16{2: -300}, Wait: time.Hour}
		b, err := serde.MustFor[ptScoped]().Append(nil, &v)
		if err != nil {
			t.Fatal(err)
		}
		dyn := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(b, dyn); err != nil {
			t.Fatal(err)
		}
		if err := compareValue("ptScoped", reflect.ValueOf(v), dyn); err != nil {
			t.Error(err)
		}
	}
}
