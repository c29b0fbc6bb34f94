package dstl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// The object format. Every object the log uploads is one frame, or, for
// a streamed object (Options.Parts, on a blob.Parter), several
// frames laid end to end, one per batch in sealing order. A frame is
//
//	header (20 bytes, little-endian):
//	  [0:4)   magic "DSTL"
//	  [4]     format version, 1
//	  [5]     flags: bit 0 set = the body is zstd-compressed; other bits 0
//	  [6:8)   reserved, 0
//	  [8:12)  length of the stored body (after compression)
//	  [12:16) length of the raw body (before compression)
//	  [16:20) CRC-32C (Castagnoli) of header bytes [0:16) followed by the
//	          stored body
//	stored body: the raw body, or its zstd frame
//
// and the raw body is a writer table with each writer's changes in
// sequence order (all integers unsigned varints):
//
//	body    = nwriters section*
//	section = len(name) name nchanges size change*
//	change  = seqdelta keygroup state (len(key)<<3 | op) key [len(sub) sub] [len(value) value]
//
// size is the byte length of the section's changes, 4 bytes little-endian,
// so a reader skips the sections of writers it does not restore without
// parsing them. seqdelta is the change's sequence number minus that of the previous
// change of the section (the first change's delta is its sequence number),
// so sequence numbers are at least 1 and strictly increase within a
// section; gaps are changes superseded within the batch. In an object of
// several frames a writer has a section in each frame it logged in, its
// sequence numbers increasing from frame to frame. A Handle records an
// object's checksum: its one frame's header CRC, or for several frames the
// CRC-32C of their header CRCs, little-endian, in order (framesCRC).
// Readers before streamed objects existed read only one-frame objects. op is an Op: the
// element operations (OpPutElem, OpDeleteElem) carry the element's sub
// key, and the deletes carry no value. The object must end exactly where
// its last section does.
//
// Version 1 objects (written before element operations existed) had
// (len(key)<<1 | delete) in place of (len(key)<<3 | op), no sub keys and no
// section size; DecodeObject reads both.
const (
	objectMagic   = "DSTL"
	formatVersion = 2
	headerSize    = 20
	flagZstd      = 1

	// maxBody bounds the raw body of an object, so a damaged header cannot
	// make a reader allocate without limit.
	maxBody = 1 << 30
	// maxChange bounds len(key)+len(value) of one change.
	maxChange = 64 << 20
)

// ErrCorrupt is matched (errors.Is) by the errors DecodeObject returns for
// bytes that are not a well-formed, intact object.
var ErrCorrupt = errors.New("dstl: corrupt object")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Op is what a change does to its key's value.
type Op uint8

// The operations. OpPut and OpDelete replace or remove a key's whole value;
// the element operations change one element of it (a map entry, a list
// slot), so a collection state logs what changed rather than its whole
// value on every write. Every operation sets or removes something, so
// applying a change twice, or on top of a snapshot that already holds it,
// gives the same state — which materializing a few key groups at a time
// relies on. Within a batch the log keeps only the last OpPut/OpDelete per
// (state, key) and the last OpPutElem/OpDeleteElem per (state, key, sub);
// replaying the kept changes in order gives the batch's final state.
const (
	OpPut        Op = 0 // Value is the key's new value
	OpDelete     Op = 1 // the key is removed
	OpPutElem    Op = 2 // the element Sub of the key's value is set to Value
	OpDeleteElem Op = 3 // the element Sub of the key's value is removed
	opCount         = 4
)

// hasSub reports whether changes of op carry a sub key.
func (op Op) hasSub() bool { return op == OpPutElem || op == OpDeleteElem }

// hasValue reports whether changes of op carry a value.
func (op Op) hasValue() bool { return op == OpPut || op == OpPutElem }

// String names the operation.
func (op Op) String() string {
	switch op {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpPutElem:
		return "put-elem"
	case OpDeleteElem:
		return "delete-elem"
	}
	return fmt.Sprintf("op(%d)", uint8(op))
}

