package serde

import (
	"encoding/binary"
	"reflect"
	"slices"
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
	// reserved and reservedNames come from blank fields tagged
	// proto:"reserved=...": numbers and names the type must not use again.
	reserved      []Range
	reservedNames []string
	// allBits has a bit per field of the first 64 (by index), sliceBits
	// those of them that are repeated: the decoder resets the fields whose
	// bits it did not see, and checks seen repeated fields for empty runs.
	allBits, sliceBits uint64
	// ptrBits are the pointer fields among the first 64, which the decoder
	// resets inline: a fresh AnyValue leaves seven of its eight unseen.
	ptrBits uint64
	// flat is set when every field, at most 64 of them, is a singular
	// string, number or flat message held by value, and there is no
	// Unknown field: decodeFlat decodes it (see isFlat).
	flat bool
	// fast maps a one-byte key (numbers 1..15) with the field's expected
	// wire type to the field, so the decoder skips key parsing and checks.
	fast [128]*field
	// prog is the encode program: the fields in number order, with nested
	// structs held by value inlined between opBegin and opEnd so the encoder
	// walks them without a call per message.
	prog []encOp
	// oneofs are the groups of fields tagged oneof=name, in the order their
	// first member is declared in the Go struct.
	oneofs []*oneof
}

// oneof is a group of pointer fields of which at most one is set.
type oneof struct {
	name    string   // the proto name of the group
	members []*field // in number order
	// offsets are the members' offsets, in the order of members: the
	// encoder scans them for the member set without touching each field.
	offsets []uintptr
}

// clearOthers sets every member of g but f to nil in the struct at p: a
// member read from the wire replaces the one read before, as in protobuf.
func (g *oneof) clearOthers(f *field, p unsafe.Pointer) {
	for _, o := range g.members {
		// Stored only when set: a pointer store has a write barrier, and
		// in a fresh value every member is nil.
		if pp := (*unsafe.Pointer)(unsafe.Add(p, o.offset)); o != f && *pp != nil {
			*pp = nil
		}
	}
}

// encOp is one step of an encode program.
type encOp struct {
	offset   uintptr // from the base of the current level: the program's struct or a loop's element
	f        *field
	elemSize uintptr // opLoopEnd: the size of one element
	op       op
	tag1     byte   // the key when it is one byte long (numbers 1..15), else 0
	level    uint8  // inlining depth, added to the nesting depth of calls made here
	jump     int32  // opLoop: index of its opLoopEnd; opLoopEnd: index of its opLoop; opPtr: index past its opPtrEnd
	unkn     int    // opEnd, opLoopEnd: offset of the inlined struct's Unknown field, or -1
	path     string // Go path of the field below the program's struct, for errors
}

// maxInline bounds how many by-value structs and loops deep a program
// inlines.
const maxInline = 8

// buildProg compiles m.prog. It runs after every plan of a compile pass is
// complete, since it reads the fields of nested plans.
func (m *message) buildProg() {
	m.flat = m.isFlat()
	prog := appendProg(nil, m, 0, 0, "", []*message{m})
	for i := range prog {
		if o := &prog[i]; o.f.tagLen == 1 {
			o.tag1 = o.f.tag[0]
		}
	}
	// An opEnd followed by the opBegin of a sibling (an order line's
	// UnitPrice, then its LineTotal) becomes one opEndBegin in appendFast,
	// one dispatch fewer; the opBegin stays in place for appendMessage,
	// which runs opEndBegin as opEnd, and for jumps.
	for i := 0; i+1 < len(prog); i++ {
		if e, b := &prog[i], &prog[i+1]; e.op == opEnd && e.unkn < 0 && b.op == opBegin && b.tag1 != 0 && e.level == b.level {
			e.op = opEndBegin
		}
	}
	m.prog = prog
}

