package serde

import "math/bits"

// Wire types of the protobuf encoding.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireStart   = 3
	wireEnd     = 4
	wireFixed32 = 5
)

// appendVarint appends v in base-128 varint form.
func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// sizeVarint is the number of bytes appendVarint writes for v.
func sizeVarint(v uint64) int {
	// 9/64 approximates 1/7 and is exact for every bit length 1..64.
	return int(9*uint32(bits.Len64(v))+64) / 64
}

func appendFixed32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

func appendFixed64(b []byte, v uint64) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24),
		byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
}

// consumeVarint reads a varint from the start of b. It returns the value and
// the number of bytes read, or n < 0 when b is truncated (errTruncated) or the
// varint is longer than ten bytes or overflows 64 bits (errOverlong).
func consumeVarint(b []byte) (v uint64, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	if len(b) > 1 && b[1] < 0x80 {
		return uint64(b[0]&0x7f) | uint64(b[1])<<7, 2
	}
	var shift uint
	for i := 0; i < len(b); i++ {
		c := b[i]
		if i == 9 {
			// The tenth byte may only carry the 64th bit.
			if c > 1 {
				return 0, errOverlong
			}
			return v | uint64(c)<<63, 10
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, i + 1
		}
		shift += 7
	}
	return 0, errTruncated
}

func consumeFixed32(b []byte) (uint32, int) {
	if len(b) < 4 {
		return 0, errTruncated
	}
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24, 4
}

func consumeFixed64(b []byte) (uint64, int) {
	if len(b) < 8 {
		return 0, errTruncated
	}
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56, 8
}

// Negative byte counts returned by the consume functions.
const (
	errTruncated = -1
	errOverlong  = -2
)

func encodeZigZag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }
func decodeZigZag(v uint64) int64 { return int64(v>>1) ^ -int64(v&1) }
