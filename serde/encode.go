package serde

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

// maxDepth bounds message nesting on encode and decode: protobuf-go's
// default recursion limit, so what it reads serde reads too.
const maxDepth = 10_000

// EncodeError reports a value that cannot be encoded: a string that is not
// UTF-8, nesting deeper than 10,000 (usually a cycle through pointers), or a
// oneof with more than one member set (Path names the first member set,
// Reason the oneof and every member set).
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

// loopFrame is one running opLoop of a program.
type loopFrame struct {
	base unsafe.Pointer // the base of the level around the loop
	left int            // elements after the current one
	j    int            // index of the current element
	op   int            // index of the opLoop
}

// appendMessage appends the fields of the struct at p in number order, then
// its unknown fields.
func appendMessage(b []byte, m *message, p unsafe.Pointer, depth int) ([]byte, error) {
	if depth > maxDepth {
		return b, &encodeErr{reason: fmt.Sprintf("nesting deeper than %d (a cycle through pointers?)", maxDepth)}
	}
	var err error
	var st encState
	base := p
	prog := m.prog
	for i := 0; i < len(prog); i++ {
		if cap(b)-len(b) >= fastRoom {
			// The common cases run in appendFast's loop; this one does
			// the op it stopped at.
			st.i, st.base = i, base
			for b = appendFast(b, prog, &st); st.needFix; b = appendFast(b, prog, &st) {
				b = fixLength(b, st.starts[(st.sp-1)&(maxInline-1)])
				b = slices.Grow(b, fastRoom+2+32)
				st.fixed = true
			}
			if i, base = st.i, st.base; i >= len(prog) {
				break
			}
		}
		o := &prog[i]
		fp := unsafe.Add(base, o.offset)
		switch o.op {
		case opString:
			s := *(*string)(fp)
			n := len(s)
			if n == 0 {
				continue
			}
			if !validString(s) {
				return b, &encodeErr{segs: []string{progPath(prog, st.loops[:st.lp&(maxInline-1)], o.path)}, reason: "invalid UTF-8 in a string field (use []byte for binary data)"}
			}
			if o.tag1 != 0 && n < 0x80 {
				b = append(b, o.tag1, byte(n))
			} else {
				b = appendTag(b, o.f)
				b = appendVarint(b, uint64(n))
			}
			b = append(b, s...)
		case opVarint64:
			v := *(*uint64)(fp)
			if v == 0 {
				continue
			}
			if o.tag1 != 0 && v < 0x80 {
				b = append(b, o.tag1, byte(v))
			} else if o.tag1 != 0 && cap(b)-len(b) >= 11 {
				k := len(b)
				b = b[:k+11]
				b[k] = o.tag1
				k++
				for v >= 0x80 {
					b[k] = byte(v) | 0x80
					v >>= 7
					k++
				}
				b[k] = byte(v)
				b = b[:k+1]
			} else {
				b = appendTag(b, o.f)
				b = appendVarint(b, v)
			}
		case opInt32:
			v := uint64(int64(*(*int32)(fp)))
			if v == 0 {
				continue
			}
			if o.tag1 != 0 && v < 0x80 {
				b = append(b, o.tag1, byte(v))
			} else {
				b = appendTag(b, o.f)
				b = appendVarint(b, v)
			}
		case opUint32:
			v := uint64(*(*uint32)(fp))
			if v == 0 {
				continue
			}
			if o.tag1 != 0 && v < 0x80 {
				b = append(b, o.tag1, byte(v))
			} else {
				b = appendTag(b, o.f)
				b = appendVarint(b, v)
			}
		case opFixed64:
			v := *(*uint64)(fp)
			if v == 0 {
				continue
			}
			if o.tag1 != 0 {
				b = append(b, o.tag1)
			} else {
				b = appendTag(b, o.f)
			}
			b = binary.LittleEndian.AppendUint64(b, v)
		case opFixed32:
			v := *(*uint32)(fp)
			if v == 0 {
				continue
			}
			if o.tag1 != 0 {
				b = append(b, o.tag1)
			} else {
				b = appendTag(b, o.f)
			}
			b = binary.LittleEndian.AppendUint32(b, v)
		case opBytes:
			v := *(*[]byte)(fp)
			if len(v) == 0 {
				continue
			}
			if o.tag1 != 0 && len(v) < 0x80 {
				b = append(b, o.tag1, byte(len(v)))
			} else {
				b = appendTag(b, o.f)
				b = appendVarint(b, uint64(len(v)))
			}
			b = append(b, v...)
		case opBegin:
			if o.tag1 != 0 {
				b = append(b, o.tag1, 0)
			} else {
				b = appendTag(b, o.f)
				b = append(b, 0)
			}
			st.starts[st.sp&(maxInline-1)] = len(b)
			st.sp++
		case opEnd, opEndBegin:
			st.sp--
			if o.unkn >= 0 {
				b = append(b, *(*[]byte)(unsafe.Add(base, o.unkn))...)
			}
			if s0 := st.starts[st.sp&(maxInline-1)]; len(b)-s0 < 0x80 && s0 > 0 {
				b[s0-1] = byte(len(b) - s0)
			} else {
				b = fixLength(b, s0)
			}
		case opLoop:
			h := (*sliceHeader)(fp)
			if h.len == 0 {
				i = int(o.jump) // past the opLoopEnd
				continue
			}
			st.loops[st.lp&(maxInline-1)] = loopFrame{base: base, left: h.len - 1, op: i}
			st.lp++
			base = h.data
			if o.tag1 != 0 {
				b = append(b, o.tag1, 0)
			} else {
				b = appendTag(b, o.f)
				b = append(b, 0)
			}
			st.starts[st.sp&(maxInline-1)] = len(b)
			st.sp++
		case opLoopEnd:
			if o.unkn >= 0 {
				b = append(b, *(*[]byte)(unsafe.Add(base, o.unkn))...)
			}
			if s0 := st.starts[(st.sp-1)&(maxInline-1)]; len(b)-s0 < 0x80 && s0 > 0 {
				b[s0-1] = byte(len(b) - s0)
			} else {
				b = fixLength(b, s0)
			}
			fr := &st.loops[(st.lp-1)&(maxInline-1)]
			if fr.left > 0 {
				fr.left--
				fr.j++
				base = unsafe.Add(base, o.elemSize)
				if o.tag1 != 0 {
					b = append(b, o.tag1, 0)
				} else {
					b = appendTag(b, o.f)
					b = append(b, 0)
				}
				st.starts[(st.sp-1)&(maxInline-1)] = len(b)
				i = int(o.jump) // to the first op of the element
				continue
			}
			st.sp--
			base = fr.base
			st.lp--
		case opPtr:
			q := *(*unsafe.Pointer)(fp)
			if q == nil {
				i = int(o.jump) - 1 // past the opPtrEnd
				continue
			}
			st.ptrs[st.pp&(maxInline-1)] = base
			st.pp++
			base = q
			if o.tag1 != 0 {
				b = append(b, o.tag1, 0)
			} else {
				b = appendTag(b, o.f)
				b = append(b, 0)
			}
			st.starts[st.sp&(maxInline-1)] = len(b)
			st.sp++
		case opPtrEnd:
			st.sp--
			if o.unkn >= 0 {
				b = append(b, *(*[]byte)(unsafe.Add(base, o.unkn))...)
			}
			if s0 := st.starts[st.sp&(maxInline-1)]; len(b)-s0 < 0x80 && s0 > 0 {
				b[s0-1] = byte(len(b) - s0)
			} else {
				b = fixLength(b, s0)
			}
			st.pp--
			base = st.ptrs[st.pp&(maxInline-1)]
		case opMessage:
			b = appendTag(b, o.f)
			if b, err = appendNested(b, o.f.msg, fp, depth+int(o.level)); err != nil {
				return b, wrapEncode(err, progPath(prog, st.loops[:st.lp&(maxInline-1)], o.path))
			}
		case opScalar:
			f := o.f
			if isZero(f, fp) {
				continue
			}
			b = appendTag(b, f)
			b = appendScalar(b, f, fp)
		case opTime:
			if isZero(o.f, fp) {
				continue
			}
			if b, err = appendElem(b, o.f, fp, depth+int(o.level)); err != nil {
				return b, wrapEncode(err, progPath(prog, st.loops[:st.lp&(maxInline-1)], o.path))
			}
		case opCustom:
			if b, err = appendElem(b, o.f, fp, depth+int(o.level)); err != nil {
				return b, wrapEncode(err, progPath(prog, st.loops[:st.lp&(maxInline-1)], o.path))
			}
		case opPointer:
			ep := *(*unsafe.Pointer)(fp)
			if ep == nil {
				continue
			}
			if b, err = appendElem(b, o.f, ep, depth+int(o.level)); err != nil {
				return b, wrapEncode(err, progPath(prog, st.loops[:st.lp&(maxInline-1)], o.path))
			}
		case opOneof:
			// fp is the group's first member; the others are at their
			// offsets from the struct's base.
			sb := unsafe.Add(fp, -int(o.f.offset))
			g := o.f.oneof
			k, set := oneofScan(sb, g.offsets)
			if set != 1 {
				if set == 0 {
					continue
				}
				return b, oneofConflict(prog, st.loops[:st.lp&(maxInline-1)], o, sb)
			}
			mf := g.members[k]
			ep := *(*unsafe.Pointer)(unsafe.Add(sb, g.offsets[k]))
			if mf.kind == kString && mf.tagLen == 1 {
				// The commonest member (AnyValue's string_value), without
				// the call.
				s := *(*string)(ep)
				if n := len(s); n < 0x80 && asciiString(s) {
					b = append(b, mf.tag[0], byte(n))
					b = append(b, s...)
					continue
				}
			}
			if b, err = appendElem(b, mf, ep, depth+int(o.level)); err != nil {
				return b, wrapEncode(err, progPath(prog, st.loops[:st.lp&(maxInline-1)], o.path+"."+mf.goName))
			}
		case opPacked:
			if h := (*sliceHeader)(fp); h.len > 0 {
				b = appendPacked(b, o.f, h)
			}
		case opRepeated:
			f := o.f
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
					return b, wrapEncode(err, fmt.Sprintf("%s[%d]", progPath(prog, st.loops[:st.lp&(maxInline-1)], o.path), j))
				}
			}
		case opMap:
			if b, err = o.f.mapOps.append(b, o.f, fp, depth+int(o.level)); err != nil {
				return b, wrapEncode(err, progPath(prog, st.loops[:st.lp&(maxInline-1)], o.path))
			}
		}
	}
	if m.hasUnkwn {
		b = append(b, *(*[]byte)(unsafe.Add(p, m.unknown))...)
	}
	return b, nil
}

