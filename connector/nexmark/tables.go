package nexmark

import (
	"math"
	"math/bits"
	"strconv"
	"sync"
)

// The value lists of the reference generator, kept small so that queries
// find matches even on few events.
var (
	usStates   = [...]string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = [...]string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = [...]string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = [...]string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	hotChannel = [...]string{"Google", "Facebook", "Baidu", "Apple"}
)

const (
	channels      = 10_000       // distinct channels besides the hot ones
	extraPoolSize = 1 << 20      // bytes of the string extras are cut from
	tablesSeed    = 0x4e45584d4b // the seed of the shared tables below
)

// tables holds what the reference computes once per process: full names,
// the hot channels' URLs, the channel cache and the pool of extra strings.
// Unlike the reference's, they come from a fixed seed, so that they are the
// same in every process and for every Seed.
type tables struct {
	names       [len(firstNames) * len(lastNames)]string
	hotURLs     [len(hotChannel)]string
	channelName [channels]string
	channelURL  [channels]string
	extraPool   string // lowercase letters
	// pow10Hi[k] = 10^(k/32) and pow10Lo[k] = 10^(k/32768), for price.
	pow10Hi [32]float64
	pow10Lo [1024]float64
}

var sharedTables = sync.OnceValue(buildTables)

func buildTables() *tables {
	t := new(tables)
	for k := range t.pow10Hi {
		t.pow10Hi[k] = expSeries(float64(k) * (math.Ln10 / 32))
	}
	for k := range t.pow10Lo {
		t.pow10Lo[k] = expSeries(float64(k) * (math.Ln10 / 32768))
	}
	for f, first := range firstNames {
		for l, last := range lastNames {
			t.names[f*len(lastNames)+l] = first + " " + last
		}
	}
	r := rng{s: tablesSeed}
	for i := range t.hotURLs {
		t.hotURLs[i] = string(appendBaseURL(nil, &r))
	}
	for i := range channels {
		t.channelName[i] = "channel-" + strconv.Itoa(i)
		u := appendBaseURL(nil, &r)
		if r.intn(10) > 0 {
			// The reference's id is Math.abs(Integer.reverse(i)) in 32
			// bits; here the absolute value is taken in 64 bits, so
			// channel 1 gets 2147483648, not -2147483648.
			id := int64(int32(bits.Reverse32(uint32(i))))
			if id < 0 {
				id = -id
			}
			u = append(u, "&channel_id="...)
			u = strconv.AppendInt(u, id, 10)
		}
		t.channelURL[i] = string(u)
	}
	pool := make([]byte, extraPoolSize)
	for i := range pool {
		pool[i] = byte('a' + r.intn(26))
	}
	t.extraPool = string(pool)
	return t
}

// appendBaseURL appends a random item URL of the reference's shape.
func appendBaseURL(b []byte, r *rng) []byte {
	b = append(b, "https://www.nexmark.com/"...)
	for range 3 {
		b = appendRandomString(b, r, 5, '_')
		b = append(b, '/')
	}
	return append(b, "item.htm?query=1"...)
}

// appendRandomString appends 3 to maxLen-1 random characters, each a
// lowercase letter or, with probability 1/13, special; a space special is
// trimmed from both ends, as Java's String.trim does in the reference.
func appendRandomString(b []byte, r *rng, maxLen int64, special byte) []byte {
	start := len(b)
	for n := 3 + r.intn(maxLen-3); n > 0; n-- {
		if r.intn(13) == 0 {
			b = append(b, special)
		} else {
			b = append(b, byte('a'+r.intn(26)))
		}
	}
	if special != ' ' {
		return b
	}
	for len(b) > start && b[len(b)-1] == ' ' {
		b = b[:len(b)-1]
	}
	lead := 0
	for start+lead < len(b) && b[start+lead] == ' ' {
		lead++
	}
	if lead > 0 {
		copy(b[start:], b[start+lead:])
		b = b[:len(b)-lead]
	}
	return b
}
