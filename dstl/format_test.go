package dstl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"slices"
	"testing"
)

func sampleObject() *Object {
	return &Object{Sections: []Section{
		{Writer: "distance-0", Changes: []Change{
			{Seq: 1, KeyGroup: 3, State: 1, Key: []byte("car-1"), Value: []byte("12.5")},
			{Seq: 2, KeyGroup: 3, State: 2, Key: []byte("car-1"), Op: OpDelete},
			{Seq: 4, KeyGroup: 3, State: 4, Key: []byte("car-1"), Op: OpPutElem, Sub: []byte("w1"), Value: []byte("8")},
			{Seq: 5, KeyGroup: 3, State: 4, Key: []byte("car-1"), Op: OpDeleteElem, Sub: []byte{}},
			{Seq: 7, KeyGroup: 127, State: 1, Key: []byte{}, Value: []byte{}},
		}},
		{Writer: "distance-1", Changes: []Change{
			{Seq: 1 << 40, KeyGroup: 1<<32 - 1, State: 1<<32 - 1, Key: bytes.Repeat([]byte("k"), 300), Value: bytes.Repeat([]byte("v"), 1000)},
		}},
		{Writer: "empty"},
	}}
}

// normalize makes decoded and encoded objects comparable.
func normalize(o *Object) *Object {
	c := &Object{Compressed: o.Compressed}
	for _, s := range o.Sections {
		ns := Section{Writer: s.Writer}
		for _, ch := range s.Changes {
			ch.Key = append([]byte{}, ch.Key...)
			if ch.Op.hasSub() {
				ch.Sub = append([]byte{}, ch.Sub...)
			} else {
				ch.Sub = nil
			}
			if ch.Op.hasValue() {
				ch.Value = append([]byte{}, ch.Value...)
			} else {
				ch.Value = nil
			}
			ns.Changes = append(ns.Changes, ch)
		}
		c.Sections = append(c.Sections, ns)
	}
	return c
}

func TestObjectRoundTrip(t *testing.T) {
	for _, compress := range []bool{false, true} {
		in := sampleObject()
		data, err := EncodeObject(in, compress)
		if err != nil {
			t.Fatal(err)
		}
		out, err := DecodeObject(data)
		if err != nil {
			t.Fatalf("compress=%v: %v", compress, err)
		}
		if out.Compressed != compress {
			t.Errorf("Compressed = %v, want %v", out.Compressed, compress)
		}
		in.Compressed = compress
		if got, want := normalize(out), normalize(in); !reflect.DeepEqual(got, want) {
			t.Errorf("compress=%v: round trip\n got %+v\nwant %+v", compress, got, want)
		}
	}
}

