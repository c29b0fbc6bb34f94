package blob

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// TrailerSize is the number of bytes AppendTrailer appends.
const TrailerSize = 16

// trailerMagic ends every stored object. Being last, it is the first thing a
// reader checks, so a truncated object is recognised before its length is
// trusted.
const trailerMagic = "EDB1"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C (Castagnoli) of payload, as trailers record it.
func Checksum(payload []byte) uint32 { return crc32.Checksum(payload, castagnoli) }

// AppendTrailer appends the trailer that backends store after payload and
// returns the extended buffer. The trailer is, little-endian: the CRC-32C
// (Castagnoli) of payload (4 bytes), len(payload) (8 bytes), and the magic
// "EDB1" (4 bytes). Backends write payload followed by the trailer, and give
// the whole object to CheckTrailer when reading it back.
func AppendTrailer(dst, payload []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(payload, castagnoli))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(payload)))
	return append(dst, trailerMagic...)
}

// CheckTrailer verifies a stored object (payload followed by the trailer of
// AppendTrailer) and returns its payload, a subslice of data. Any mismatch is
// a *CorruptError naming the object name; CheckTrailer never panics.
func CheckTrailer(name string, data []byte) ([]byte, error) {
	if len(data) < TrailerSize {
		return nil, &CorruptError{Name: name, Reason: fmt.Sprintf(
			"truncated: %d bytes, shorter than the %d-byte trailer", len(data), TrailerSize)}
	}
	t := data[len(data)-TrailerSize:]
	if string(t[12:]) != trailerMagic {
		return nil, &CorruptError{Name: name, Reason: fmt.Sprintf(
			"no trailer: object ends in %q, not the magic %q (truncated, or not written by an eddy blob store)", t[12:], trailerMagic)}
	}
	n := uint64(len(data) - TrailerSize)
	if want := binary.LittleEndian.Uint64(t[4:12]); want != n {
		return nil, &CorruptError{Name: name, Reason: fmt.Sprintf(
			"length mismatch: trailer records %d payload bytes, object has %d", want, n)}
	}
	payload := data[:n:n]
	if want, got := binary.LittleEndian.Uint32(t[:4]), crc32.Checksum(payload, castagnoli); want != got {
		return nil, &CorruptError{Name: name, Reason: fmt.Sprintf(
			"checksum mismatch: trailer records crc32c %08x, payload has %08x", want, got)}
	}
	return payload, nil
}
