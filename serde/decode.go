package serde

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"
)

// DecodeError reports bytes that do not decode: where (the field path in
// proto names, the field numbers, the byte offset in the input) and why.
type DecodeError struct {
	Path    string // e.g. OrderCreatedEvent.items[3].sku
	Numbers string // the field numbers along the path, e.g. 3.2
	Offset  int    // byte offset in the input where the problem starts
	Reason  string
}

func (e *DecodeError) Error() string {
	if e.Numbers == "" {
		return fmt.Sprintf("serde: decoding %s at byte %d: %s", e.Path, e.Offset, e.Reason)
	}
	return fmt.Sprintf("serde: decoding field %s (%s) at byte %d: %s", e.Path, e.Numbers, e.Offset, e.Reason)
}

// decodeErr collects the path while the error unwinds, innermost first.
type decodeErr struct {
	segs   []string
	nums   []uint32
	offset int
	reason string
}

func (e *decodeErr) Error() string { return e.reason }

func errAt(offset int, format string, args ...any) *decodeErr {
	return &decodeErr{offset: offset, reason: fmt.Sprintf(format, args...)}
}

func wrapDecode(err error, f *field, index int) error {
	e, ok := err.(*decodeErr)
	if !ok {
		return err
	}
	seg := "." + f.protoName
	if index >= 0 {
		seg = fmt.Sprintf(".%s[%d]", f.protoName, index)
	}
	e.segs = append(e.segs, seg)
	e.nums = append(e.nums, f.num)
	return e
}

func finishDecode(err error, m *message) error {
	e, ok := err.(*decodeErr)
	if !ok {
		return err
	}
	var path, nums strings.Builder
	path.WriteString(m.goName)
	for i := len(e.segs) - 1; i >= 0; i-- {
		path.WriteString(e.segs[i])
		fmt.Fprintf(&nums, "%d", e.nums[i])
		if i > 0 {
			nums.WriteByte('.')
		}
	}
	return &DecodeError{Path: path.String(), Numbers: nums.String(), Offset: e.offset, Reason: e.reason}
}

func varintErr(offset, n int) *decodeErr {
	if n == errOverlong {
		return errAt(offset, "varint longer than 10 bytes or over 64 bits")
	}
	return errAt(offset, "input ends inside a varint (truncated)")
}

// decoder decodes one input. Strings share one private copy of the input
// (the arena), made at the first non-empty string.
type decoder struct {
	src       []byte
	seenExt   []uint64 // presence bits of fields 64 and up, a word per 64
	arena     []byte
	arenaBase int
	// entry is a zeroed map entry temporary of the registered map code
	// entryOf (see registeredMap.decode), kept with the pooled decoder.
	entry, entryOf unsafe.Pointer
	// chunks hold the pointer targets allocated in batches (alloc.go);
	// usedSlots has a bit per slot used by this decode.
	chunks    [chunkSlots]chunk
	usedSlots uint16
}

// decoderPool recycles decoders: map and custom-codec hooks are called
// through function values, so a decoder on the stack would escape anyway.
var decoderPool = sync.Pool{New: func() any { return new(decoder) }}

func decodeTop(src []byte, m *message, p unsafe.Pointer) error {
	d := decoderPool.Get().(*decoder)
	d.src = src
	err := d.decodeMessage(m, p, 0, len(src), 0, false)
	d.src, d.arena, d.arenaBase, d.seenExt = nil, nil, 0, d.seenExt[:0]
	d.dropChunks()
	decoderPool.Put(d)
	if err != nil {
		return finishDecode(err, m)
	}
	return nil
}

// str returns src[s:e] as a string backed by the arena.
func (d *decoder) str(s, e int) string {
	if s == e {
		return ""
	}
	if d.arena == nil {
		d.newArena(s)
	}
	return unsafe.String(&d.arena[s-d.arenaBase], e-s)
}

// newArena copies the input from offset s on, where the first string starts.
func (d *decoder) newArena(s int) {
	d.arenaBase = s
	d.arena = make([]byte, len(d.src)-s)
	copy(d.arena, d.src[s:])
}

// bytesAt returns src[s:e] as a slice of the arena whose capacity ends at e,
// so an append by the user cannot overwrite other fields.
func (d *decoder) bytesAt(s, e int) []byte {
	if s == e {
		return nil
	}
	if d.arena == nil {
		d.str(s, e)
	}
	return d.arena[s-d.arenaBase : e-d.arenaBase : e-d.arenaBase]
}

