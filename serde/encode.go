package serde

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
	"unsafe"
)

// maxDepth bounds message nesting on encode and decode.
const maxDepth = 100

// EncodeError reports a value that cannot be encoded: a string that is not
// UTF-8, or nesting deeper than 100 (usually a cycle through pointers).
type EncodeError struct {
	Path   string // Go path of the field, e.g. OrderCreatedEvent.Items[3].SKU
	Reason string
}

func (e *EncodeError) Error() string {
	return fmt.Sprintf("serde: encoding field %s: %s", e.Path, e.Reason)
}

// encodeErr builds an EncodeError while unwinding, innermost segment first.
type encodeErr struct {
	segs   []string
	reason string
}

func (e *encodeErr) Error() string { return e.reason }

func wrapEncode(err error, seg string) error {
	if e, ok := err.(*encodeErr); ok {
		e.segs = append(e.segs, seg)
	}
	return err
}

func finishEncode(err error, m *message) error {
	e, ok := err.(*encodeErr)
	if !ok {
		return err
	}
	path := m.goName
	for i := len(e.segs) - 1; i >= 0; i-- {
		path += e.segs[i]
	}
	return &EncodeError{Path: path, Reason: e.reason}
}

// appendTop encodes a top-level value.
func appendTop(b []byte, m *message, p unsafe.Pointer) ([]byte, error) {
	b, err := appendMessage(b, m, p, 0)
	if err != nil {
		return b, finishEncode(err, m)
	}
	return b, nil
}

var zeros [10]byte

// appendMessage appends the fields of the struct at p in number order, then
// its unknown fields.
func appendMessage(b []byte, m *message, p unsafe.Pointer, depth int) ([]byte, error) {
	if depth > maxDepth {
		return b, &encodeErr{reason: "nesting deeper than 100 (a cycle through pointers?)"}
	}
	var err error
	var starts [maxInline]int
	sp := 0
	prog := m.prog
	for i := range prog {
		o := &prog[i]
		f := o.f
		fp := unsafe.Add(p, o.offset)
		switch o.op {
		case opBegin:
			b = appendTag(b, f)
			b = append(b, 0)
			starts[sp&(maxInline-1)] = len(b)
			sp++
		case opEnd:
			sp--
			if o.unkn >= 0 {
				b = append(b, *(*[]byte)(unsafe.Add(p, o.unkn))...)
			}
			b = fixLength(b, starts[sp&(maxInline-1)])
		case opString:
			s := *(*string)(fp)
			if len(s) == 0 {
				continue
			}
			// The ASCII test of validString, inline: most strings are short.
			bs := unsafe.Slice(unsafe.StringData(s), len(s))
			var acc uint64
			j := 0
			for ; j+8 <= len(bs); j += 8 {
				acc |= binary.LittleEndian.Uint64(bs[j : j+8])
			}
			for ; j < len(bs); j++ {
				acc |= uint64(bs[j])
			}
			if acc&0x8080808080808080 != 0 && !utf8.Valid(bs) {
				return b, &encodeErr{segs: []string{o.path}, reason: "invalid UTF-8 in a string field (use []byte for binary data)"}
			}
			if o.tag1 != 0 && len(s) < 0x80 {
				b = append(b, o.tag1, byte(len(s)))
			} else {
				b = appendTag(b, f)
				b = appendVarint(b, uint64(len(s)))
			}
			b = append(b, s...)
		case opVarint64:
			v := *(*uint64)(fp)
			if v == 0 {
				continue
			}
			if o.tag1 != 0 && v < 0x80 {
				b = append(b, o.tag1, byte(v))
			} else {
				b = appendTag(b, f)
				b = appendVarint(b, v)
			}
		case opMessage:
			b = appendTag(b, f)
			if b, err = appendNested(b, f.msg, fp, depth+int(o.level)); err != nil {
				return b, wrapEncode(err, o.path)
			}
		case opScalar:
			if isZero(f, fp) {
				continue
			}
			b = appendTag(b, f)
			b = appendScalar(b, f, fp)
		case opTime:
			if isZero(f, fp) {
				continue
			}
			if b, err = appendElem(b, f, fp, depth+int(o.level)); err != nil {
				return b, wrapEncode(err, o.path)
			}
		case opCustom:
			if b, err = appendElem(b, f, fp, depth+int(o.level)); err != nil {
				return b, wrapEncode(err, o.path)
			}
		case opPointer:
			ep := *(*unsafe.Pointer)(fp)
			if ep == nil {
				continue
			}
			if b, err = appendElem(b, f, ep, depth+int(o.level)); err != nil {
				return b, wrapEncode(err, o.path)
			}
		case opPacked:
			if h := (*sliceHeader)(fp); h.len > 0 {
				b = appendPacked(b, f, h)
			}
		case opRepeated:
			h := (*sliceHeader)(fp)
			for j := 0; j < h.len; j++ {
				ep := unsafe.Add(h.data, uintptr(j)*f.elemSize)
				if f.elemPtr {
					ep = *(*unsafe.Pointer)(ep)
					if ep == nil {
						// A nil element is written as an empty message, as
						// protobuf writes a nil map value.
						b = appendTag(b, f)
						b = append(b, 0)
						continue
					}
				}
				if f.kind == kMessage {
					b = appendTag(b, f)
					b, err = appendNested(b, f.msg, ep, depth+int(o.level))
				} else {
					b, err = appendElem(b, f, ep, depth+int(o.level))
				}
				if err != nil {
					return b, wrapEncode(err, fmt.Sprintf("%s[%d]", o.path, j))
				}
			}
		case opMap:
			if b, err = f.mapOps.append(b, f, fp, depth+int(o.level)); err != nil {
				return b, wrapEncode(err, o.path)
			}
		}
	}
	if m.hasUnkwn {
		b = append(b, *(*[]byte)(unsafe.Add(p, m.unknown))...)
	}
	return b, nil
}