// oneofScan returns how many of the pointers at offsets from sb are set,
// and the index of the last one set. It has no branch per member: which
// member is set varies from value to value, so such a branch mispredicts
// often, and as a call of its own the loop keeps its variables in registers
// (in appendMessage's loop they lived on the stack).
//
//go:noinline
func oneofScan(sb unsafe.Pointer, offsets []uintptr) (k, set int) {
	for j, off := range offsets {
		nz := 0
		if *(*unsafe.Pointer)(unsafe.Add(sb, off)) != nil {
			nz = 1
		}
		k = nz*j + (1-nz)*k
		set += nz
	}
	return k, set
}

// oneofConflict is the error of a oneof group with several members set in
// the struct at sb: the path names the first member set, the reason the
// group and all members set.
func oneofConflict(prog []encOp, loops []loopFrame, o *encOp, sb unsafe.Pointer) error {
	g := o.f.oneof
	var set []string
	for _, mf := range g.members {
		if *(*unsafe.Pointer)(unsafe.Add(sb, mf.offset)) != nil {
			set = append(set, mf.goName)
		}
	}
	return &encodeErr{
		segs:   []string{progPath(prog, loops, o.path+"."+set[0])},
		reason: fmt.Sprintf("oneof %s has %d members set (%s); set at most one, the others nil", g.name, len(set), strings.Join(set, ", ")),
	}
}