// decodeMessage decodes d.src[start:end] into the struct at p. Unless merge is
// set (a repeated occurrence of the same message field), fields absent from
// the input are reset to their zero value afterwards, so a reused value ends
// up equal to a fresh one.
func (d *decoder) decodeMessage(m *message, p unsafe.Pointer, start, end, depth int, merge bool) error {
	return d.decodeFrom(m, p, start, end, depth, merge, 0)
}

// decodeFrom is decodeMessage from a field at start that is not the first
// when seen has bits set: those of the fields decodeFlat decoded before
// start, where it handed the message over.
func (d *decoder) decodeFrom(m *message, p unsafe.Pointer, start, end, depth int, merge bool, seen uint64) error {
	if depth > maxDepth {
		return errAt(start, "nesting deeper than %d", maxDepth)
	}
	if !merge && m.hasUnkwn {
		u := (*[]byte)(unsafe.Add(p, m.unknown))
		*u = (*u)[:0]
	}
	// Fields past the first 64 are tracked in words on the decoder's stack.
	ext := len(d.seenExt)
	if len(m.fields) > 64 {
		for w := 0; w < (len(m.fields)-1)/64; w++ {
			d.seenExt = append(d.seenExt, 0)
		}
		defer func() { d.seenExt = d.seenExt[:ext] }()
	}
	src := d.src
	i := start
	for i < end {
		tagAt := i
		var f *field
		var wt uint8
		if c := src[i]; c < 0x80 && m.fast[c] != nil {
			// A one-byte key of a known field with its expected wire type.
			f, wt = m.fast[c], c&7
			i++
		} else {
			var tag uint64
			if c < 0x80 {
				tag = uint64(c)
				i++
			} else {
				v, n := consumeVarint(src[i:end])
				if n < 0 {
					return varintErr(i, n)
				}
				tag, i = v, i+n
			}
			num := tag >> 3
			wt = uint8(tag & 7)
			if num == 0 || num > maxFieldNumber {
				return errAt(tagAt, "invalid field number %d", num)
			}
			f = m.lookup(num)
			if f == nil || (wt != f.wt && (f.card != cSlice || wt != wireBytes || !f.kind.packable())) {
				// An unknown field, or a known one with another wire
				// type, which protobuf-go also keeps as unknown.
				j, err := d.unknownField(m, p, wt, num, tagAt, i, end, depth)
				if err != nil {
					return err
				}
				i = j
				continue
			}
		}
		var first bool
		if bit := f.bit; bit != 0 {
			first = seen&bit == 0 && !merge
			seen |= bit
		} else {
			w, bit := &d.seenExt[ext+f.idx/64-1], uint64(1)<<uint(f.idx%64)
			first = *w&bit == 0 && !merge
			*w |= bit
		}
		fp := unsafe.Add(p, f.offset)
		var err error
		switch f.op {
		case opString:
			// The commonest field, decoded without the call chain.
			n := 0
			if i < end && src[i] < 0x80 && int(src[i]) < end-i {
				n = int(src[i])
				i++
			} else if n, i, err = d.length(i, end); err != nil {
				break
			}
			if n == 0 {
				*(*string)(fp) = ""
				break
			}
			// The ASCII test of validBytes, inline for short strings.
			bs := src[i : i+n]
			var acc uint64
			switch {
			case n > 32:
				if !asciiBytes(bs) {
					acc = 0x80
				}
			case n > 16:
				acc = binary.LittleEndian.Uint64(bs) | binary.LittleEndian.Uint64(bs[8:]) |
					binary.LittleEndian.Uint64(bs[n-16:]) | binary.LittleEndian.Uint64(bs[n-8:])
			case n >= 8:
				acc = binary.LittleEndian.Uint64(bs) | binary.LittleEndian.Uint64(bs[n-8:])
			case n >= 4:
				acc = uint64(binary.LittleEndian.Uint32(bs) | binary.LittleEndian.Uint32(bs[n-4:]))
			default:
				acc = uint64(bs[0] | bs[n/2] | bs[n-1])
			}
			if acc&0x8080808080808080 != 0 && !utf8.Valid(bs) {
				err = errAt(i, "invalid UTF-8 in a string field")
				break
			}
			if d.arena == nil {
				d.newArena(i)
			}
			*(*string)(fp) = unsafe.String(&d.arena[i-d.arenaBase], n)
			i += n
		case opVarint64:
			switch {
			case i < end && src[i] < 0x80:
				*(*uint64)(fp) = uint64(src[i])
				i++
			case i+1 < end && src[i+1] < 0x80:
				*(*uint64)(fp) = uint64(src[i]&0x7f) | uint64(src[i+1])<<7
				i += 2
			case i+2 < end && src[i+2] < 0x80:
				*(*uint64)(fp) = uint64(src[i]&0x7f) | uint64(src[i+1]&0x7f)<<7 | uint64(src[i+2])<<14
				i += 3
			default:
				i, err = d.decodeScalar(f, fp, i, end)
			}
		case opMessage:
			var n int
			if n, i, err = d.length(i, end); err == nil {
				if f.msg.flat {
					err = d.decodeFlat(f.msg, fp, i, i+n, depth+1, !first)
				} else {
					err = d.decodeMessage(f.msg, fp, i, i+n, depth+1, !first)
				}
				i += n
			}
		case opScalar:
			if f.kind == kInt32 && f.size == 4 && i < end && src[i] < 0x80 {
				*(*int32)(fp) = int32(src[i])
				i++
			} else {
				i, err = d.decodeValue(f, fp, i, end)
			}
		case opTime, opCustom:
			i, err = d.decodeElem(f, fp, i, end, depth, !first)
		case opPointer, opOneof:
			// A case of its own for opOneof measured 0.7 % more
			// instructions per decode of messages without oneofs.
			if f.op == opOneof {
				i, err = d.decodeOneof(f, p, i, end, depth, !first)
				break
			}
			pp := (*unsafe.Pointer)(fp)
			if *pp == nil {
				*pp = d.newElem(f)
			}
			i, err = d.decodeElem(f, *pp, i, end, depth, !first)
		case opRepeated, opPacked:
			h := (*sliceHeader)(fp)
			if f.kind == kMessage && !f.elemPtr && wt == wireBytes {
				// Repeated struct values: decode straight into the next
				// element, reusing whatever it held.
				if first {
					h.len = 0
				}
				if h.len == h.cap {
					d.reserve(f, fp, 1+countField(src, f, i, end))
				}
				ep := unsafe.Add(h.data, uintptr(h.len)*f.elemSize)
				h.len++
				var n int
				if n, i, err = d.length(i, end); err == nil {
					if f.msg.flat {
						err = d.decodeFlat(f.msg, ep, i, i+n, depth+1, false)
					} else {
						err = d.decodeMessage(f.msg, ep, i, i+n, depth+1, false)
					}
					i += n
				}
			} else {
				i, err = d.decodeRepeated(f, fp, wt, i, end, depth, first)
			}
			if err != nil {
				return wrapDecode(err, f, h.len-1)
			}
		case opMap:
			if first {
				if f.mapOps.clear != nil {
					if *(*unsafe.Pointer)(fp) != nil {
						f.mapOps.clear(fp)
					}
				} else {
					reflect.NewAt(f.typ, fp).Elem().SetZero()
				}
			}
			var n int
			if n, i, err = d.length(i, end); err == nil {
				err = f.mapOps.decode(d, f, fp, i, i+n, depth+1)
				i += n
			}
		}
		if err != nil {
			return wrapDecode(err, f, -1)
		}
	}
	if i != end {
		return errAt(end, "message runs past its length")
	}
	if merge {
		return nil
	}
	if len(m.fields) <= 64 {
		// Reset the fields not seen; check the repeated ones seen for an
		// empty packed run.
		for todo := m.allBits&^seen | seen&m.sliceBits; todo != 0; todo &= todo - 1 {
			f := &m.fields[bits.TrailingZeros64(todo)]
			if seen&f.bit == 0 {
				if f.bit&m.ptrBits != 0 {
					// Stored only when set: a pointer store has a
					// write barrier, and fresh values hold nil.
					if pp := (*unsafe.Pointer)(unsafe.Add(p, f.offset)); *pp != nil {
						*pp = nil
					}
					continue
				}
				resetField(f, unsafe.Add(p, f.offset))
			} else if h := (*sliceHeader)(unsafe.Add(p, f.offset)); h.len == 0 {
				*h = sliceHeader{}
			}
		}
		return nil
	}
	for j := range m.fields {
		f := &m.fields[j]
		word := seen
		if j >= 64 {
			word = d.seenExt[ext+j/64-1]
		}
		if word&(1<<uint(j%64)) == 0 {
			resetField(f, unsafe.Add(p, f.offset))
		} else if f.card == cSlice {
			if h := (*sliceHeader)(unsafe.Add(p, f.offset)); h.len == 0 {
				// An empty packed run: nil, as in a fresh value.
				*h = sliceHeader{}
			}
		}
	}
	return nil
}