// appendElem appends key and value of one element, whatever its zero-ness:
// pointer targets, repeated elements and map entries are always written.
func appendElem(b []byte, f *field, p unsafe.Pointer, depth int) ([]byte, error) {
	b = appendTag(b, f)
	switch f.kind {
	case kString:
		s := *(*string)(p)
		if !validString(s) {
			return b, &encodeErr{reason: "invalid UTF-8 in a string field (use []byte for binary data)"}
		}
		b = appendVarint(b, uint64(len(s)))
		return append(b, s...), nil
	case kMessage:
		return appendNested(b, f.msg, p, depth)
	case kTime, kDuration:
		sec, nanos := timeParts(f.kind, p)
		b = appendVarint(b, uint64(sizeTimeBody(sec, nanos)))
		return appendTimeBody(b, sec, nanos), nil
	case kCustom:
		return appendCustom(b, f.cust, p)
	}
	return appendScalar(b, f, p), nil
}

// appendNested appends a length-prefixed message. It reserves one byte for
// the length and moves the body when the length needs more, which avoids a
// separate sizing pass: most nested messages are shorter than 128 bytes.
func appendNested(b []byte, m *message, p unsafe.Pointer, depth int) ([]byte, error) {
	b = append(b, 0)
	start := len(b)
	b, err := appendMessage(b, m, p, depth+1)
	if err != nil {
		return b, err
	}
	return fixLength(b, start), nil
}

// fixLength writes the length of b[start:] into the byte reserved at
// b[start-1], moving the body if the length takes more than one byte.
func fixLength(b []byte, start int) []byte {
	n := len(b) - start
	if n < 0x80 {
		b[start-1] = byte(n)
		return b
	}
	k := sizeVarint(uint64(n))
	b = append(b, zeros[:k-1]...)
	copy(b[start+k-1:], b[start:start+n])
	appendVarint(b[:start-1], uint64(n))
	return b
}

func appendCustom(b []byte, c *customCodec, p unsafe.Pointer) ([]byte, error) {
	b = append(b, 0)
	start := len(b)
	b, err := c.appendFn(b, p)
	if err != nil {
		return b, &encodeErr{reason: fmt.Sprintf("custom codec for %s: %v", c.typ, err)}
	}
	return fixLength(b, start), nil
}

