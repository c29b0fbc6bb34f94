package nexmark

import (
	"math/bits"

	"github.com/eddyflow/eddy/internal/splitmix"
)

// rng is a SplitMix64 generator that lives on the stack. Every event has
// its own, seeded from (seed, event index) by eventRNG, which is what makes
// an event's content independent of the events before it.
type rng struct{ s uint64 }

func eventRNG(seed uint64, i int64) rng {
	return rng{s: splitmix.Mix(splitmix.Mix(seed^0x6e65786d61726b) + uint64(i)*splitmix.Golden)}
}

func (r *rng) uint64() uint64 { return splitmix.Next(&r.s) }

// intn returns a number in [0, n) for n > 0 (Lemire's multiply-shift: the
// bias, at most n/2^64, is far below anything a test could see).
func (r *rng) intn(n int64) int64 {
	hi, _ := bits.Mul64(r.uint64(), uint64(n))
	return int64(hi)
}

// float returns a number in [0, 1) with 53 random bits.
func (r *rng) float() float64 { return float64(r.uint64()>>11) * 0x1p-53 }