// decodeFlat is decodeMessage for a flat message (message.flat: only
// singular strings, numbers and flat messages held by value, such as an
// order line of product, quantity and two Money): a loop with fewer cases
// and less state, so less of it lives on the stack, and none of
// decodeMessage's set-up for unknown fields, more than 64 fields or
// repeated fields. Anything but known fields with one-byte keys, one-byte
// lengths and valid values hands the message over to decodeFrom at that
// field, which reports errors with their paths; an error of a nested flat
// message is passed up as decodeMessage passes it.
func (d *decoder) decodeFlat(m *message, p unsafe.Pointer, start, end, depth int, merge bool) error {
	src := d.src
	var seen uint64
	i := start
	at, atSeen := i, seen // where the field being decoded starts, and seen before it
	if depth > maxDepth {
		goto slow
	}
	for i < end {
		at, atSeen = i, seen
		c := src[i]
		if c >= 0x80 || m.fast[c] == nil {
			goto slow
		}
		f := m.fast[c]
		i++
		seen |= f.bit
		fp := unsafe.Add(p, f.offset)
		switch f.op {
		case opString:
			if i >= end || src[i] >= 0x80 || int(src[i]) >= end-i {
				goto slow
			}
			n := int(src[i])
			i++
			if n == 0 {
				*(*string)(fp) = ""
				continue
			}
			bs := src[i : i+n]
			var acc uint64
			switch {
			case n > 32:
				if !asciiBytes(bs) {
					acc = 0x80
				}
			case n > 16:
				acc = binary.LittleEndian.Uint64(bs) | binary.LittleEndian.Uint64(bs[8:]) |
					binary.LittleEndian.Uint64(bs[n-16:]) | binary.LittleEndian.Uint64(bs[n-8:])
			case n >= 8:
				acc = binary.LittleEndian.Uint64(bs) | binary.LittleEndian.Uint64(bs[n-8:])
			case n >= 4:
				acc = uint64(binary.LittleEndian.Uint32(bs) | binary.LittleEndian.Uint32(bs[n-4:]))
			default:
				acc = uint64(bs[0] | bs[n/2] | bs[n-1])
			}
			if acc&0x8080808080808080 != 0 && !utf8.Valid(bs) {
				goto slow
			}
			if d.arena == nil {
				d.newArena(i)
			}
			*(*string)(fp) = unsafe.String(&d.arena[i-d.arenaBase], n)
			i += n
		case opVarint64:
			switch {
			case i < end && src[i] < 0x80:
				*(*uint64)(fp) = uint64(src[i])
				i++
			case i+1 < end && src[i+1] < 0x80:
				*(*uint64)(fp) = uint64(src[i]&0x7f) | uint64(src[i+1])<<7
				i += 2
			case i+2 < end && src[i+2] < 0x80:
				*(*uint64)(fp) = uint64(src[i]&0x7f) | uint64(src[i+1]&0x7f)<<7 | uint64(src[i+2])<<14
				i += 3
			default:
				j, err := d.decodeScalar(f, fp, i, end)
				if err != nil {
					goto slow
				}
				i = j
			}
		case opMessage:
			if i >= end || src[i] >= 0x80 || int(src[i]) >= end-i {
				goto slow
			}
			n := int(src[i])
			i++
			// A second occurrence merges, as in decodeMessage.
			first := atSeen&f.bit == 0 && !merge
			if err := d.decodeFlat(f.msg, fp, i, i+n, depth+1, !first); err != nil {
				return wrapDecode(err, f, -1)
			}
			i += n
		default:
			if f.kind == kInt32 && f.size == 4 && i < end && src[i] < 0x80 {
				*(*int32)(fp) = int32(src[i])
				i++
				continue
			}
			j, err := d.decodeValue(f, fp, i, end)
			if err != nil {
				goto slow
			}
			i = j
		}
	}
	if !merge {
		if todo := m.allBits &^ seen; todo != 0 {
			resetFlat(m, p, todo)
		}
	}
	return nil
slow:
	return d.decodeFrom(m, p, at, end, depth, merge, atSeen)
}