// Change is one decoded state change.
type Change struct {
	Seq      uint64 // the writer's sequence number of the change, from 1
	KeyGroup uint32
	State    uint32 // the state id
	Op       Op
	Key      []byte
	Sub      []byte // the element's key, for OpPutElem and OpDeleteElem
	Value    []byte // nil for the deletes
}

// Section holds one writer's changes in an object, in sequence order.
type Section struct {
	Writer  string
	Changes []Change
}

// Object is a decoded object: the changes of each writer in one batch.
type Object struct {
	Compressed bool
	Sections   []Section
}

// Batch is a verified object as Read replays it: each change is recorded by
// where it lies in the object's body (a rec, 24 bytes without pointers)
// rather than decoded into a Change (96 bytes with three slices), so a
// restore holding a long log allocates a quarter of the memory, and none
// the collector has to scan. Fetch returns Batches; Read expands one key
// group's changes at a time.
type Batch struct {
	compressed bool
	crc        uint32 // the object's checksum, from its header
	sections   []batchSection
}

// batchSection is one writer's changes in a Batch.
type batchSection struct {
	writer string
	body   []byte // the object's raw body, which recs point into
	recs   []rec
}

// rec locates one change in its section's body. The body was checked when
// the Batch was decoded, so expanding a rec cannot fail.
type rec struct {
	seq   uint64
	kg    uint32
	state uint32
	key   uint32 // body offset of the key
	keyOp uint32 // len(key)<<3 | op; len(key) <= maxChange < 1<<29
}

// change expands r, a change of s, into c; its key, sub key and value
// alias s's body. The deletes have a nil Value and the whole-value
// operations a nil Sub; present ones are never nil, even when empty.
func (s *batchSection) change(r *rec, c *Change) {
	op := Op(r.keyOp & 7)
	at := int(r.key) + int(r.keyOp>>3)
	*c = Change{Seq: r.seq, KeyGroup: r.kg, State: r.state, Op: op, Key: s.body[r.key:at:at]}
	if op.hasSub() {
		c.Sub, at = s.lenPrefixed(at)
	}
	if op.hasValue() {
		c.Value, _ = s.lenPrefixed(at)
	}
}

// lenPrefixed returns the varint-length-prefixed bytes at body offset at
// and the offset after them.
func (s *batchSection) lenPrefixed(at int) ([]byte, int) {
	n, w := binary.Uvarint(s.body[at:])
	at += w
	end := at + int(n)
	return s.body[at:end:end], end
}

var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
		if err != nil {
			panic("dstl: zstd encoder: " + err.Error()) // only on invalid options
		}
		return e
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxMemory(maxBody), zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			panic("dstl: zstd decoder: " + err.Error())
		}
		return d
	})
)

// appendChangeTail appends the part of a change's encoding that follows its
// sequence delta.
func appendChangeTail(b []byte, kg, state uint32, op Op, key, sub, value []byte) []byte {
	b = binary.AppendUvarint(b, uint64(kg))
	b = binary.AppendUvarint(b, uint64(state))
	b = binary.AppendUvarint(b, uint64(len(key))<<3|uint64(op))
	b = append(b, key...)
	if op.hasSub() {
		b = binary.AppendUvarint(b, uint64(len(sub)))
		b = append(b, sub...)
	}
	if op.hasValue() {
		b = binary.AppendUvarint(b, uint64(len(value)))
		b = append(b, value...)
	}
	return b
}

// sealObject turns a raw body (which starts at raw[headerSize:]; the first
// headerSize bytes are room for the header) into a complete object,
// compressing it if compress is set, into dst (headerSize bytes long) if
// not nil. It returns raw itself if not compressing.
func sealObject(raw []byte, compress bool, dst []byte) ([]byte, error) {
	body := raw[headerSize:]
	if len(body) > maxBody {
		return nil, fmt.Errorf("dstl: object body of %d bytes exceeds the %d-byte limit", len(body), maxBody)
	}
	obj := raw
	var flags byte
	if compress {
		flags = flagZstd
		if dst == nil {
			dst = make([]byte, headerSize, headerSize+len(body)/2+64)
		}
		obj = zstdEncoder().EncodeAll(body, dst[:headerSize])
	}
	stored := obj[headerSize:]
	h := obj[:headerSize]
	copy(h, objectMagic)
	h[4] = formatVersion
	h[5] = flags
	h[6], h[7] = 0, 0
	binary.LittleEndian.PutUint32(h[8:], uint32(len(stored)))
	binary.LittleEndian.PutUint32(h[12:], uint32(len(body)))
	crc := crc32.Update(crc32.Checksum(h[:16], castagnoli), castagnoli, stored)
	binary.LittleEndian.PutUint32(h[16:], crc)
	return obj, nil
}