// isFlat reports whether decodeFlat can decode m: at most 64 fields, no
// Unknown field, and every field a singular string or number, or a struct
// held by value that is flat itself (structs cannot hold themselves by
// value, so the recursion ends).
func (m *message) isFlat() bool {
	if len(m.fields) > 64 || m.hasUnkwn {
		return false
	}
	for i := range m.fields {
		f := &m.fields[i]
		switch {
		case f.card != cSingular:
			return false
		case f.op == opString, f.op == opVarint64, f.op == opScalar:
		case f.op == opMessage && f.msg.isFlat():
		default:
			return false
		}
	}
	return true
}

// appendProg appends the ops of m's fields, at base, to prog. chain holds
// the messages being inlined, so a recursive type is not inlined into itself.
//
// The members of oneofs come last, a group at a time in declaration order:
// protobuf-go writes them after all other fields ("to preserve compatibility
// with historic wire output", internal/impl and order.LegacyFieldOrder), so
// its deterministic bytes put them there too.
func appendProg(prog []encOp, m *message, base uintptr, level uint8, path string, chain []*message) []encOp {
	for i := range m.fields {
		f := &m.fields[i]
		fpath := path + "." + f.goName
		switch {
		case f.oneof != nil:
			continue // below
		case f.op == opMessage && level < maxInline:
			prog = append(prog, encOp{f: f, offset: base + f.offset, op: opBegin, level: level, path: fpath})
			prog = appendProg(prog, f.msg, base+f.offset, level+1, fpath, chain)
			unkn := -1
			if f.msg.hasUnkwn {
				unkn = int(base+f.offset) + f.msg.unknown
			}
			prog = append(prog, encOp{f: f, op: opEnd, level: level, unkn: unkn, path: fpath})
		case f.op == opPointer && f.kind == kMessage && level < maxInline && !slices.Contains(chain, f.msg):
			// A *struct: its ops run at offsets from the target between
			// opPtr, which skips to past opPtrEnd when the pointer is nil,
			// and opPtrEnd.
			ptr := len(prog)
			prog = append(prog, encOp{f: f, offset: base + f.offset, op: opPtr, level: level, path: fpath})
			prog = appendProg(prog, f.msg, 0, level+1, fpath, append(chain[:len(chain):len(chain)], f.msg))
			unkn := -1
			if f.msg.hasUnkwn {
				unkn = f.msg.unknown
			}
			prog[ptr].jump = int32(len(prog) + 1)
			prog = append(prog, encOp{f: f, op: opPtrEnd, level: level, unkn: unkn, path: fpath})
		case f.op == opRepeated && f.kind == kMessage && !f.elemPtr && level < maxInline && !slices.Contains(chain, f.msg):
			// A repeated struct held by value: the element's ops run in a
			// loop between opLoop and opLoopEnd, at offsets from the
			// element.
			loop := len(prog)
			prog = append(prog, encOp{f: f, offset: base + f.offset, op: opLoop, level: level, path: fpath})
			prog = appendProg(prog, f.msg, 0, level+1, fpath, append(chain[:len(chain):len(chain)], f.msg))
			unkn := -1
			if f.msg.hasUnkwn {
				unkn = f.msg.unknown
			}
			prog[loop].jump = int32(len(prog))
			prog = append(prog, encOp{f: f, op: opLoopEnd, level: level, unkn: unkn, elemSize: f.elemSize, jump: int32(loop), path: fpath})
		default:
			o := encOp{f: f, offset: base + f.offset, op: f.op, level: level, path: fpath}
			if o.op == opScalar {
				switch {
				case f.kind == kInt32 && f.size == 4:
					o.op = opInt32
				case f.kind == kUint32 && f.size == 4:
					o.op = opUint32
				case (f.kind == kFixed64 || f.kind == kSfixed64) && f.size == 8 || f.kind == kDouble:
					o.op = opFixed64
				case (f.kind == kFixed32 || f.kind == kSfixed32) && f.size == 4 || f.kind == kFloat:
					o.op = opFixed32
				case f.kind == kBytes:
					o.op = opBytes
				}
			}
			prog = append(prog, o)
		}
	}
	for _, g := range m.oneofs {
		// One op for the group, with its first member, at the struct's
		// base plus that member's offset (the others are found from it).
		f := g.members[0]
		prog = append(prog, encOp{f: f, offset: base + f.offset, op: opOneof, level: level, path: path})
	}
	return prog
}

