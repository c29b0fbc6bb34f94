package serde

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/eddyflow/eddy/internal/race"
)

// Types of the maps given to RegisterMap here.
type (
	mapWin struct {
		End int64 `proto:"1"`
		Acc int64 `proto:"2"`
	}
	mapRich struct {
		S   string           `proto:"1"`
		R   []int64          `proto:"2"`
		In  *mapWin          `proto:"3"`
		T   time.Time        `proto:"4"`
		M   map[int32]mapWin `proto:"5"`
		Raw []byte           `proto:"6"`
	}
	// mapNode reaches maps of its own type: decoding an entry's value
	// decodes entries of the same map type.
	mapNode struct {
		N    int32             `proto:"1"`
		Kids map[int64]mapNode `proto:"2"`
	}
	mapRegion string
)

// reflectTwin returns a copy of the plan m whose own map fields run on the
// reflect code.
func reflectTwin(m *message) *message {
	tw := *m
	tw.fields = slices.Clone(m.fields)
	for i := range tw.fields {
		if tw.fields[i].card == cMap {
			tw.fields[i].mapOps = &reflectMapOps
		}
	}
	tw.index()
	tw.buildProg()
	return &tw
}

// registered returns the plan of map[K]V after RegisterMap[K, V] and its
// reflect twin.
func registered[K comparable, V any](t testing.TB) (typed, twin *message) {
	RegisterMap[K, V]()
	m, err := planFor(reflect.TypeFor[map[K]V]())
	if err != nil {
		t.Fatal(err)
	}
	if m.fields[0].mapOps == &reflectMapOps {
		t.Fatalf("map[%s]%s runs on the reflect code after RegisterMap", reflect.TypeFor[K](), reflect.TypeFor[V]())
	}
	return m, reflectTwin(m)
}

// checkRegisteredMap encodes random maps with the code RegisterMap
// instantiates and with the reflect code, and demands the same bytes, sizes,
// errors and decoded maps.
func checkRegisteredMap[K comparable, V any](t *testing.T, gen func(r *rand.Rand) map[K]V) {
	t.Helper()
	typed, twin := registered[K, V](t)
	r := rand.New(rand.NewPCG(1, 2))
	var reused map[K]V
	for i := range 500 {
		var v map[K]V
		switch i % 10 {
		case 0: // nil
		case 1:
			v = map[K]V{}
		default:
			v = gen(r)
		}
		got, err := appendTop(nil, typed, unsafe.Pointer(&v))
		want, werr := appendTop(nil, twin, unsafe.Pointer(&v))
		if fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Fatalf("map %d: error %v, the reflect code's %v", i, err, werr)
		}
		if err != nil {
			continue
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("map %d: bytes differ from the reflect code's:\n% x\n% x", i, got, want)
		}
		if n, wn := sizeMessage(typed, unsafe.Pointer(&v), 0), sizeMessage(twin, unsafe.Pointer(&v), 0); n != len(got) || wn != len(got) {
			t.Fatalf("map %d: size %d, reflect %d, encoded %d", i, n, wn, len(got))
		}
		var a, b map[K]V
		if err := decodeTop(got, typed, unsafe.Pointer(&a)); err != nil {
			t.Fatalf("map %d: decode: %v", i, err)
		}
		if err := decodeTop(got, twin, unsafe.Pointer(&b)); err != nil {
			t.Fatalf("map %d: reflect decode: %v", i, err)
		}
		if !reflect.DeepEqual(a, b) || len(a) != len(v) {
			t.Fatalf("map %d: decoded %v, the reflect code %v", i, a, b)
		}
		// Decoding into a used map leaves the same map as into a fresh one.
		if err := decodeTop(got, typed, unsafe.Pointer(&reused)); err != nil {
			t.Fatalf("map %d: decode into a used map: %v", i, err)
		}
		if len(reused) != len(a) || len(a) > 0 && !reflect.DeepEqual(reused, a) {
			t.Fatalf("map %d: decoded into a used map %v, want %v", i, reused, a)
		}
		again, err := appendTop(nil, typed, unsafe.Pointer(&a))
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("map %d: the decoded map encodes to other bytes (%v)", i, err)
		}
	}
}

func randWin(r *rand.Rand) mapWin {
	switch r.IntN(4) {
	case 0:
		return mapWin{}
	case 1:
		return mapWin{End: -r.Int64()}
	}
	return mapWin{End: r.Int64N(1 << 40), Acc: r.Int64() - 1<<62}
}

