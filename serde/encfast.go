package serde

import (
	"encoding/binary"
	"unsafe"
)

// encState is the running state of an encode program shared by
// appendMessage and appendFast: the stacks of inlined levels.
type encState struct {
	base       unsafe.Pointer // the struct or element the current ops address
	i          int            // the op to run next
	sp, lp, pp int            // heights of starts, loops and ptrs
	starts     [maxInline]int // where the bodies of open inlined messages start
	loops      [maxInline]loopFrame
	ptrs       [maxInline]unsafe.Pointer // the bases around the running opPtrs
	// needFix is set by appendFast when it stops at an end op whose body
	// is 128 bytes or more: the caller moves the body to make room for the
	// length (fixLength) and sets fixed, and appendFast goes on with the
	// rest of that op.
	needFix, fixed bool
}

// fastRoom is the free capacity appendMessage wants before it hands the
// program to appendFast: a key stored as an 8-byte word and a 10-byte
// varint. appendFast stops when fewer than fastRoom+2+32 bytes are free,
// room for the most one of its ops writes (a short string: 34 bytes) with a
// margin that measured faster than the exact bound.
const fastRoom = 8 + 10

// appendFast runs the program from st.i for as long as each op is a common
// case it can do without calling anything: empty fields, short ASCII
// strings and bytes with one-byte keys, varints and fixed-width numbers,
// inlined messages, oneofs set to such a value. It stops at the end of the
// program or at the first op it leaves to appendMessage, of which it has
// written nothing, with st.i at that op.
//
// Being free of calls is the point: Go's calls clobber every register, so
// appendMessage's loop, whose other cases call, keeps its state on the
// stack and spills it at every op, where this loop keeps it in registers.
// Growing b is a call too, so it stops when fewer than fastRoom bytes are
// free, and it leaves moving a body of 128 bytes or more to make room for
// its length to its caller (needFix).
func appendFast(b []byte, prog []encOp, st *encState) []byte {
	i, base, sp := st.i, st.base, st.sp
	fixed := st.fixed
	st.fixed, st.needFix = false, false
loop:
	for ; i < len(prog); i++ {
		if cap(b)-len(b) < fastRoom+2+32 {
			break
		}
		o := &prog[i]
		fp := unsafe.Add(base, o.offset)
		// Set by the cases that write a short string or bytes, which the
		// code after the switch copies.
		var ctag byte
		var csrc *byte
		var cn int
		var cascii bool
		switch o.op {
		case opString:
			s := *(*string)(fp)
			n := len(s)
			if n == 0 {
				continue
			}
			if n > 32 || o.tag1 == 0 {
				break loop
			}
			ctag, csrc, cn, cascii = o.tag1, unsafe.StringData(s), n, true
		case opBytes:
			v := *(*[]byte)(fp)
			n := len(v)
			if n == 0 {
				continue
			}
			if n > 32 || o.tag1 == 0 {
				break loop
			}
			ctag, csrc, cn = o.tag1, unsafe.SliceData(v), n
		case opVarint64, opInt32, opUint32:
			var v uint64
			switch o.op {
			case opVarint64:
				v = *(*uint64)(fp)
			case opInt32:
				v = uint64(int64(*(*int32)(fp)))
			default:
				v = uint64(*(*uint32)(fp))
			}
			if v == 0 {
				continue
			}
			k := len(b)
			if o.tag1 != 0 {
				b = b[:k+1]
				b[k] = o.tag1
			} else {
				b = b[:k+8]
				binary.LittleEndian.PutUint64(b[k:], o.f.tagWord)
				b = b[:k+int(o.f.tagLen)]
			}
			k = len(b)
			b = b[:k+10]
			for v >= 0x80 {
				b[k] = byte(v) | 0x80
				v >>= 7
				k++
			}
			b[k] = byte(v)
			b = b[:k+1]
		case opFixed64:
			v := *(*uint64)(fp)
			if v == 0 {
				continue
			}
			k := len(b)
			if o.tag1 != 0 {
				b = b[:k+1]
				b[k] = o.tag1
			} else {
				b = b[:k+8]
				binary.LittleEndian.PutUint64(b[k:], o.f.tagWord)
				b = b[:k+int(o.f.tagLen)]
			}
			k = len(b)
			b = b[:k+8]
			binary.LittleEndian.PutUint64(b[k:], v)
		case opFixed32:
			v := *(*uint32)(fp)
			if v == 0 {
				continue
			}
			k := len(b)
			if o.tag1 != 0 {
				b = b[:k+1]
				b[k] = o.tag1
			} else {
				b = b[:k+8]
				binary.LittleEndian.PutUint64(b[k:], o.f.tagWord)
				b = b[:k+int(o.f.tagLen)]
			}
			k = len(b)
			b = b[:k+4]
			binary.LittleEndian.PutUint32(b[k:], v)
		case opBegin:
			if o.tag1 == 0 {
				break loop
			}
			k := len(b)
			b = b[:k+2]
			b[k], b[k+1] = o.tag1, 0
			st.starts[sp&(maxInline-1)] = k + 2
			sp++
		case opEndBegin:
			// opEnd, then the opBegin after it: the sibling's key and
			// placeholder take the closed body's place on the stack.
			s0 := st.starts[(sp-1)&(maxInline-1)]
			if s0 < 1 {
				break loop
			}
			if n := len(b) - s0; n < 0x80 {
				b[s0-1] = byte(n)
			} else if !fixed {
				st.needFix = true
				break loop
			}
			fixed = false
			i++
			k := len(b)
			b = b[:k+2]
			b[k], b[k+1] = prog[i].tag1, 0
			st.starts[(sp-1)&(maxInline-1)] = k + 2
		case opEnd, opPtrEnd:
			s0 := st.starts[(sp-1)&(maxInline-1)]
			if o.unkn >= 0 || s0 < 1 {
				break loop
			}
			if n := len(b) - s0; n < 0x80 {
				b[s0-1] = byte(n)
			} else if !fixed {
				st.needFix = true
				break loop
			}
			fixed = false
			sp--
			if o.op == opPtrEnd {
				st.pp--
				base = st.ptrs[st.pp&(maxInline-1)]
			}
		case opPtr:
			q := *(*unsafe.Pointer)(fp)
			if q == nil {
				i = int(o.jump) - 1 // past the opPtrEnd
				continue
			}
			if o.tag1 == 0 {
				break loop
			}
			st.ptrs[st.pp&(maxInline-1)] = base
			st.pp++
			base = q
			k := len(b)
			b = b[:k+2]
			b[k], b[k+1] = o.tag1, 0
			st.starts[sp&(maxInline-1)] = k + 2
			sp++
		case opLoop:
			h := (*sliceHeader)(fp)
			if h.len == 0 {
				i = int(o.jump) // past the opLoopEnd
				continue
			}
			if o.tag1 == 0 {
				break loop
			}
			st.loops[st.lp&(maxInline-1)] = loopFrame{base: base, left: h.len - 1, op: i}
			st.lp++
			base = h.data
			k := len(b)
			b = b[:k+2]
			b[k], b[k+1] = o.tag1, 0
			st.starts[sp&(maxInline-1)] = k + 2
			sp++
		case opLoopEnd:
			s0 := st.starts[(sp-1)&(maxInline-1)]
			if o.unkn >= 0 || s0 < 1 || o.tag1 == 0 {
				break loop
			}
			if n := len(b) - s0; n < 0x80 {
				b[s0-1] = byte(n)
			} else if !fixed {
				st.needFix = true
				break loop
			}
			fixed = false
			fr := &st.loops[(st.lp-1)&(maxInline-1)]
			if fr.left > 0 {
				// The key and placeholder fit: the room was checked
				// before this op, or made after fixLength.
				fr.left--
				fr.j++
				base = unsafe.Add(base, o.elemSize)
				k := len(b)
				b = b[:k+2]
				b[k], b[k+1] = o.tag1, 0
				st.starts[(sp-1)&(maxInline-1)] = k + 2
				i = int(o.jump) // to the first op of the element
				continue
			}
			sp--
			base = fr.base
			st.lp--
		case opOneof:
			sb := unsafe.Add(fp, -int(o.f.offset))
			g := o.f.oneof
			k, set := 0, 0
			for j, off := range g.offsets {
				nz := 0
				if *(*unsafe.Pointer)(unsafe.Add(sb, off)) != nil {
					nz = 1
				}
				k = nz*j + (1-nz)*k
				set += nz
			}
			if set == 0 {
				continue
			}
			mf := g.members[k]
			if set > 1 || mf.tagLen != 1 {
				break loop
			}
			ep := *(*unsafe.Pointer)(unsafe.Add(sb, g.offsets[k]))
			switch {
			case mf.kind == kString:
				s := *(*string)(ep)
				if len(s) > 32 {
					break loop
				}
				ctag, csrc, cn, cascii = mf.tag[0], unsafe.StringData(s), len(s), true
			case mf.kind == kBytes:
				v := *(*[]byte)(ep)
				if len(v) > 32 {
					break loop
				}
				ctag, csrc, cn = mf.tag[0], unsafe.SliceData(v), len(v)
			case mf.kind == kInt64 && mf.size == 8, mf.kind == kBool:
				var v uint64
				if mf.kind == kBool {
					v = uint64(*(*uint8)(ep))
				} else {
					v = *(*uint64)(ep)
				}
				w := len(b)
				b = b[:w+11]
				b[w] = mf.tag[0]
				w++
				for v >= 0x80 {
					b[w] = byte(v) | 0x80
					v >>= 7
					w++
				}
				b[w] = byte(v)
				b = b[:w+1]
				continue
			case mf.kind == kDouble || (mf.kind == kFixed64 || mf.kind == kSfixed64) && mf.size == 8:
				w := len(b)
				b = b[:w+9]
				b[w] = mf.tag[0]
				binary.LittleEndian.PutUint64(b[w+1:], *(*uint64)(ep))
				continue
			default:
				break loop
			}
			if cn == 0 {
				// A member set to an empty string or bytes is written.
				w := len(b)
				b = b[:w+2]
				b[w], b[w+1] = ctag, 0
				continue
			}
		default:
			break loop
		}
		if cn == 0 {
			continue
		}
		// A string or bytes of 1 to 32 bytes: key, length and the bytes
		// in overlapping word moves, ORed for the ASCII test of strings.
		src := unsafe.Slice(csrc, cn)
		k := len(b)
		b = b[:k+2+cn]
		dst := b[k+2:]
		var acc uint64
		switch {
		case cn >= 16:
			w0, w1 := binary.LittleEndian.Uint64(src), binary.LittleEndian.Uint64(src[8:])
			w2, w3 := binary.LittleEndian.Uint64(src[cn-16:]), binary.LittleEndian.Uint64(src[cn-8:])
			binary.LittleEndian.PutUint64(dst[cn-16:], w2)
			binary.LittleEndian.PutUint64(dst[cn-8:], w3)
			binary.LittleEndian.PutUint64(dst, w0)
			binary.LittleEndian.PutUint64(dst[8:], w1)
			acc = w0 | w1 | w2 | w3
		case cn >= 8:
			w0, w1 := binary.LittleEndian.Uint64(src), binary.LittleEndian.Uint64(src[cn-8:])
			binary.LittleEndian.PutUint64(dst[cn-8:], w1)
			binary.LittleEndian.PutUint64(dst, w0)
			acc = w0 | w1
		case cn >= 4:
			w0, w1 := binary.LittleEndian.Uint32(src), binary.LittleEndian.Uint32(src[cn-4:])
			binary.LittleEndian.PutUint32(dst[cn-4:], w1)
			binary.LittleEndian.PutUint32(dst, w0)
			acc = uint64(w0 | w1)
		default:
			c0, c1, c2 := src[0], src[cn/2], src[cn-1]
			dst[cn-1], dst[cn/2], dst[0] = c2, c1, c0
			acc = uint64(c0 | c1 | c2)
		}
		if cascii && acc&0x8080808080808080 != 0 {
			b = b[:k] // not ASCII: appendMessage validates it
			break
		}
		b[k], b[k+1] = ctag, byte(cn)
	}
	st.i, st.base, st.sp = i, base, sp
	return b
}