// progPath is the Go path of an op's field for an error, with the indexes of
// the running loops: .Items[3].SKU.
func progPath(prog []encOp, loops []loopFrame, path string) string {
	if len(loops) == 0 {
		return path
	}
	var sb strings.Builder
	prev := ""
	for _, fr := range loops {
		lp := prog[fr.op].path
		sb.WriteString(strings.TrimPrefix(lp, prev))
		fmt.Fprintf(&sb, "[%d]", fr.j)
		prev = lp
	}
	sb.WriteString(strings.TrimPrefix(path, prev))
	return sb.String()
}

// copyShort copies src, of 1 to 32 bytes, to dst, of the same length, with
// overlapping word moves, and reports whether src is ASCII.
func copyShort(dst, src []byte) bool {
	n := len(src)
	var acc uint64
	switch {
	case n >= 16:
		w0 := binary.LittleEndian.Uint64(src)
		w1 := binary.LittleEndian.Uint64(src[8:])
		w2 := binary.LittleEndian.Uint64(src[n-16:])
		w3 := binary.LittleEndian.Uint64(src[n-8:])
		binary.LittleEndian.PutUint64(dst[n-16:], w2)
		binary.LittleEndian.PutUint64(dst[n-8:], w3)
		binary.LittleEndian.PutUint64(dst, w0)
		binary.LittleEndian.PutUint64(dst[8:], w1)
		acc = w0 | w1 | w2 | w3
	case n >= 8:
		w0 := binary.LittleEndian.Uint64(src)
		w1 := binary.LittleEndian.Uint64(src[n-8:])
		binary.LittleEndian.PutUint64(dst[n-8:], w1)
		binary.LittleEndian.PutUint64(dst, w0)
		acc = w0 | w1
	case n >= 4:
		w0 := binary.LittleEndian.Uint32(src)
		w1 := binary.LittleEndian.Uint32(src[n-4:])
		binary.LittleEndian.PutUint32(dst[n-4:], w1)
		binary.LittleEndian.PutUint32(dst, w0)
		acc = uint64(w0 | w1)
	default:
		c0, c1, c2 := src[0], src[n/2], src[n-1]
		dst[n-1], dst[n/2], dst[0] = c2, c1, c0
		acc = uint64(c0 | c1 | c2)
	}
	return acc&0x8080808080808080 == 0
}

