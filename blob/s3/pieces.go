package s3

import (
	"errors"
	"io"
)

// pieces is an object made of byte slices laid end to end (the caller's
// payload, then the trailer), so that it is uploaded without being copied
// into one buffer.
type pieces [][]byte

func (p pieces) size() int64 {
	var n int64
	for _, b := range p {
		n += int64(len(b))
	}
	return n
}

// reader returns a seekable reader of the l bytes at off; the SDK seeks
// to sign the body and to rewind it for a retry.
func (p pieces) reader(off, l int64) *piecesReader {
	return &piecesReader{p: p, start: off, end: off + l, pos: off}
}

// piecesReader reads the bytes [start, end) of pieces.
type piecesReader struct {
	p               pieces
	start, end, pos int64
}

func (r *piecesReader) Read(dst []byte) (int, error) {
	if r.pos >= r.end {
		return 0, io.EOF
	}
	n, base := 0, int64(0)
	for _, b := range r.p {
		if n == len(dst) || r.pos >= r.end {
			break
		}
		if r.pos < base+int64(len(b)) {
			lo := r.pos - base
			hi := min(int64(len(b)), r.end-base)
			k := copy(dst[n:], b[lo:hi])
			n += k
			r.pos += int64(k)
		}
		base += int64(len(b))
	}
	return n, nil
}

func (r *piecesReader) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = r.start + offset
	case io.SeekCurrent:
		abs = r.pos + offset
	case io.SeekEnd:
		abs = r.end + offset
	default:
		return 0, errors.New("blob/s3: invalid whence")
	}
	if abs < r.start {
		return 0, errors.New("blob/s3: seek before the start")
	}
	r.pos = abs
	return abs - r.start, nil
}

// Len is what remains, which the SDK uses as the content length.
func (r *piecesReader) Len() int { return int(max(r.end-r.pos, 0)) }
