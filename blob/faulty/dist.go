package faulty

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Distribution is a latency distribution. Sample draws one latency using r
// (and no other source of randomness, so a seeded r gives a reproducible
// sequence). A Store calls Sample with its lock held, so a Distribution
// used by a single Store need not be safe for concurrent use.
type Distribution interface {
	Sample(r *rand.Rand) time.Duration
}

// Fixed returns the distribution that is always d. It draws nothing from r.
func Fixed(d time.Duration) Distribution { return fixed(d) }

type fixed time.Duration

func (f fixed) Sample(*rand.Rand) time.Duration { return time.Duration(f) }

func (f fixed) String() string { return fmt.Sprintf("Fixed(%v)", time.Duration(f)) }

// Quantiles of the standard normal and the tail probabilities used by
// LongTail.
const (
	z99      = 2.3263478740408408 // Φ⁻¹(0.99)
	tailProb = 0.01               // P(X > p99): where the Pareto tail starts
	capRatio = 10                 // samples are truncated at capRatio × p999
)

// LongTail returns a latency distribution whose median is p50, whose 99th
// percentile is p99 and whose 99.9th percentile is p999: the body a
// log-normal, the top 1% a Pareto tail. It panics unless
// 0 < p50 <= p99 <= p999.
//
// Sample draws u uniformly from [0, 1) and returns the inverse of this CDF
// at u:
//
//   - For u <= 0.99, the log-normal quantile p50·exp(σ·Φ⁻¹(u)) with
//     σ = ln(p99/p50) / Φ⁻¹(0.99), so the median is exactly p50 and the
//     0.99 quantile exactly p99.
//   - For u > 0.99, the Pareto quantile p99·(0.01/(1−u))^(1/α) with
//     α = ln 10 / ln(p999/p99): it starts at p99 (the CDF is continuous)
//     and reaches p999 at u = 0.999. A small α (p999 ≫ p99) is a heavy
//     tail; ObjectStore has α ≈ 0.85, a tail with an infinite mean.
//
// To keep totals and averages finite the tail is truncated at 10·p999 (a
// client timeout): samples beyond it are returned as 10·p999. This affects
// only the top 0.1%·10^(−α) of samples (about 0.014% for ObjectStore), so
// p50, p99 and p999 are exact by construction; a sample of n latencies
// reproduces them up to sampling error: a few percent for p50 and p99 at
// n = 100 000, and about ±(10/α)% for p999 (±12% for ObjectStore), since
// only about 100 of the samples lie above it.
//
// Sample draws exactly one Float64 from r.
func LongTail(p50, p99, p999 time.Duration) Distribution {
	if !(0 < p50 && p50 <= p99 && p99 <= p999) {
		panic(fmt.Sprintf("faulty.LongTail(%v, %v, %v): want 0 < p50 <= p99 <= p999", p50, p99, p999))
	}
	return &longTail{
		p50:   float64(p50),
		p99:   float64(p99),
		sigma: math.Log(float64(p99)/float64(p50)) / z99,
		k:     math.Log(float64(p999)/float64(p99)) / math.Ln10,
		max:   capRatio * float64(p999),
		args:  [3]time.Duration{p50, p99, p999},
	}
}

type longTail struct {
	p50, p99 float64 // nanoseconds
	sigma    float64 // log-normal shape
	k        float64 // 1/α of the Pareto tail
	max      float64 // truncation point, nanoseconds
	args     [3]time.Duration
}

func (d *longTail) Sample(r *rand.Rand) time.Duration {
	return d.quantile(r.Float64())
}

// quantile is the inverse CDF described at LongTail.
func (d *longTail) quantile(u float64) time.Duration {
	var x float64
	if u <= 1-tailProb {
		z := math.Sqrt2 * math.Erfinv(2*u-1) // Φ⁻¹(u); -Inf at u = 0
		x = d.p50 * math.Exp(d.sigma*z)
	} else {
		x = d.p99 * math.Pow(tailProb/(1-u), d.k)
	}
	if !(x <= d.max) { // also catches NaN and +Inf
		x = d.max
	}
	return time.Duration(x)
}

func (d *longTail) String() string {
	return fmt.Sprintf("LongTail(%v, %v, %v)", d.args[0], d.args[1], d.args[2])
}

// ObjectStore returns LongTail(20ms, 200ms, 3s), a rough model of the
// latency of a PUT to a cloud object store such as S3: tens of
// milliseconds typically, hundreds at the 99th percentile and seconds for
// the worst requests.
func ObjectStore() Distribution {
	return LongTail(20*time.Millisecond, 200*time.Millisecond, 3*time.Second)
}
