package serde

import (
	"reflect"
	"unsafe"
)

// kind is the protobuf type of a field's element, with the Go memory width
// kept separately in field.size.
type kind uint8

const (
	kBool kind = iota
	kInt32
	kInt64
	kUint32
	kUint64
	kSint32
	kSint64
	kFixed32
	kFixed64
	kSfixed32
	kSfixed64
	kFloat
	kDouble
	kString
	kBytes
	kMessage  // a struct compiled into its own plan
	kTime     // time.Time as google.protobuf.Timestamp
	kDuration // time.Duration as google.protobuf.Duration
	kCustom   // a type with a registered codec
)

// card is how a field holds its elements.
type card uint8

const (
	cSingular card = iota // the value in place; zero values are omitted
	cPointer              // *T: present when non-nil
	cSlice                // []T: repeated
	cMap                  // map[K]V: repeated entries with key 1 and value 2
)

// message is the compiled plan of one Go struct type.
type message struct {
	typ      reflect.Type
	goName   string
	fields   []field // in field-number order
	byNum    []int16 // field number -> index into fields + 1, for small numbers
	unknown  int     // offset of the Unknown field, or -1
	synth    bool    // a non-struct T wrapped as a message with field 1
	hasUnkwn bool
}

// field is one compiled field operation: where the value lives and how it is
// written.
type field struct {
	num       uint32
	idx       int // position in message.fields
	kind      kind
	card      card
	size      uint8 // Go width in bytes of integer elements
	wt        uint8 // wire type of one element
	tagLen    uint8
	elemPtr   bool    // slice elements are pointers ([]*T)
	tag       [5]byte // the encoded key (number << 3 | wire type)
	offset    uintptr
	elemSize  uintptr // size of one slice element
	goName    string
	protoName string
	typ       reflect.Type // the field's Go type
	elemType  reflect.Type // the element type: slice element, pointer target, map value
	msg       *message     // for kMessage
	cust      *customCodec // for kCustom
	mapKey    *field       // for cMap: the entry's key, at offset 0 of a K
	mapVal    *field       // for cMap: the entry's value, at offset 0 of a V
	mapOps    *mapOps      // for cMap
	// packedTag is the key of a packed repeated scalar (wire type 2).
	packedTag    [5]byte
	packedTagLen uint8
}

// packable reports whether a repeated field of this kind is written packed.
func (k kind) packable() bool { return k <= kDouble }

// wireType is the wire type of one element of kind k.
func (k kind) wireType() uint8 {
	switch k {
	case kFixed32, kSfixed32, kFloat:
		return wireFixed32
	case kFixed64, kSfixed64, kDouble:
		return wireFixed64
	case kString, kBytes, kMessage, kTime, kDuration, kCustom:
		return wireBytes
	}
	return wireVarint
}

func (f *field) setTag() {
	t := appendVarint(nil, uint64(f.num)<<3|uint64(f.wt))
	f.tagLen = uint8(copy(f.tag[:], t))
	p := appendVarint(nil, uint64(f.num)<<3|wireBytes)
	f.packedTagLen = uint8(copy(f.packedTag[:], p))
}

// appendTag appends the field's key.
func appendTag(b []byte, f *field) []byte {
	if f.tagLen == 1 {
		return append(b, f.tag[0])
	}
	return append(b, f.tag[:f.tagLen]...)
}

// sliceHeader is the memory layout of every Go slice.
type sliceHeader struct {
	data unsafe.Pointer
	len  int
	cap  int
}
