package serde

import (
	"time"
	"unsafe"
)

// loadInt reads a signed integer of the given Go width.
func loadInt(p unsafe.Pointer, size uint8) int64 {
	switch size {
	case 1:
		return int64(*(*int8)(p))
	case 2:
		return int64(*(*int16)(p))
	case 4:
		return int64(*(*int32)(p))
	}
	return *(*int64)(p)
}

// loadUint reads an unsigned integer of the given Go width.
func loadUint(p unsafe.Pointer, size uint8) uint64 {
	switch size {
	case 1:
		return uint64(*(*uint8)(p))
	case 2:
		return uint64(*(*uint16)(p))
	case 4:
		return uint64(*(*uint32)(p))
	}
	return *(*uint64)(p)
}

func storeInt(p unsafe.Pointer, size uint8, v int64) {
	switch size {
	case 1:
		*(*int8)(p) = int8(v)
	case 2:
		*(*int16)(p) = int16(v)
	case 4:
		*(*int32)(p) = int32(v)
	default:
		*(*int64)(p) = v
	}
}

func storeUint(p unsafe.Pointer, size uint8, v uint64) {
	switch size {
	case 1:
		*(*uint8)(p) = uint8(v)
	case 2:
		*(*uint16)(p) = uint16(v)
	case 4:
		*(*uint32)(p) = uint32(v)
	default:
		*(*uint64)(p) = v
	}
}

// isZero reports whether a singular scalar holds its zero value, which proto3
// does not write. Floats compare by bits so -0.0 is written.
func isZero(f *field, p unsafe.Pointer) bool {
	switch f.kind {
	case kBool:
		return !*(*bool)(p)
	case kString:
		return len(*(*string)(p)) == 0
	case kBytes:
		return len(*(*[]byte)(p)) == 0
	case kFloat:
		return *(*uint32)(p) == 0
	case kDouble:
		return *(*uint64)(p) == 0
	case kTime:
		return (*time.Time)(p).IsZero()
	}
	switch f.size {
	case 1:
		return *(*uint8)(p) == 0
	case 2:
		return *(*uint16)(p) == 0
	case 4:
		return *(*uint32)(p) == 0
	}
	return *(*uint64)(p) == 0
}

// appendScalar appends the value (without key) of a scalar element. String
// and bytes values carry their length prefix.
func appendScalar(b []byte, f *field, p unsafe.Pointer) []byte {
	switch f.kind {
	case kBool:
		if *(*bool)(p) {
			return append(b, 1)
		}
		return append(b, 0)
	case kInt32, kInt64:
		return appendVarint(b, uint64(loadInt(p, f.size)))
	case kUint32, kUint64:
		return appendVarint(b, loadUint(p, f.size))
	case kSint32, kSint64:
		return appendVarint(b, encodeZigZag(loadInt(p, f.size)))
	case kFixed32, kSfixed32:
		return appendFixed32(b, uint32(loadUint(p, f.size)))
	case kFixed64, kSfixed64:
		return appendFixed64(b, loadUint(p, f.size))
	case kFloat:
		return appendFixed32(b, *(*uint32)(p))
	case kDouble:
		return appendFixed64(b, *(*uint64)(p))
	case kString:
		s := *(*string)(p)
		b = appendVarint(b, uint64(len(s)))
		return append(b, s...)
	case kBytes:
		s := *(*[]byte)(p)
		b = appendVarint(b, uint64(len(s)))
		return append(b, s...)
	}
	return b
}

// sizeScalar is the number of bytes appendScalar writes.
func sizeScalar(f *field, p unsafe.Pointer) int {
	switch f.kind {
	case kBool:
		return 1
	case kInt32, kInt64:
		return sizeVarint(uint64(loadInt(p, f.size)))
	case kUint32, kUint64:
		return sizeVarint(loadUint(p, f.size))
	case kSint32, kSint64:
		return sizeVarint(encodeZigZag(loadInt(p, f.size)))
	case kFixed32, kSfixed32, kFloat:
		return 4
	case kFixed64, kSfixed64, kDouble:
		return 8
	case kString:
		n := len(*(*string)(p))
		return sizeVarint(uint64(n)) + n
	case kBytes:
		n := len(*(*[]byte)(p))
		return sizeVarint(uint64(n)) + n
	}
	return 0
}

// Timestamp and Duration field keys: seconds = 1 (varint), nanos = 2 (varint).
const (
	tagSeconds = 1<<3 | wireVarint
	tagNanos   = 2<<3 | wireVarint
)

// timeParts splits a time.Time or time.Duration into protobuf seconds and
// nanos.
func timeParts(k kind, p unsafe.Pointer) (sec int64, nanos int32) {
	if k == kTime {
		t := (*time.Time)(p)
		return t.Unix(), int32(t.Nanosecond())
	}
	d := *(*time.Duration)(p)
	return int64(d / time.Second), int32(d % time.Second)
}

func appendTimeBody(b []byte, sec int64, nanos int32) []byte {
	if sec != 0 {
		b = append(b, tagSeconds)
		b = appendVarint(b, uint64(sec))
	}
	if nanos != 0 {
		b = append(b, tagNanos)
		b = appendVarint(b, uint64(int64(nanos)))
	}
	return b
}

func sizeTimeBody(sec int64, nanos int32) int {
	n := 0
	if sec != 0 {
		n += 1 + sizeVarint(uint64(sec))
	}
	if nanos != 0 {
		n += 1 + sizeVarint(uint64(int64(nanos)))
	}
	return n
}