func randString(r *rand.Rand) string {
	const chars = "abcé\x00z"
	var sb strings.Builder
	for range r.IntN(6) {
		sb.WriteString(string([]rune(chars)[r.IntN(6)]))
	}
	return sb.String()
}

func randRich(r *rand.Rand) mapRich {
	var x mapRich
	if r.IntN(2) == 0 {
		return x
	}
	x.S = randString(r)
	for range r.IntN(3) {
		x.R = append(x.R, r.Int64N(300)-100)
	}
	if r.IntN(2) == 0 {
		w := randWin(r)
		x.In = &w
	}
	if r.IntN(2) == 0 {
		x.T = time.Unix(r.Int64N(1<<33)-1<<32, r.Int64N(1e9)).UTC()
	}
	if n := r.IntN(4); n > 0 {
		x.M = map[int32]mapWin{}
		for range n {
			x.M[r.Int32N(20)-10] = randWin(r)
		}
	}
	if r.IntN(3) == 0 {
		x.Raw = []byte(randString(r))
	}
	return x
}

func randNode(r *rand.Rand, depth int) mapNode {
	n := mapNode{N: r.Int32N(5)}
	if depth < 3 {
		for range r.IntN(3) {
			if n.Kids == nil {
				n.Kids = map[int64]mapNode{}
			}
			n.Kids[r.Int64N(7)-3] = randNode(r, depth+1)
		}
	}
	return n
}

// randMap fills a map of up to 20 entries with keys from key.
func randMap[K comparable, V any](r *rand.Rand, key func(*rand.Rand) K, val func(*rand.Rand) V) map[K]V {
	m := map[K]V{}
	for range 1 + r.IntN(20) {
		m[key(r)] = val(r)
	}
	return m
}

func TestRegisteredMapMatchesReflect(t *testing.T) {
	RegisterMap[int32, mapWin]() // mapRich.M
	t.Run("int64-struct", func(t *testing.T) {
		checkRegisteredMap(t, func(r *rand.Rand) map[int64]mapWin {
			return randMap(r, func(r *rand.Rand) int64 {
				if r.IntN(2) == 0 {
					return r.Int64N(20) - 10
				}
				return r.Int64() - 1<<62
			}, randWin)
		})
	})
	t.Run("string-struct", func(t *testing.T) {
		checkRegisteredMap(t, func(r *rand.Rand) map[string]mapRich { return randMap(r, randString, randRich) })
	})
	t.Run("named-string-pointer", func(t *testing.T) {
		checkRegisteredMap(t, func(r *rand.Rand) map[mapRegion]*mapRich {
			return randMap(r, func(r *rand.Rand) mapRegion { return mapRegion(randString(r)) }, func(r *rand.Rand) *mapRich {
				if r.IntN(4) == 0 {
					return nil // written as an empty message
				}
				x := randRich(r)
				return &x
			})
		})
	})
	t.Run("bool-struct", func(t *testing.T) {
		checkRegisteredMap(t, func(r *rand.Rand) map[bool]mapWin {
			return randMap(r, func(r *rand.Rand) bool { return r.IntN(2) == 0 }, randWin)
		})
	})
	t.Run("int8-struct", func(t *testing.T) {
		checkRegisteredMap(t, func(r *rand.Rand) map[int8]mapWin {
			return randMap(r, func(r *rand.Rand) int8 { return int8(r.IntN(256)) }, randWin)
		})
	})
	t.Run("uint16-time", func(t *testing.T) {
		checkRegisteredMap(t, func(r *rand.Rand) map[uint16]time.Time {
			return randMap(r, func(r *rand.Rand) uint16 { return uint16(r.IntN(1 << 16)) }, func(r *rand.Rand) time.Time {
				if r.IntN(3) == 0 {
					return time.Time{}
				}
				return time.Unix(r.Int64N(1<<33)-1<<32, r.Int64N(1e9)).UTC()
			})
		})
	})
	t.Run("uint-duration", func(t *testing.T) {
		checkRegisteredMap(t, func(r *rand.Rand) map[uint]time.Duration {
			return randMap(r, func(r *rand.Rand) uint { return uint(r.Uint64()) }, func(r *rand.Rand) time.Duration {
				return time.Duration(r.Int64N(1<<40) - 1<<39)
			})
		})
	})
	t.Run("recursive", func(t *testing.T) {
		checkRegisteredMap(t, func(r *rand.Rand) map[int64]mapNode {
			return randMap(r, func(r *rand.Rand) int64 { return r.Int64N(9) - 4 }, func(r *rand.Rand) mapNode { return randNode(r, 0) })
		})
	})
	t.Run("invalid-utf8", func(t *testing.T) {
		checkRegisteredMap(t, func(r *rand.Rand) map[string]mapRich {
			m := randMap(r, randString, randRich)
			if r.IntN(2) == 0 {
				m["\xff"] = mapRich{}
			} else {
				m["ok"] = mapRich{S: "bad \xc3"}
			}
			return m
		})
	})
}