// resetFlat resets the fields of the flat message m whose bits are in todo.
func resetFlat(m *message, p unsafe.Pointer, todo uint64) {
	for ; todo != 0; todo &= todo - 1 {
		f := &m.fields[bits.TrailingZeros64(todo)]
		resetField(f, unsafe.Add(p, f.offset))
	}
}

// decodeOneof decodes a oneof member into the struct at p: the last member
// on the wire wins, so it sets the others to nil. It is a call, not inlined
// in decodeMessage's loop: inlined, it cost 4 % more instructions per decode
// of messages without oneofs (valgrind, BenchmarkDecodeOrderReuse).
//
//go:noinline
func (d *decoder) decodeOneof(f *field, p unsafe.Pointer, i, end, depth int, merge bool) (int, error) {
	f.oneof.clearOthers(f, p)
	pp := (*unsafe.Pointer)(unsafe.Add(p, f.offset))
	if *pp == nil {
		*pp = d.newElem(f)
	}
	return d.decodeElem(f, *pp, i, end, depth, merge)
}

// unknownField skips the field whose key is at tagAt (its value at i),
// keeping its bytes in the message's Unknown field if it has one, and
// returns where the next field starts.
func (d *decoder) unknownField(m *message, p unsafe.Pointer, wt uint8, num uint64, tagAt, i, end, depth int) (int, error) {
	j, err := skipField(d.src, wt, num, i, end, depth)
	if err != nil {
		return i, err
	}
	if m.hasUnkwn {
		u := (*Unknown)(unsafe.Add(p, m.unknown))
		*u = append(*u, d.src[tagAt:j]...)
	}
	return j, nil
}