// appendPacked writes a repeated scalar as one length-delimited run.
func appendPacked(b []byte, f *field, h *sliceHeader) []byte {
	b = append(b, f.packedTag[:f.packedTagLen]...)
	n := packedSize(f, h)
	b = appendVarint(b, uint64(n))
	switch f.kind {
	case kBool:
		for _, v := range unsafe.Slice((*bool)(h.data), h.len) {
			if v {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	case kFloat:
		for _, v := range unsafe.Slice((*uint32)(h.data), h.len) {
			b = appendFixed32(b, v)
		}
	case kDouble:
		for _, v := range unsafe.Slice((*uint64)(h.data), h.len) {
			b = appendFixed64(b, v)
		}
	case kInt64, kUint64:
		if f.size == 8 {
			for _, v := range unsafe.Slice((*uint64)(h.data), h.len) {
				b = appendVarint(b, v)
			}
			break
		}
		fallthrough
	default:
		for j := 0; j < h.len; j++ {
			b = appendScalar(b, f, unsafe.Add(h.data, uintptr(j)*f.elemSize))
		}
	}
	return b
}

// packedSize is the body length of a packed repeated scalar.
func packedSize(f *field, h *sliceHeader) int {
	switch f.kind {
	case kBool:
		return h.len
	case kFixed32, kSfixed32, kFloat:
		return 4 * h.len
	case kFixed64, kSfixed64, kDouble:
		return 8 * h.len
	}
	n := 0
	for j := 0; j < h.len; j++ {
		n += sizeScalar(f, unsafe.Add(h.data, uintptr(j)*f.elemSize))
	}
	return n
}

// sizeMessage mirrors appendMessage and returns the number of bytes it
// appends. Invalid values (bad UTF-8, cycles) are sized as they would be
// written up to the error; Append reports the error.
func sizeMessage(m *message, p unsafe.Pointer, depth int) int {
	if depth > maxDepth {
		return 0
	}
	n := 0
	for i := range m.fields {
		f := &m.fields[i]
		fp := unsafe.Add(p, f.offset)
		switch f.card {
		case cSingular:
			switch f.kind {
			case kMessage:
				s := sizeMessage(f.msg, fp, depth+1)
				n += int(f.tagLen) + sizeVarint(uint64(s)) + s
			case kCustom:
				n += sizeElem(f, fp, depth)
			case kDuration:
				if *(*int64)(fp) != 0 {
					n += sizeElem(f, fp, depth)
				}
			default:
				if !isZero(f, fp) {
					n += sizeElem(f, fp, depth)
				}
			}
		case cPointer:
			if ep := *(*unsafe.Pointer)(fp); ep != nil {
				n += sizeElem(f, ep, depth)
			}
		case cSlice:
			h := (*sliceHeader)(fp)
			if h.len == 0 {
				continue
			}
			if f.kind.packable() {
				s := packedSize(f, h)
				n += int(f.packedTagLen) + sizeVarint(uint64(s)) + s
				continue
			}
			for j := 0; j < h.len; j++ {
				ep := unsafe.Add(h.data, uintptr(j)*f.elemSize)
				if f.elemPtr {
					ep = *(*unsafe.Pointer)(ep)
					if ep == nil {
						n += int(f.tagLen) + 1
						continue
					}
				}
				n += sizeElem(f, ep, depth)
			}
		case cMap:
			n += f.mapOps.size(f, fp, depth)
		}
	}
	if m.hasUnkwn {
		n += len(*(*[]byte)(unsafe.Add(p, m.unknown)))
	}
	return n
}

// sizeElem is the size of key and value of one element.
func sizeElem(f *field, p unsafe.Pointer, depth int) int {
	var s int
	switch f.kind {
	case kMessage:
		s = sizeMessage(f.msg, p, depth+1)
		s += sizeVarint(uint64(s))
	case kTime, kDuration:
		s = sizeTimeBody(timeParts(f.kind, p))
		s += sizeVarint(uint64(s))
	case kCustom:
		s = f.cust.sizeFn(p)
		s += sizeVarint(uint64(s))
	default:
		s = sizeScalar(f, p)
	}
	return int(f.tagLen) + s
}

// validString reports whether s is UTF-8. IDs, codes and addresses are
// mostly ASCII, so it ORs the string together eight bytes at a time (the
// last word overlapping) and calls utf8.Valid only when a byte has its high
// bit set.
func validString(s string) bool {
	return validBytes(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// validBytes is validString for bytes.
func validBytes(b []byte) bool {
	n := len(b)
	if n < 8 {
		var acc byte
		for _, c := range b {
			acc |= c
		}
		return acc < utf8.RuneSelf || utf8.Valid(b)
	}
	var acc uint64
	i := 0
	for ; i+16 <= n; i += 16 {
		acc |= binary.LittleEndian.Uint64(b[i:i+8]) | binary.LittleEndian.Uint64(b[i+8:i+16])
	}
	if i+8 <= n {
		acc |= binary.LittleEndian.Uint64(b[i : i+8])
	}
	acc |= binary.LittleEndian.Uint64(b[n-8:])
	return acc&0x8080808080808080 == 0 || utf8.Valid(b)
}