// EncodeObject encodes o, zstd-compressed if compress is set. Within each
// section, sequence numbers must be at least 1 and strictly increasing, and
// writer names must be unique; tools and tests use it, the log encodes its
// batches directly.
func EncodeObject(o *Object, compress bool) ([]byte, error) {
	raw := make([]byte, headerSize, 256)
	raw = binary.AppendUvarint(raw, uint64(len(o.Sections)))
	seen := make(map[string]bool, len(o.Sections))
	for _, s := range o.Sections {
		if seen[s.Writer] {
			return nil, fmt.Errorf("dstl: encode: writer %q has two sections", s.Writer)
		}
		seen[s.Writer] = true
		raw = binary.AppendUvarint(raw, uint64(len(s.Writer)))
		raw = append(raw, s.Writer...)
		raw = binary.AppendUvarint(raw, uint64(len(s.Changes)))
		lenAt := len(raw)
		raw = append(raw, 0, 0, 0, 0)
		var prev uint64
		for _, c := range s.Changes {
			if c.Seq <= prev {
				return nil, fmt.Errorf("dstl: encode: writer %q: sequence number %d after %d", s.Writer, c.Seq, prev)
			}
			if c.Op >= opCount {
				return nil, fmt.Errorf("dstl: encode: writer %q: change %d has unknown operation %v", s.Writer, c.Seq, c.Op)
			}
			if len(c.Key)+len(c.Sub)+len(c.Value) > maxChange {
				return nil, fmt.Errorf("dstl: encode: writer %q: change %d is larger than %d bytes", s.Writer, c.Seq, maxChange)
			}
			raw = binary.AppendUvarint(raw, c.Seq-prev)
			prev = c.Seq
			raw = appendChangeTail(raw, c.KeyGroup, c.State, c.Op, c.Key, c.Sub, c.Value)
		}
		binary.LittleEndian.PutUint32(raw[lenAt:], uint32(len(raw)-lenAt-4))
	}
	return sealObject(raw, compress, nil)
}

// DecodeObject decodes and verifies an object. Keys and values in the
// result alias data (or, for a compressed object, the decompressed body).
// Any malformed, truncated or damaged input gives an error matching
// ErrCorrupt; DecodeObject never panics.
func DecodeObject(data []byte) (*Object, error) {
	b, err := decodeBatch(data, nil)
	if err != nil {
		return nil, err
	}
	return b.object(), nil
}

// object expands every change of b.
func (b *Batch) object() *Object {
	o := &Object{Compressed: b.compressed, Sections: make([]Section, len(b.sections))}
	for i := range b.sections {
		bs := &b.sections[i]
		s := Section{Writer: bs.writer, Changes: make([]Change, len(bs.recs))}
		for j := range bs.recs {
			bs.change(&bs.recs[j], &s.Changes[j])
		}
		o.Sections[i] = s
	}
	return o
}