// asciiString reports whether every byte of s is below 0x80. It reads s in
// overlapping words rather than byte by byte: IDs, codes and currencies are
// short.
func asciiString(s string) bool {
	return asciiBytes(unsafe.Slice(unsafe.StringData(s), len(s)))
}

func asciiBytes(b []byte) bool {
	n := len(b)
	var acc uint64
	switch {
	case n >= 8:
		for j := 0; j+8 < n; j += 8 {
			acc |= binary.LittleEndian.Uint64(b[j:])
		}
		acc |= binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		acc = uint64(binary.LittleEndian.Uint32(b) | binary.LittleEndian.Uint32(b[n-4:]))
	case n > 0:
		// Indexes 0, n/2 and n-1 cover every byte of 1 to 3.
		acc = uint64(b[0] | b[n/2] | b[n-1])
	}
	return acc&0x8080808080808080 == 0
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
		if f.kind == kTime && (sec < minTimestamp || sec > maxTimestamp) {
			// Decode refuses it, so state holding it could not be restored.
			return b, &encodeErr{reason: fmt.Sprintf("time %v is outside google.protobuf.Timestamp's range (years 1 to 9999)", *(*time.Time)(p))}
		}
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
// mostly ASCII, so it tests that first, a word at a time, and calls
// utf8.ValidString only when a byte has its high bit set.
func validString(s string) bool {
	return asciiString(s) || utf8.ValidString(s)
}

// validBytes is validString for bytes.
func validBytes(b []byte) bool {
	return asciiBytes(b) || utf8.Valid(b)
}