// length reads a length prefix at i and checks it fits before end.
func (d *decoder) length(i, end int) (n, next int, err error) {
	if i < end {
		if c := d.src[i]; c < 0x80 && int(c) < end-i {
			return int(c), i + 1, nil
		}
	}
	v, k := consumeVarint(d.src[i:end])
	if k < 0 {
		return 0, i, varintErr(i, k)
	}
	if v > uint64(end-i-k) {
		return 0, i, errAt(i, "length %d runs past the end of the input (%d bytes left)", v, end-i-k)
	}
	return int(v), i + k, nil
}

// resetField sets a field absent from the input to its zero value.
func resetField(f *field, fp unsafe.Pointer) {
	switch f.card {
	case cSingular:
		switch f.kind {
		case kString:
			*(*string)(fp) = ""
			return
		case kBytes:
			*(*[]byte)(fp) = nil
			return
		case kTime:
			*(*time.Time)(fp) = time.Time{}
			return
		case kMessage, kCustom:
			reflect.NewAt(f.typ, fp).Elem().SetZero()
			return
		case kBool:
			*(*bool)(fp) = false
			return
		}
		storeUint(fp, uint8(f.typ.Size()), 0)
	case cPointer:
		*(*unsafe.Pointer)(fp) = nil
	case cSlice:
		*(*sliceHeader)(fp) = sliceHeader{}
	case cMap:
		*(*unsafe.Pointer)(fp) = nil
	}
}

// decodeElem decodes one element value (the key is already read) into p.
func (d *decoder) decodeElem(f *field, p unsafe.Pointer, i, end, depth int, merge bool) (int, error) {
	src := d.src
	switch f.kind {
	case kString, kBytes:
		return d.decodeValue(f, p, i, end)
	case kMessage:
		n, i, err := d.length(i, end)
		if err != nil {
			return i, err
		}
		return i + n, d.decodeMessage(f.msg, p, i, i+n, depth+1, merge)
	case kTime, kDuration:
		n, i, err := d.length(i, end)
		if err != nil {
			return i, err
		}
		return i + n, d.decodeTime(f.kind, p, i, i+n, depth+1, merge)
	case kCustom:
		n, i, err := d.length(i, end)
		if err != nil {
			return i, err
		}
		if err := f.cust.decodeFn(src[i:i+n], p); err != nil {
			return i, errAt(i, "custom codec for %s: %v", f.cust.typ, err)
		}
		return i + n, nil
	}
	return d.decodeScalar(f, p, i, end)
}

// decodeValue decodes one scalar, string or bytes value at i into p. It never
// lets p escape, so typed map code can decode into stack temporaries.
func (d *decoder) decodeValue(f *field, p unsafe.Pointer, i, end int) (int, error) {
	src := d.src
	switch f.kind {
	case kString:
		n, i, err := d.length(i, end)
		if err != nil {
			return i, err
		}
		if !validBytes(src[i : i+n]) {
			return i, errAt(i, "invalid UTF-8 in a string field")
		}
		*(*string)(p) = d.str(i, i+n)
		return i + n, nil
	case kBytes:
		n, i, err := d.length(i, end)
		if err != nil {
			return i, err
		}
		bp := (*[]byte)(p)
		switch {
		case n == 0:
			*bp = nil
		case cap(*bp) >= n:
			*bp = (*bp)[:n]
			copy(*bp, src[i:i+n])
		default:
			*bp = d.bytesAt(i, i+n)
		}
		return i + n, nil
	}
	return d.decodeScalar(f, p, i, end)
}