// TestRegisteredMapAllocations: encoding and sizing a registered map of
// structs allocates nothing once warm.
func TestRegisteredMapAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts differ under the race detector")
	}
	typed, _ := registered[int64, mapWin](t)
	v := map[int64]mapWin{}
	for i := range 7 {
		v[int64(i*10-30)] = mapWin{End: int64(i), Acc: 1 << 40}
	}
	buf := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(100, func() {
		_ = sizeMessage(typed, unsafe.Pointer(&v), 0)
		_, _ = appendTop(buf[:0], typed, unsafe.Pointer(&v))
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per size and append", allocs)
	}
}

// FuzzRegisteredMap decodes arbitrary bytes as registered maps with the
// typed and the reflect code, which must agree on the error or the map.
func FuzzRegisteredMap(f *testing.F) {
	rich, richTwin := registered[string, mapRich](f)
	node, nodeTwin := registered[int64, mapNode](f)
	r := rand.New(rand.NewPCG(3, 4))
	for range 4 {
		v := randMap(r, randString, randRich)
		b, _ := appendTop(nil, rich, unsafe.Pointer(&v))
		f.Add(b)
		n := randMap(r, func(r *rand.Rand) int64 { return r.Int64N(9) - 4 }, func(r *rand.Rand) mapNode { return randNode(r, 0) })
		b, _ = appendTop(nil, node, unsafe.Pointer(&n))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		agree[string, mapRich](t, in, rich, richTwin)
		agree[int64, mapNode](t, in, node, nodeTwin)
	})
}

func agree[K comparable, V any](t *testing.T, in []byte, typed, twin *message) {
	var a, b map[K]V
	err := decodeTop(in, typed, unsafe.Pointer(&a))
	werr := decodeTop(in, twin, unsafe.Pointer(&b))
	if fmt.Sprint(err) != fmt.Sprint(werr) {
		t.Fatalf("error %v, the reflect code's %v", err, werr)
	}
	if err == nil && !reflect.DeepEqual(a, b) {
		t.Fatalf("decoded %v, the reflect code %v", a, b)
	}
}

// TestStringMapKeyOrder checks the order of map[string]string entries on
// the wire against Go's string order, on keys made to defeat the comparison
// by the first 8 bytes (keyWord): shared 8-byte prefixes, keys that are
// prefixes of others, trailing and inner NULs, bytes above 0x7f, and maps
// of every size up to past the 16 entries sorted on the stack.
func TestStringMapKeyOrder(t *testing.T) {
	type M struct {
		M map[string]string `proto:"1"`
	}
	c, err := For[M]()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	parts := []string{"", "\x00", "a", "ab", "abcdefgh", "abcdefgh\x00", "abcdefghi", "\x7f", "é", "ÿ", "zzzzzzzz", "prefix-0", "prefix-01"}
	for round := range 2000 {
		v := M{M: map[string]string{}}
		for range round % 24 {
			k := parts[r.IntN(len(parts))] + parts[r.IntN(len(parts))]
			v.M[k] = parts[r.IntN(len(parts))]
		}
		for _, size := range []int{0, 1 << 10} { // appendFast's room or none
			b, err := c.Append(make([]byte, 0, size), &v)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for len(b) > 0 {
				_, _, n := protowire.ConsumeTag(b)
				entry, m := protowire.ConsumeBytes(b[n:])
				if n < 0 || m < 0 {
					t.Fatalf("round %d: malformed output", round)
				}
				b = b[n+m:]
				_, _, n = protowire.ConsumeTag(entry)
				key, _ := protowire.ConsumeBytes(entry[n:])
				got = append(got, string(key))
			}
			want := slices.Sorted(maps.Keys(v.M))
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: keys written in order\n%q\nwant\n%q", round, got, want)
			}
		}
	}
}
