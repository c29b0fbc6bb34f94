package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The key of a record is
//
//	kg (2 bytes, big-endian) | state id (4 bytes, big-endian) | uvarint(len key) | key | sub-key
//
// Key groups come first, so the records of a range of key groups are one
// contiguous range of keys: a restore cuts away foreign key groups with two
// range deletions and copies a range of another part with one scan. The
// length prefix keeps one key's records together and apart from a longer key
// that starts with the same bytes. The sub-key is empty for a whole value.

// MaxKeyGroups is the largest max parallelism the key layout holds.
const MaxKeyGroups = 1 << 16

const headerLen = 2 + 4 // key group and state id

// appendGroupKey appends the first key of key group kg. groupKey(n) is the
// first key past key group n-1.
func appendGroupKey(dst []byte, kg int) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(kg))
}

// groupBound returns the key that bounds key groups below kg: the first key
// of kg, or, for kg = MaxKeyGroups, a key past every record.
func groupBound(kg int) []byte {
	if kg >= MaxKeyGroups {
		return []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	return appendGroupKey(nil, kg)
}

// appendStatePrefix appends the prefix of the records of state in key group kg.
func appendStatePrefix(dst []byte, kg int, state uint32) []byte {
	dst = appendGroupKey(dst, kg)
	return binary.BigEndian.AppendUint32(dst, state)
}

// appendKeyPrefix appends the prefix of the records of key in state of key
// group kg: its whole value's key, which its element records extend.
func appendKeyPrefix(dst []byte, kg int, state uint32, key []byte) []byte {
	dst = appendStatePrefix(dst, kg, state)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// appendKey appends the key of the record (kg, state, key, sub).
func appendKey(dst []byte, kg int, state uint32, key, sub []byte) []byte {
	return append(appendKeyPrefix(dst, kg, state, key), sub...)
}

// appendPrefixEnd appends the least key greater than every key that
// starts with p, or nothing if there is none (p all 0xff).
func appendPrefixEnd(dst, p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			dst = append(dst, p[:i+1]...)
			dst[len(dst)-1]++
			return dst
		}
	}
	return dst
}

// parseKey splits a record key into its parts. The key and sub-key alias k.
func parseKey(k []byte) (kg int, state uint32, key, sub []byte, err error) {
	if len(k) < headerLen+1 {
		return 0, 0, nil, nil, fmt.Errorf("record key %x: %d bytes, shorter than a header", k, len(k))
	}
	kg = int(binary.BigEndian.Uint16(k))
	state = binary.BigEndian.Uint32(k[2:])
	n, w := binary.Uvarint(k[headerLen:])
	if w <= 0 {
		return 0, 0, nil, nil, fmt.Errorf("record key %x: bad key length", k)
	}
	rest := k[headerLen+w:]
	if n > uint64(len(rest)) {
		return 0, 0, nil, nil, fmt.Errorf("record key %x: key length %d runs past its end", k, n)
	}
	return kg, state, rest[:n], rest[n:], nil
}

var errClosed = errors.New("pebble: DB is closed")