// decodeScalar decodes one numeric or bool value at i into p.
func (d *decoder) decodeScalar(f *field, p unsafe.Pointer, i, end int) (int, error) {
	src := d.src
	switch f.kind {
	case kFixed32, kSfixed32, kFloat:
		v, n := consumeFixed32(src[i:end])
		if n < 0 {
			return i, errAt(i, "input ends inside a fixed32 (truncated)")
		}
		switch {
		case f.kind == kFloat:
			*(*uint32)(p) = v
		case f.kind == kSfixed32:
			x := int64(int32(v))
			if f.size < 4 && !fitsInt(x, f.size) {
				return i, overflow(i, x, f)
			}
			storeInt(p, f.size, x)
		default:
			if f.size < 4 && !fitsUint(uint64(v), f.size) {
				return i, overflow(i, int64(v), f)
			}
			storeUint(p, f.size, uint64(v))
		}
		return i + 4, nil
	case kFixed64, kSfixed64, kDouble:
		v, n := consumeFixed64(src[i:end])
		if n < 0 {
			return i, errAt(i, "input ends inside a fixed64 (truncated)")
		}
		*(*uint64)(p) = v
		return i + 8, nil
	}
	var v uint64
	if i < end && src[i] < 0x80 {
		v = uint64(src[i])
		i++
	} else {
		x, n := consumeVarint(src[i:end])
		if n < 0 {
			return i, varintErr(i, n)
		}
		v, i = x, i+n
	}
	switch f.kind {
	case kBool:
		*(*bool)(p) = v != 0
	case kInt64:
		*(*int64)(p) = int64(v)
	case kUint64:
		*(*uint64)(p) = v
	case kInt32:
		x := int64(int32(v))
		if f.size < 4 && !fitsInt(x, f.size) {
			return i, overflow(i, x, f)
		}
		storeInt(p, f.size, x)
	case kUint32:
		x := uint64(uint32(v))
		if f.size < 4 && !fitsUint(x, f.size) {
			return i, overflow(i, int64(x), f)
		}
		storeUint(p, f.size, x)
	case kSint32:
		x := int64(int32(decodeZigZag(v & math.MaxUint32)))
		if f.size < 4 && !fitsInt(x, f.size) {
			return i, overflow(i, x, f)
		}
		storeInt(p, f.size, x)
	case kSint64:
		*(*int64)(p) = decodeZigZag(v)
	}
	return i, nil
}

func fitsInt(x int64, size uint8) bool {
	lim := int64(1) << (8*size - 1)
	return x >= -lim && x < lim
}

func fitsUint(x uint64, size uint8) bool { return x < 1<<(8*size) }

func overflow(offset int, v int64, f *field) *decodeErr {
	return errAt(offset, "value %d overflows the field's Go type %s", v, f.elemType)
}

// minTimestamp and maxTimestamp bound google.protobuf.Timestamp's seconds:
// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z.
const minTimestamp, maxTimestamp = -62135596800, 253402300799

// decodeTime decodes a google.protobuf.Timestamp or Duration body. A repeated
// occurrence of the same field merges into the value decoded so far, as
// protobuf merges messages.
func (d *decoder) decodeTime(k kind, p unsafe.Pointer, i, end, depth int, merge bool) error {
	var sec int64
	var nanos int32
	if merge {
		sec, nanos = timeParts(k, p)
	}
	for i < end {
		tagAt := i
		tag, n := consumeVarint(d.src[i:end])
		if n < 0 {
			return varintErr(i, n)
		}
		i += n
		num, wt := tag>>3, uint8(tag&7)
		if num == 0 || num > maxFieldNumber {
			return errAt(tagAt, "invalid field number %d", num)
		}
		switch {
		case (num == 1 || num == 2) && wt == wireVarint:
			v, n := consumeVarint(d.src[i:end])
			if n < 0 {
				return varintErr(i, n)
			}
			i += n
			if num == 1 {
				sec = int64(v)
			} else {
				nanos = int32(v)
			}
		default:
			j, err := skipField(d.src, wt, num, i, end, depth)
			if err != nil {
				return err
			}
			i = j
		}
	}
	if k == kTime {
		// google.protobuf.Timestamp's range: 0001-01-01T00:00:00Z to
		// 9999-12-31T23:59:59.999999999Z, nanos never negative.
		if sec < minTimestamp || sec > maxTimestamp || nanos < 0 || nanos >= 1e9 {
			return errAt(end, "timestamp %ds %dns is outside 0001-01-01 to 9999-12-31 or has nanos outside [0, 1e9)", sec, nanos)
		}
		*(*time.Time)(p) = time.Unix(sec, int64(nanos)).UTC()
		return nil
	}
	const maxSec = math.MaxInt64 / int64(time.Second)
	const maxNanos = math.MaxInt64 % int64(time.Second) // at sec == ±maxSec
	if sec > maxSec || sec < -maxSec || nanos <= -1e9 || nanos >= 1e9 ||
		(sec == maxSec && int64(nanos) > maxNanos) || (sec == -maxSec && int64(nanos) < -maxNanos-1) {
		return errAt(end, "duration %ds %dns does not fit time.Duration", sec, nanos)
	}
	*(*time.Duration)(p) = time.Duration(sec)*time.Second + time.Duration(nanos)
	return nil
}