// field is one compiled field operation: where the value lives and how it is
// written.
type field struct {
	// Read on every encode and decode; kept together in the first cache line.
	offset       uintptr
	msg          *message // for kMessage
	elemSize     uintptr  // size of one slice element
	op           op       // the encode operation
	kind         kind
	card         card
	size         uint8 // Go width in bytes of integer elements
	wt           uint8 // wire type of one element
	tagLen       uint8
	packedTagLen uint8
	elemPtr      bool    // slice elements are pointers ([]*T)
	bit          uint64  // 1 << idx for the first 64 fields, else 0
	tag          [5]byte // the encoded key (number << 3 | wire type)
	packedTag    [5]byte // the key of a packed repeated scalar (wire type 2)
	tagWord      uint64  // tag[:tagLen] as a little-endian word, for one 8-byte store
	num          uint32
	idx          int // position in message.fields

	goName    string
	protoName string
	typ       reflect.Type // the field's Go type
	elemType  reflect.Type // the element type: slice element, pointer target, map value
	cust      *customCodec // for kCustom
	mapKey    *field       // for cMap: the entry's key, at offset 0 of a K
	mapVal    *field       // for cMap: the entry's value, at offset 0 of a V
	mapOps    *mapOps      // for cMap
	oneof     *oneof       // the group of a oneof member, else nil
	// slot and sliceType serve Decode's chunked allocation of pointer
	// targets (alloc.go): the chunk slot, and []elemType.
	slot      uint32
	sliceType reflect.Type
}

// op selects the encode loop's case for a field: card and kind folded into
// one switch.
type op uint8

const (
	opScalar   op = iota // singular scalar, omitted when zero
	opString             // singular string
	opVarint64           // singular int64/uint64 held in 8 bytes
	opMessage            // singular struct held by value, always written
	opTime               // singular time.Time or time.Duration, omitted when zero
	opCustom             // singular value with a registered codec
	opPointer            // *T, written when non-nil
	opPacked             // repeated scalar
	opRepeated           // repeated string, bytes, message, time or custom
	opMap
	opBegin   // start of an inlined struct: key and a length placeholder
	opEnd     // end of an inlined struct: fix the length
	opLoop    // start of an inlined repeated struct: the first element's key
	opLoopEnd // end of one element: fix its length, go on with the next
	opInt32   // singular int32 held in 4 bytes (program only)
	opPtr     // start of an inlined *struct: skip it if nil, else key and a length placeholder
	opPtrEnd  // end of an inlined *struct: fix the length, back to the struct holding the pointer
	// Singular scalars the program writes without calls (program only):
	// uint32 held in 4 bytes, fixed64/sfixed64/double and
	// fixed32/sfixed32/float held in their width, bytes.
	opUint32
	opFixed64
	opFixed32
	opBytes
	// opOneof is a member of a oneof (a pointer) in field.op, and the whole
	// group in a program: the member that is set, after all other fields.
	opOneof
	// opEndBegin is an opEnd whose next op is an opBegin at the same level
	// (program only): appendFast runs both, appendMessage the opEnd.
	opEndBegin
)

// setOp derives f.op from f.card and f.kind.
func (f *field) setOp() {
	switch f.card {
	case cPointer:
		f.op = opPointer
	case cSlice:
		f.op = opRepeated
		if f.kind.packable() {
			f.op = opPacked
		}
	case cMap:
		f.op = opMap
	default:
		switch f.kind {
		case kString:
			f.op = opString
		case kInt64, kUint64:
			f.op = opVarint64
		case kMessage:
			f.op = opMessage
		case kTime, kDuration:
			f.op = opTime
		case kCustom:
			f.op = opCustom
		default:
			f.op = opScalar
		}
	}
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
	f.setOp()
	t := appendVarint(nil, uint64(f.num)<<3|uint64(f.wt))
	f.tagLen = uint8(copy(f.tag[:], t))
	var w [8]byte
	copy(w[:], t)
	f.tagWord = binary.LittleEndian.Uint64(w[:])
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