// decodeBatch verifies an object and decodes it into a Batch keeping only
// the sections of the writers keep accepts (all if keep is nil): the
// others are checked but not recorded.
//
// An object is one frame or several laid end to end (a streamed object,
// one frame per batch): each is verified and decoded, and the Batch holds
// the sections of all of them in order, a writer's possibly several.
func decodeBatch(data []byte, keep func(writer string) bool) (*Batch, error) {
	var b *Batch
	var crcs []uint32
	for i := 0; len(data) > 0 || i == 0; i++ {
		frame := nextFrame(data)
		body, version, compressed, err := checkObject(frame)
		if err != nil {
			return nil, frameError(i, err)
		}
		f, err := decodeBody(body, version, keep)
		if err != nil {
			return nil, frameError(i, err)
		}
		if b == nil {
			b = f
		} else {
			b.sections = append(b.sections, f.sections...)
		}
		b.compressed = b.compressed || compressed
		crcs = append(crcs, objectCRC(frame))
		data = data[len(frame):]
	}
	b.crc = framesCRC(crcs)
	return b, nil
}

// nextFrame returns the first frame of data: as many bytes as its header
// says, or all of data if the header is short or damaged (checkObject
// then says why).
func nextFrame(data []byte) []byte {
	if len(data) < headerSize || string(data[:4]) != objectMagic {
		return data
	}
	n := uint64(binary.LittleEndian.Uint32(data[8:])) + headerSize
	if n > uint64(len(data)) {
		return data
	}
	return data[:n]
}

// frameError names the frame of a streamed object an error is in.
func frameError(i int, err error) error {
	if i == 0 {
		return err
	}
	return fmt.Errorf("frame %d: %w", i+1, err)
}

// objectCRC is the checksum an object's header records (CRC-32C of the
// header's first 16 bytes and the stored body): what a Handle records to
// identify the object. data must have passed checkObject, or be sealed.
func objectCRC(data []byte) uint32 { return binary.LittleEndian.Uint32(data[16:headerSize]) }

// checkObject verifies the header and checksum of an object and returns its
// raw (decompressed) body and format version.
func checkObject(data []byte) (body []byte, version byte, compressed bool, err error) {
	if len(data) < headerSize {
		return nil, 0, false, corrupt("%d bytes, shorter than the %d-byte header", len(data), headerSize)
	}
	h := data[:headerSize]
	if string(h[:4]) != objectMagic {
		return nil, 0, false, corrupt("bad magic %q, want %q", h[:4], objectMagic)
	}
	if h[4] != 1 && h[4] != formatVersion {
		return nil, 0, false, corrupt("unsupported format version %d (this reader knows %d)", h[4], formatVersion)
	}
	if h[5]&^flagZstd != 0 || h[6] != 0 || h[7] != 0 {
		return nil, 0, false, corrupt("unknown flags %#02x %#02x %#02x", h[5], h[6], h[7])
	}
	storedLen := binary.LittleEndian.Uint32(h[8:])
	rawLen := binary.LittleEndian.Uint32(h[12:])
	if uint64(len(data)-headerSize) != uint64(storedLen) {
		return nil, 0, false, corrupt("header records a %d-byte body, object has %d (truncated or padded)", storedLen, len(data)-headerSize)
	}
	stored := data[headerSize:]
	if want, got := binary.LittleEndian.Uint32(h[16:]), crc32.Update(crc32.Checksum(h[:16], castagnoli), castagnoli, stored); want != got {
		return nil, 0, false, corrupt("checksum mismatch: header records crc32c %08x, object has %08x", want, got)
	}
	if rawLen > maxBody {
		return nil, 0, false, corrupt("raw body of %d bytes exceeds the %d-byte limit", rawLen, maxBody)
	}
	if h[5]&flagZstd == 0 {
		if rawLen != storedLen {
			return nil, 0, false, corrupt("uncompressed object with raw length %d != stored length %d", rawLen, storedLen)
		}
		return stored, h[4], false, nil
	}
	out, err := zstdDecoder().DecodeAll(stored, make([]byte, 0, rawLen))
	if err != nil {
		return nil, 0, true, corrupt("zstd: %v", err)
	}
	if uint64(len(out)) != uint64(rawLen) {
		return nil, 0, true, corrupt("decompressed body is %d bytes, header records %d", len(out), rawLen)
	}
	return out, h[4], true, nil
}

// reader decodes varints and byte strings from a body, remembering the
// first error.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.err = corrupt("bad varint (%s) at body offset %d", what, r.off)
		return 0
	}
	r.off += n
	return v
}