// decodeRepeated decodes one occurrence of a repeated field, a single
// element or, for scalars, a packed run; the caller has checked that the
// wire type is the element's, or bytes for a packed run.
func (d *decoder) decodeRepeated(f *field, fp unsafe.Pointer, wt uint8, i, end, depth int, first bool) (int, error) {
	h := (*sliceHeader)(fp)
	if first {
		h.len = 0
	}
	if wt == wireBytes && f.kind.packable() {
		n, i, err := d.length(i, end)
		if err != nil {
			return i, err
		}
		runEnd := i + n
		count := n
		switch f.kind.wireType() {
		case wireFixed32:
			if n%4 != 0 {
				return i, errAt(i, "packed fixed32 run of %d bytes is not a multiple of 4", n)
			}
			count = n / 4
		case wireFixed64:
			if n%8 != 0 {
				return i, errAt(i, "packed fixed64 run of %d bytes is not a multiple of 8", n)
			}
			count = n / 8
		default:
			count = 0
			for _, c := range d.src[i:runEnd] {
				if c < 0x80 {
					count++
				}
			}
		}
		d.reserve(f, fp, count)
		for i < runEnd {
			ep := unsafe.Add(h.data, uintptr(h.len)*f.elemSize)
			j, err := d.decodeScalar(f, ep, i, runEnd)
			if err != nil {
				return j, err
			}
			h.len++
			i = j
		}
		return i, nil
	}
	if h.len == h.cap {
		// Count the remaining occurrences so the slice grows once.
		d.reserve(f, fp, 1+countField(d.src, f, i, end))
	}
	ep := unsafe.Add(h.data, uintptr(h.len)*f.elemSize)
	h.len++
	if f.elemPtr {
		pp := (*unsafe.Pointer)(ep)
		if *pp == nil {
			*pp = d.newElem(f)
		}
		ep = *pp
	}
	return d.decodeElem(f, ep, i, end, depth, false)
}

// reserve makes room for n more elements in the slice at fp.
func (d *decoder) reserve(f *field, fp unsafe.Pointer, n int) {
	h := (*sliceHeader)(fp)
	if h.cap-h.len >= n {
		return
	}
	// Value.Grow reallocates in place (one allocation, elements copied with
	// the write barriers the garbage collector needs).
	reflect.NewAt(f.typ, fp).Elem().Grow(n)
}

// countField counts the occurrences of f's key in src[i:end], skipping the
// value at i first. It stops at the first malformed field; the decode loop
// reports that.
func countField(src []byte, f *field, i, end int) int {
	j, err := skipField(src, f.wt, uint64(f.num), i, end, 0)
	if err != nil {
		return 0
	}
	count := 0
	key := uint64(f.num)<<3 | uint64(f.wt)
	for i = j; i < end; {
		// One-byte keys with a one-byte length or varint, what every
		// field numbered below 16 of a short message looks like, without
		// the calls; a field that runs past end ends the loop, as it
		// ends the decode.
		if c := src[i]; c < 0x80 && i+1 < end && src[i+1] < 0x80 {
			switch c & 7 {
			case wireBytes:
				if uint64(c) == key {
					count++
				}
				i += 2 + int(src[i+1])
				continue
			case wireVarint:
				if uint64(c) == key {
					count++
				}
				i += 2
				continue
			}
		}
		tag, n := consumeVarint(src[i:end])
		if n < 0 {
			break
		}
		i += n
		if tag == key {
			count++
		}
		j, err := skipField(src, uint8(tag&7), tag>>3, i, end, 0)
		if err != nil {
			break
		}
		i = j
	}
	return count
}