func TestObjectCompresses(t *testing.T) {
	o := &Object{Sections: []Section{{Writer: "w"}}}
	for i := uint64(1); i <= 1000; i++ {
		o.Sections[0].Changes = append(o.Sections[0].Changes, Change{Seq: i, KeyGroup: 5, State: 1,
			Key: []byte("sensor-000000"), Value: []byte("temperature=21.5;humidity=40")})
	}
	plain, _ := EncodeObject(o, false)
	packed, err := EncodeObject(o, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(packed)*5 > len(plain) {
		t.Errorf("zstd object is %d bytes, plain %d: expected at least 5x smaller", len(packed), len(plain))
	}
	out, err := DecodeObject(packed)
	if err != nil || len(out.Sections[0].Changes) != 1000 {
		t.Fatalf("decode: %v", err)
	}
}

func TestEncodeObjectRejects(t *testing.T) {
	for name, o := range map[string]*Object{
		"zero seq":       {Sections: []Section{{Writer: "w", Changes: []Change{{Seq: 0}}}}},
		"not increasing": {Sections: []Section{{Writer: "w", Changes: []Change{{Seq: 2}, {Seq: 2}}}}},
		"dup writer":     {Sections: []Section{{Writer: "w"}, {Writer: "w"}}},
	} {
		if _, err := EncodeObject(o, false); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestDecodeDetectsDamage flips every bit and truncates at every length of
// small objects: each must fail with ErrCorrupt (the checksum covers header
// and body), never panic.
func TestDecodeDetectsDamage(t *testing.T) {
	for _, compress := range []bool{false, true} {
		data, err := EncodeObject(&Object{Sections: []Section{{Writer: "w", Changes: []Change{
			{Seq: 1, KeyGroup: 1, State: 1, Key: []byte("a"), Value: []byte("b")},
			{Seq: 2, KeyGroup: 1, State: 1, Key: []byte("c"), Op: OpDelete},
			{Seq: 3, KeyGroup: 1, State: 1, Key: []byte("c"), Op: OpPutElem, Sub: []byte("s"), Value: []byte("d")},
		}}}}, compress)
		if err != nil {
			t.Fatal(err)
		}
		for i := range data {
			for bit := 0; bit < 8; bit++ {
				d := bytes.Clone(data)
				d[i] ^= 1 << bit
				if _, err := DecodeObject(d); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("compress=%v: flip byte %d bit %d: err = %v, want ErrCorrupt", compress, i, bit, err)
				}
			}
		}
		for n := 0; n < len(data); n++ {
			if _, err := DecodeObject(data[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated to %d: err = %v", n, err)
			}
		}
		if _, err := DecodeObject(append(bytes.Clone(data), 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("padded: err = %v", err)
		}
	}
}

// TestDecodeBodyRejects checks the body decoder on bodies with a valid
// checksum but invalid contents.
func TestDecodeBodyRejects(t *testing.T) {
	for name, body := range map[string][]byte{
		"huge writer count": {0xff, 0xff, 0xff, 0xff, 0x0f},
		"zero delta":        {1, 1, 'w', 1, 0, 1, 1, 2, 'k'},
		"kg overflow":       {1, 1, 'w', 1, 1, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 1},
		"key past end":      {1, 1, 'w', 1, 1, 1, 1, 20, 'k'},
		"garbage after":     {0, 0},
		"dup writer":        {2, 1, 'w', 0, 1, 'w', 0},
		"empty":             {},
	} {
		raw := append(make([]byte, headerSize), body...)
		data, err := sealObject(raw, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeObject(data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
}

// FuzzDecodeObject feeds arbitrary bytes to DecodeObject, and (to get past
// the checksum) to the body decoder and to DecodeObject of the bytes
// wrapped in a valid header. Nothing may panic; whatever decodes must
// re-encode to an object that decodes to the same changes.
func FuzzDecodeObject(f *testing.F) {
	for _, compress := range []bool{false, true} {
		data, _ := EncodeObject(sampleObject(), compress)
		f.Add(data)
		f.Add(data[headerSize:])
		f.Add(append(slices.Clone(data), data...)) // two frames, as a stream uploads
	}
	f.Add([]byte{})
	f.Add([]byte("DSTL\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(o *Object) {
			writers := map[string]bool{}
			for _, s := range o.Sections {
				if writers[s.Writer] {
					// Several frames with one writer: as one frame the
					// object would not be well formed.
					return
				}
				writers[s.Writer] = true
			}
			re, err := EncodeObject(o, false)
			if err != nil {
				t.Fatalf("decoded object does not re-encode: %v", err)
			}
			o2, err := DecodeObject(re)
			if err != nil {
				t.Fatalf("re-encoded object does not decode: %v", err)
			}
			o2.Compressed = o.Compressed
			if !reflect.DeepEqual(normalize(o), normalize(o2)) {
				t.Fatalf("re-encoding changed the object")
			}
		}
		if o, err := DecodeObject(data); err == nil {
			check(o)
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error does not match ErrCorrupt: %v", err)
		}
		for _, version := range []byte{1, formatVersion} {
			if b, err := decodeBody(data, version, nil); err == nil {
				check(b.object())
			}
		}
		// data as a zstd frame behind a valid header: exercises the
		// decompressor on garbage.
		if o, err := DecodeObject(frame(data, uint32(min(4*len(data)+64, 1<<20)))); err == nil {
			check(o)
		}
		for _, compress := range []bool{false, true} {
			raw := append(make([]byte, headerSize, headerSize+len(data)), data...)
			sealed, err := sealObject(raw, compress, nil)
			if err != nil {
				continue
			}
			if o, err := DecodeObject(sealed); err == nil {
				check(o)
			}
		}
	})
}

// frame wraps stored in a valid header that says it is a zstd frame of a
// rawLen-byte body.
func frame(stored []byte, rawLen uint32) []byte {
	h := make([]byte, headerSize, headerSize+len(stored))
	copy(h, objectMagic)
	h[4], h[5] = formatVersion, flagZstd
	binary.LittleEndian.PutUint32(h[8:], uint32(len(stored)))
	binary.LittleEndian.PutUint32(h[12:], rawLen)
	binary.LittleEndian.PutUint32(h[16:], crc32.Update(crc32.Checksum(h[:16], castagnoli), castagnoli, stored))
	return append(h, stored...)
}

// TestDecodeVersion1 reads an object in the first format version, whose
// changes had (len(key)<<1 | delete) in place of the operation.
func TestDecodeVersion1(t *testing.T) {
	raw := make([]byte, headerSize)
	raw = binary.AppendUvarint(raw, 1) // one writer
	raw = binary.AppendUvarint(raw, 1)
	raw = append(raw, 'w')
	raw = binary.AppendUvarint(raw, 2) // two changes
	raw = append(raw, 1, 5, 9, 2<<1, 'k', '1', 2, 'v', '1')
	raw = append(raw, 1, 5, 9, 2<<1|1, 'k', '2')
	obj, err := sealObject(raw, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	obj[4] = 1
	crc := crc32.Update(crc32.Checksum(obj[:16], castagnoli), castagnoli, obj[headerSize:])
	binary.LittleEndian.PutUint32(obj[16:], crc)
	o, err := DecodeObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Seq: 1, KeyGroup: 5, State: 9, Op: OpPut, Key: []byte("k1"), Value: []byte("v1")},
		{Seq: 2, KeyGroup: 5, State: 9, Op: OpDelete, Key: []byte("k2")},
	}
	if got := o.Sections[0].Changes; !reflect.DeepEqual(got, want) {
		t.Errorf("changes %+v, want %+v", got, want)
	}
	obj[4] = 3
	binary.LittleEndian.PutUint32(obj[16:], crc32.Update(crc32.Checksum(obj[:16], castagnoli), castagnoli, obj[headerSize:]))
	if _, err := DecodeObject(obj); !errors.Is(err, ErrCorrupt) {
		t.Errorf("version 3: err = %v, want ErrCorrupt", err)
	}
}