func (r *reader) u32(what string) uint32 {
	v := r.uvarint(what)
	if v > 1<<32-1 && r.err == nil {
		r.err = corrupt("%s %d at body offset %d does not fit 32 bits", what, v, r.off)
	}
	return uint32(v)
}

func (r *reader) bytes(n uint64, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.err = corrupt("%s of %d bytes at body offset %d runs past the end (%d bytes left)", what, n, r.off, len(r.b)-r.off)
		return nil
	}
	s := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return s
}

// left returns the number of undecoded bytes.
func (r *reader) left() uint64 { return uint64(len(r.b) - r.off) }

// decodeBody decodes a raw body of the given format version, keeping the
// sections of the writers keep accepts (all if keep is nil).
func decodeBody(body []byte, version byte, keep func(writer string) bool) (*Batch, error) {
	r := &reader{b: body}
	n := r.uvarint("writer count")
	if r.err == nil && n > r.left()/2 { // a section takes at least 2 bytes
		return nil, corrupt("writer count %d exceeds what %d bytes can hold", n, r.left())
	}
	o := &Batch{sections: make([]batchSection, 0, n)}
	seen := make(map[string]bool, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		name := string(r.bytes(r.uvarint("writer name length"), "writer name"))
		if r.err == nil && seen[name] {
			return nil, corrupt("writer %q has two sections", name)
		}
		seen[name] = true
		nc := r.uvarint("change count")
		if r.err == nil && nc > r.left()/4 { // a change takes at least 4 bytes
			return nil, corrupt("writer %q: change count %d exceeds what %d bytes can hold", name, nc, r.left())
		}
		wanted := keep == nil || keep(name)
		end := -1 // where the section's changes end, if the format says
		if version >= 2 {
			size := r.bytes(4, "section size")
			if r.err != nil {
				break
			}
			n := uint64(binary.LittleEndian.Uint32(size))
			if n > r.left() {
				return nil, corrupt("writer %q: section of %d bytes runs past the end (%d bytes left)", name, n, r.left())
			}
			end = r.off + int(n)
			if !wanted {
				r.off = end // skipped unparsed: the checksum covered it
				continue
			}
		}
		s := batchSection{writer: name, body: body}
		if wanted {
			s.recs = make([]rec, 0, nc)
		}
		var seq uint64
		for j := uint64(0); j < nc && r.err == nil; j++ {
			d := r.uvarint("sequence delta")
			if r.err == nil && (d == 0 || d > ^uint64(0)-seq) {
				return nil, corrupt("writer %q: sequence delta %d after sequence number %d", name, d, seq)
			}
			seq += d
			c := rec{seq: seq}
			c.kg = r.u32("key group")
			c.state = r.u32("state id")
			kl := r.uvarint("key length")
			var op Op
			if version == 1 {
				op, kl = Op(kl&1), kl>>1 // OpPut or OpDelete
			} else {
				op, kl = Op(kl&7), kl>>3
				if op >= opCount && r.err == nil {
					return nil, corrupt("writer %q: change %d has unknown operation %d", name, seq, op)
				}
			}
			c.key = uint32(r.off)
			key := r.bytes(kl, "key")
			size := len(key)
			if op.hasSub() {
				size += len(r.bytes(r.uvarint("sub key length"), "sub key"))
			}
			if op.hasValue() {
				size += len(r.bytes(r.uvarint("value length"), "value"))
			}
			if size > maxChange && r.err == nil {
				return nil, corrupt("writer %q: change %d is larger than %d bytes", name, seq, maxChange)
			}
			c.keyOp = uint32(kl)<<3 | uint32(op)
			if wanted {
				s.recs = append(s.recs, c)
			}
		}
		if end >= 0 && r.err == nil && r.off != end {
			return nil, corrupt("writer %q: changes end at body offset %d, the section size says %d", name, r.off, end)
		}
		if wanted {
			o.sections = append(o.sections, s)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.off != len(body) {
		return nil, corrupt("%d bytes of garbage after the last section", len(body)-r.off)
	}
	return o, nil
}