// skipField returns the offset after the value of an unknown field.
func skipField(src []byte, wt uint8, num uint64, i, end, depth int) (int, error) {
	switch wt {
	case wireVarint:
		_, n := consumeVarint(src[i:end])
		if n < 0 {
			return i, varintErr(i, n)
		}
		return i + n, nil
	case wireFixed32:
		if end-i < 4 {
			return i, errAt(i, "input ends inside a fixed32 (truncated)")
		}
		return i + 4, nil
	case wireFixed64:
		if end-i < 8 {
			return i, errAt(i, "input ends inside a fixed64 (truncated)")
		}
		return i + 8, nil
	case wireBytes:
		v, n := consumeVarint(src[i:end])
		if n < 0 {
			return i, varintErr(i, n)
		}
		if v > uint64(end-i-n) {
			return i, errAt(i, "length %d runs past the end of the input (%d bytes left)", v, end-i-n)
		}
		return i + n + int(v), nil
	case wireStart:
		if depth >= maxDepth {
			return i, errAt(i, "groups nested deeper than %d", maxDepth)
		}
		for i < end {
			tagAt := i
			tag, n := consumeVarint(src[i:end])
			if n < 0 {
				return i, varintErr(i, n)
			}
			if tag>>3 == 0 || tag>>3 > math.MaxInt32 {
				// protowire.ConsumeTag's limits, which protobuf-go applies
				// inside groups.
				return tagAt, errAt(tagAt, "invalid field number %d in group %d", tag>>3, num)
			}
			i += n
			if uint8(tag&7) == wireEnd {
				if tag>>3 != num {
					return tagAt, errAt(tagAt, "group %d closed by end-group %d", num, tag>>3)
				}
				return i, nil
			}
			j, err := skipField(src, uint8(tag&7), tag>>3, i, end, depth+1)
			if err != nil {
				return j, err
			}
			i = j
		}
		return i, errAt(i, "input ends inside group %d (truncated)", num)
	case wireEnd:
		return i, errAt(i, "end-group %d without a start", num)
	}
	return i, errAt(i, "invalid wire type %d", wt)
}

// decodeEntry decodes a map entry message {key = 1; value = 2} into the key
// and value at kp and vp. A missing key or value is the zero value.
func (d *decoder) decodeEntry(f *field, kp, vp unsafe.Pointer, i, end, depth int) error {
	if depth > maxDepth {
		return errAt(i, "nesting deeper than %d", maxDepth)
	}
	kf, vf := f.mapKey, f.mapVal
	valSeen := false
	for i < end {
		tag, n := consumeVarint(d.src[i:end])
		if n < 0 {
			return varintErr(i, n)
		}
		num, wt := tag>>3, uint8(tag&7)
		if num == 0 || num > maxFieldNumber {
			return errAt(i, "invalid field number %d in a map entry", num)
		}
		i += n
		var err error
		// A key or value with another wire type is skipped like an unknown
		// field, as protobuf-go does (and as decodeMessage does).
		switch {
		case num == 1 && wt == kf.wt:
			i, err = d.decodeElem(kf, kp, i, end, depth, false)
		case num == 2 && wt == vf.wt:
			p := vp
			if vf.card == cPointer {
				pp := (*unsafe.Pointer)(vp)
				if *pp == nil {
					*pp = reflect.New(vf.elemType).UnsafePointer()
				}
				p = *pp
			}
			i, err = d.decodeElem(vf, p, i, end, depth, valSeen)
			valSeen = true
		default:
			i, err = skipField(d.src, wt, num, i, end, depth)
		}
		if err != nil {
			return err
		}
	}
	if !valSeen && vf.card == cPointer {
		// protobuf reads a missing message value as an empty message.
		*(*unsafe.Pointer)(vp) = reflect.New(vf.elemType).UnsafePointer()
	}
	return nil
}

// decodeEntryValue decodes a map entry whose key and value are scalars,
// strings or bytes, without letting kp and vp escape.
func (d *decoder) decodeEntryValue(f *field, kp, vp unsafe.Pointer, i, end int) error {
	kf, vf := f.mapKey, f.mapVal
	for i < end {
		tag, n := consumeVarint(d.src[i:end])
		if n < 0 {
			return varintErr(i, n)
		}
		num, wt := tag>>3, uint8(tag&7)
		if num == 0 || num > maxFieldNumber {
			return errAt(i, "invalid field number %d in a map entry", num)
		}
		i += n
		var err error
		switch {
		case num == 1 && wt == kf.wt:
			i, err = d.decodeValue(kf, kp, i, end)
		case num == 2 && wt == vf.wt:
			i, err = d.decodeValue(vf, vp, i, end)
		default:
			i, err = skipField(d.src, wt, num, i, end, 0)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
