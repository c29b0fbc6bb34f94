package runtime

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/eddyflow/eddy/serde"
)

type namedKey int64

// checkKeyCodec: the key encoder writes what serde writes for every value,
// and the decoder gives the value back.
func checkKeyCodec[K comparable](t *testing.T, vals []K) {
	t.Helper()
	enc, err := KeyEncoder[K]()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := KeyDecoder[K]()
	if err != nil {
		t.Fatal(err)
	}
	codec := serde.MustFor[K]()
	if _, _, ok := intKeyCodec[K](codec); !ok {
		t.Fatalf("%T: no integer fast path", vals[0])
	}
	for _, v := range vals {
		want, err := codec.Append(nil, &v)
		if err != nil {
			t.Fatal(err)
		}
		got := enc([]byte("prefix"), &v)
		if string(got) != "prefix"+string(want) {
			t.Fatalf("%T %v: encoded %x, serde %x", v, v, got[6:], want)
		}
		var back K
		if err := dec(want, &back); err != nil || back != v {
			t.Fatalf("%T %v: decoded %v, %v", v, v, back, err)
		}
	}
}

func TestIntKeyCodecMatchesSerde(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var i64 []int64
	var i32 []int32
	var u64 []uint64
	var u32 []uint32
	var named []namedKey
	for _, v := range []uint64{0, 1, 127, 128, 1<<31 - 1, 1 << 31, math.MaxUint32, math.MaxInt64, 1 << 63, math.MaxUint64} {
		i64, i32, u64, u32, named = append(i64, int64(v)), append(i32, int32(v)), append(u64, v), append(u32, uint32(v)), append(named, namedKey(v))
	}
	for range 1000 {
		v := r.Uint64() >> r.IntN(64)
		i64, i32, u64, u32, named = append(i64, int64(v), -int64(v)), append(i32, int32(v), -int32(v)), append(u64, v), append(u32, uint32(v)), append(named, namedKey(v))
	}
	checkKeyCodec(t, i64)
	checkKeyCodec(t, i32)
	checkKeyCodec(t, u64)
	checkKeyCodec(t, u32)
	checkKeyCodec(t, named)
	checkKeyCodec(t, []int{0, 1, -1, math.MaxInt, math.MinInt})
}

// fixedCodec writes an int64 as a fixed64 field: not what the fast path
// writes.
type fixedCodec struct{}

func (fixedCodec) Append(dst []byte, v *int64) ([]byte, error) {
	return binary.LittleEndian.AppendUint64(append(dst, 0x09), uint64(*v)), nil
}
func (fixedCodec) Decode(src []byte, v *int64) error {
	*v = int64(binary.LittleEndian.Uint64(src[1:]))
	return nil
}
func (fixedCodec) Size(*int64) int { return 9 }

// TestIntKeyCodecFallsBack: a codec that writes integers otherwise (a
// custom one) keeps its bytes: no fast path.
func TestIntKeyCodecFallsBack(t *testing.T) {
	if _, _, ok := intKeyCodec[int64](fixedCodec{}); ok {
		t.Fatal("fast path for a codec that writes fixed64")
	}
	if _, _, ok := intKeyCodec[bool](serde.MustFor[bool]()); ok {
		t.Fatal("fast path for bool")
	}
}

func TestIntKeyDecoderFallsBackOnOtherBytes(t *testing.T) {
	_, dec, ok := intKeyCodec[int64](serde.MustFor[int64]())
	if !ok {
		t.Fatal("no fast path for int64")
	}
	// Field 1 twice: protobuf's last one wins, which serde decodes.
	var k int64
	if err := dec([]byte{0x08, 0x01, 0x08, 0x05}, &k); err != nil || k != 5 {
		t.Fatalf("decoded %d, %v; want 5", k, err)
	}
}
