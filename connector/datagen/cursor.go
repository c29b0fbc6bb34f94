package datagen

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/internal/splitmix"
)

// cursor walks the global indexes of one split in increasing order and
// applies the rate limit. Split s generates keys d ≡ s (mod splits); index
// i = k*keys + d is the k-th event of key d.
type cursor struct {
	keys, splits, split int64
	k, d                int64 // the next index is k*keys + d
	n                   int64 // bound on indexes, 0: unbounded

	rate   float64 // events per second of this split, 0: unlimited
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
}

func newCursor(c *config, name string, split int, pos []byte) (*cursor, error) {
	if split < 0 || split >= c.splits {
		return nil, fmt.Errorf("%s: split %d out of range [0, %d)", name, split, c.splits)
	}
	cur := &cursor{
		keys:   int64(c.drivers),
		splits: int64(c.splits),
		split:  int64(split),
		d:      int64(split),
		n:      c.events,
		now:    c.now,
	}
	if pos != nil {
		v, n := binary.Uvarint(pos)
		switch {
		case n <= 0:
			return nil, fmt.Errorf("%s: split %d: invalid position %x: not a varint", name, split, pos)
		case n != len(pos):
			return nil, fmt.Errorf("%s: split %d: invalid position %x: %d trailing bytes", name, split, pos, len(pos)-n)
		case v > math.MaxInt64:
			return nil, fmt.Errorf("%s: split %d: invalid position %x: index %d out of range", name, split, pos, v)
		}
		i := int64(v)
		cur.k, cur.d = i/cur.keys, i%cur.keys
		if cur.d%cur.splits != cur.split {
			return nil, fmt.Errorf("%s: split %d: invalid position %x: index %d belongs to split %d (key %d of %d, %d splits)",
				name, split, pos, i, cur.d%cur.splits, cur.d, cur.keys, cur.splits)
		}
	}
	if c.rate > 0 {
		// This split's share of the keys: d = split, split+splits, ... < keys.
		own := (cur.keys - cur.split + cur.splits - 1) / cur.splits
		cur.rate = c.rate * float64(own) / float64(cur.keys)
		cur.burst = max(1, cur.rate/20) // at most 50ms worth of events at once
		cur.tokens = 1
		cur.last = cur.now()
	}
	return cur, nil
}

// next returns the index of the next event and advances, or says why there is
// none.
func (c *cursor) next() (int64, connector.ReadStatus) {
	i := c.k*c.keys + c.d
	if c.n > 0 && i >= c.n {
		return 0, connector.End
	}
	if c.rate > 0 {
		if c.tokens < 1 {
			now := c.now()
			c.tokens = min(c.burst, c.tokens+now.Sub(c.last).Seconds()*c.rate)
			c.last = now
			if c.tokens < 1 {
				return 0, connector.Idle
			}
		}
		c.tokens--
	}
	c.d += c.splits
	if c.d >= c.keys {
		c.d = c.split
		c.k++
	}
	return i, connector.Record
}

// position encodes the next index of the split.
func (c *cursor) position() []byte {
	return binary.AppendUvarint(nil, uint64(c.k*c.keys+c.d))
}

// hash2 combines a seed, a salt and a value into 64 well-mixed bits.
func hash2(seed, salt, v uint64) uint64 {
	return splitmix.Mix(splitmix.Mix(seed+salt*splitmix.Golden) ^ v)
}

// unit maps 64 random bits to a float64 in [0, 1).
func unit(x uint64) float64 { return float64(x>>11) * 0x1p-53 }

// rng is a small SplitMix64 generator that lives on the stack.
type rng struct{ s uint64 }

func (r *rng) uint64() uint64 { return splitmix.Next(&r.s) }

// intn returns a number in [0, n) (n > 0); the modulo bias is negligible for
// the small n used here.
func (r *rng) intn(n int) int { return int(r.uint64() % uint64(n)) }
