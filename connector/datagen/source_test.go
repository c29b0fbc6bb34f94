package datagen

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy/internal/race"

	"github.com/eddyflow/eddy"
)

var ctx = context.Background()

// readAll reads every split of src to the end, one after the other.
func readAll[T any](t *testing.T, src eddy.Source[T]) [][]T {
	t.Helper()
	out := make([][]T, src.Splits())
	for s := range out {
		r, err := src.OpenSplit(ctx, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		for {
			var rec T
			st, err := r.Next(&rec)
			if err != nil {
				t.Fatal(err)
			}
			if st == eddy.End {
				break
			}
			if st != eddy.Record {
				t.Fatalf("split %d: status %v without a rate limit", s, st)
			}
			out[s] = append(out[s], rec)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// gpsIndex recovers the global index of a GPS point from its timestamp.
func gpsIndex(p GPSPoint) int64 { return int64(p.Timestamp.Sub(DefaultStartTime) / EventInterval) }

func TestGPSMatchesReferenceAndSplitsByDriver(t *testing.T) {
	opts := []Option{Seed(7), Events(10_007), Drivers(37), Splits(5)}
	src := GPS(opts...)
	if src.Name() != "datagen-gps" || src.Splits() != 5 {
		t.Fatalf("name %q, %d splits", src.Name(), src.Splits())
	}
	splitOf := map[string]int{}
	seen := make([]bool, 10_007)
	for s, recs := range readAll(t, src) {
		last := int64(-1)
		for _, p := range recs {
			i := gpsIndex(p)
			if i <= last {
				t.Fatalf("split %d: index %d after %d", s, i, last)
			}
			last = i
			if seen[i] {
				t.Fatalf("index %d twice", i)
			}
			seen[i] = true
			if want := GPSEvent(i, opts...); p != want {
				t.Fatalf("event %d: %+v, want %+v", i, p, want)
			}
			var d int
			if _, err := fmt.Sscanf(p.DriverID, "driver-%05d", &d); err != nil || d != int(i%37) || d%5 != s {
				t.Fatalf("event %d of split %d: driver %q", i, s, p.DriverID)
			}
			if prev, ok := splitOf[p.DriverID]; ok && prev != s {
				t.Fatalf("driver %s in splits %d and %d", p.DriverID, prev, s)
			}
			splitOf[p.DriverID] = s
		}
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("index %d missing", i)
		}
	}
	if len(splitOf) != 37 {
		t.Fatalf("%d drivers, want 37", len(splitOf))
	}
}

func TestDeterministicForSeed(t *testing.T) {
	a := readAll(t, GPS(Seed(3), Events(2000), Drivers(50)))
	b := readAll(t, GPS(Seed(3), Events(2000), Drivers(50)))
	c := readAll(t, GPS(Seed(4), Events(2000), Drivers(50)))
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different events")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds, same events")
	}
	oa := readAll(t, Orders(Seed(3), Events(500), Drivers(20)))
	ob := readAll(t, Orders(Seed(3), Events(500), Drivers(20)))
	if !reflect.DeepEqual(oa, ob) {
		t.Fatal("orders: same seed, different events")
	}
}

// TestInterleavedAndResumed reads splits in a random interleaving, closing
// readers and reopening them from their saved Position at random points, and
// checks that every split yields exactly the events of an uninterrupted pass.
func TestInterleavedAndResumed(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		opts := []Option{Seed(seed), Events(5_000), Drivers(23), Splits(4)}
		want := readAll(t, GPS(opts...))
		src := GPS(opts...) // a fresh source: nothing shared with the first pass
		rnd := rand.New(rand.NewPCG(seed, 99))
		got := make([][]GPSPoint, src.Splits())
		readers := make([]eddy.SplitReader[GPSPoint], src.Splits())
		done := make([]bool, src.Splits())
		for s := range readers {
			r, err := src.OpenSplit(ctx, s, nil)
			if err != nil {
				t.Fatal(err)
			}
			readers[s] = r
		}
		for left := len(readers); left > 0; {
			s := rnd.IntN(len(readers))
			if done[s] {
				continue
			}
			if rnd.IntN(50) == 0 { // "crash" and restore from the position
				pos := readers[s].Position()
				readers[s].Close()
				r, err := src.OpenSplit(ctx, s, pos)
				if err != nil {
					t.Fatal(err)
				}
				readers[s] = r
			}
			var p GPSPoint
			st, err := readers[s].Next(&p)
			if err != nil {
				t.Fatal(err)
			}
			if st == eddy.End {
				done[s] = true
				left--
				continue
			}
			got[s] = append(got[s], p)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: interleaved, resumed reading differs from one pass", seed)
		}
	}
}

func TestOrdersResumeAndReference(t *testing.T) {
	opts := []Option{Seed(11), Events(1_000), Drivers(10), Splits(3)}
	src := Orders(opts...)
	if src.Name() != "datagen-orders" {
		t.Fatal(src.Name())
	}
	ids := map[string]bool{}
	n := 0
	for s := range src.Splits() {
		r, _ := src.OpenSplit(ctx, s, nil)
		var o OrderCreatedEvent // reused across records and reopenings
		for k := 0; ; k++ {
			if k%7 == 3 {
				pos := r.Position()
				r.Close()
				var err error
				if r, err = src.OpenSplit(ctx, s, pos); err != nil {
					t.Fatal(err)
				}
			}
			st, err := r.Next(&o)
			if err != nil {
				t.Fatal(err)
			}
			if st == eddy.End {
				break
			}
			n++
			i := (o.CreatedAt - DefaultStartTime.UnixMilli()) / 10
			if want := OrderEvent(i, opts...); !reflect.DeepEqual(o, want) {
				t.Fatalf("order %d: %+v\nwant %+v", i, o, want)
			}
			if want := fmt.Sprintf("cus-%010d", i%10); o.CustomerID != want || int(i%10)%3 != s {
				t.Fatalf("order %d of split %d: customer %s", i, s, o.CustomerID)
			}
			if ids[o.OrderID] {
				t.Fatalf("order ID %s twice", o.OrderID)
			}
			ids[o.OrderID] = true
			var sum int64
			for _, it := range o.Items {
				sum += it.LineTotal.AmountMinor
			}
			if len(o.Items) != 12 || sum != o.Total.AmountMinor || len(o.Metadata.Tags) != 3 ||
				!strings.HasPrefix(o.Metadata.Tags["promo"], "WINTER") || len(o.Items[0].SKU) != 10 {
				t.Fatalf("order shape: %+v", o)
			}
		}
	}
	if n != 1000 {
		t.Fatalf("%d orders, want 1000", n)
	}
}

func TestEventsBound(t *testing.T) {
	for _, tc := range []struct {
		events        int64
		drivers, spl  int
		wantSplits    int
		wantPerSplits []int
	}{
		{events: 10, drivers: 4, spl: 2, wantSplits: 2, wantPerSplits: []int{5, 5}},
		{events: 11, drivers: 4, spl: 3, wantSplits: 3, wantPerSplits: []int{5, 3, 3}},
		{events: 3, drivers: 100, spl: 8, wantSplits: 8, wantPerSplits: []int{1, 1, 1, 0, 0, 0, 0, 0}},
		{events: 5, drivers: 2, spl: 8, wantSplits: 2, wantPerSplits: []int{3, 2}}, // capped at drivers
	} {
		src := GPS(Events(tc.events), Drivers(tc.drivers), Splits(tc.spl))
		var counts []int
		for _, recs := range readAll(t, src) {
			counts = append(counts, len(recs))
		}
		if !reflect.DeepEqual(counts, tc.wantPerSplits) {
			t.Errorf("%+v: per split %v", tc, counts)
		}
		// A split at its end stays there after a restore.
		for s := range src.Splits() {
			r, _ := src.OpenSplit(ctx, s, nil)
			var p GPSPoint
			for st, _ := r.Next(&p); st != eddy.End; st, _ = r.Next(&p) {
			}
			r2, err := src.OpenSplit(ctx, s, r.Position())
			if err != nil {
				t.Fatal(err)
			}
			if st, _ := r2.Next(&p); st != eddy.End {
				t.Fatalf("split %d restored at its end: %v", s, st)
			}
		}
	}
}

func TestUnboundedNeverEnds(t *testing.T) {
	src := GPS(Drivers(3), Splits(2))
	r, _ := src.OpenSplit(ctx, 1, nil)
	var p GPSPoint
	for k := range 200_000 {
		st, err := r.Next(&p)
		if err != nil || st != eddy.Record {
			t.Fatalf("record %d: %v %v", k, st, err)
		}
	}
	if p.DriverID != "driver-00001" || gpsIndex(p) != 3*199_999+1 {
		t.Fatalf("last point %+v", p)
	}
}

func TestPositionValidation(t *testing.T) {
	src := GPS(Drivers(10), Splits(4))
	for _, tc := range []struct {
		split int
		pos   []byte
		want  string
	}{
		{0, []byte{}, "not a varint"},
		{0, []byte{0x80, 0x80}, "not a varint"},
		{0, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "not a varint"},
		{0, binary.AppendUvarint(nil, math.MaxUint64), "out of range"},
		{0, append(binary.AppendUvarint(nil, 4), 0), "trailing"},
		{1, binary.AppendUvarint(nil, 4), "belongs to split 0"},
		{4, nil, "out of range"},
		{-1, nil, "out of range"},
	} {
		_, err := src.OpenSplit(ctx, tc.split, tc.pos)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "datagen-gps") {
			t.Errorf("split %d pos %x: %v, want %q", tc.split, tc.pos, err, tc.want)
		}
	}
	// Index 14 is driver 4, split 0: a valid position.
	r, err := src.OpenSplit(ctx, 0, binary.AppendUvarint(nil, 14))
	if err != nil {
		t.Fatal(err)
	}
	var p GPSPoint
	r.Next(&p)
	if gpsIndex(p) != 14 {
		t.Fatalf("resumed at %d, want 14", gpsIndex(p))
	}
	if _, err := Orders(Drivers(10), Splits(4)).OpenSplit(ctx, 2, []byte{0x80}); err == nil || !strings.Contains(err.Error(), "datagen-orders") {
		t.Fatalf("orders: %v", err)
	}
}

// fakeClock is a clock that moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func withClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

func TestRateReturnsIdleWhenAhead(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	// 400/s over 4 drivers in 2 splits: 200/s per split, bursts of 10.
	src := GPS(Rate(400), Drivers(4), Splits(2), withClock(clk.now))
	r, _ := src.OpenSplit(ctx, 0, nil)
	var p GPSPoint
	read := func() (n int) {
		for {
			st, err := r.Next(&p)
			if err != nil {
				t.Fatal(err)
			}
			if st == eddy.Idle {
				return n
			}
			n++
		}
	}
	if n := read(); n != 1 {
		t.Fatalf("%d records before the first Idle, want 1", n)
	}
	clk.t = clk.t.Add(20 * time.Millisecond) // 4 more
	if n := read(); n != 4 {
		t.Fatalf("after 20ms: %d records, want 4", n)
	}
	clk.t = clk.t.Add(time.Hour) // a long stall: only a burst, not an hour's worth
	if n := read(); n != 10 {
		t.Fatalf("after an hour: %d records, want a burst of 10", n)
	}
	// Over a simulated second, about 200 records.
	total := 0
	for range 100 {
		clk.t = clk.t.Add(10 * time.Millisecond)
		total += read()
	}
	if total < 195 || total > 205 {
		t.Fatalf("%d records in a second, want about 200", total)
	}
}

func TestRateRealClock(t *testing.T) {
	src := GPS(Rate(1000), Drivers(10), Splits(1))
	r, _ := src.OpenSplit(ctx, 0, nil)
	var p GPSPoint
	start := time.Now()
	n, idles := 0, 0
	for time.Since(start) < 100*time.Millisecond {
		st, _ := r.Next(&p)
		if st == eddy.Idle {
			idles++
			time.Sleep(time.Millisecond)
			continue
		}
		n++
	}
	// 100 expected; stay loose for slow machines.
	if idles == 0 || n > 200 {
		t.Fatalf("%d records and %d idles in 100ms at 1000/s", n, idles)
	}
}

func TestGPSNextAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts differ under the race detector")
	}
	src := GPS(Drivers(1000))
	r, _ := src.OpenSplit(ctx, 3, nil)
	var p GPSPoint
	if a := testing.AllocsPerRun(10_000, func() {
		if st, _ := r.Next(&p); st != eddy.Record {
			t.Fatal(st)
		}
	}); a != 0 {
		t.Fatalf("%v allocs per GPS record", a)
	}
}

func TestOrdersNextAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts differ under the race detector")
	}
	src := Orders()
	r, _ := src.OpenSplit(ctx, 0, nil)
	var o OrderCreatedEvent
	r.Next(&o)
	if a := testing.AllocsPerRun(1000, func() { r.Next(&o) }); a > 1 {
		t.Fatalf("%v allocs per order, want 1 (the strings)", a)
	}
}

// haversine returns the distance between two points in meters.
func haversine(lat1, lon1, lat2, lon2 float64) float64 {
	const r = 6_371_000
	rad := math.Pi / 180
	dlat, dlon := (lat2-lat1)*rad, (lon2-lon1)*rad
	a := math.Sin(dlat/2)*math.Sin(dlat/2) + math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dlon/2)*math.Sin(dlon/2)
	return 2 * r * math.Asin(math.Sqrt(a))
}

func TestGPSPathIsSmooth(t *testing.T) {
	const drivers = 100
	opts := []Option{Seed(5), Drivers(drivers)}
	for d := range int64(drivers) {
		prev := GPSEvent(d, opts...)
		for k := int64(1); k < 200; k++ {
			p := GPSEvent(k*drivers+d, opts...)
			dist := haversine(prev.Lat, prev.Lon, p.Lat, p.Lon)
			if dist < 3 || dist > 150 {
				t.Fatalf("driver %d step %d: %.1f m", d, k, dist)
			}
			dt := p.Timestamp.Sub(prev.Timestamp).Seconds()
			if dt != drivers*0.01 {
				t.Fatalf("driver %d: %v s between steps", d, dt)
			}
			// The reported speed matches the distance travelled within 10%.
			avg := float64(prev.SpeedKmh+p.SpeedKmh) / 2
			if got := dist / dt * 3.6; math.Abs(got-avg) > 0.1*avg {
				t.Fatalf("driver %d step %d: %.2f km/h travelled, %.2f reported", d, k, got, avg)
			}
			if math.Abs(p.Lat-45.76) > 0.2 || math.Abs(p.Lon-4.84) > 0.25 {
				t.Fatalf("driver %d left Lyon: %v,%v", d, p.Lat, p.Lon)
			}
			prev = p
		}
	}
}

func TestStartTime(t *testing.T) {
	start := time.Date(2030, 5, 6, 7, 8, 9, 0, time.FixedZone("X", 3600))
	p := GPSEvent(250, StartTime(start))
	if !p.Timestamp.Equal(start.Add(2500*time.Millisecond)) || p.Timestamp.Location() != time.UTC {
		t.Fatalf("timestamp %v", p.Timestamp)
	}
	if o := OrderEvent(250, StartTime(start)); o.CreatedAt != start.UnixMilli()+2500 {
		t.Fatalf("created at %d", o.CreatedAt)
	}
}

func BenchmarkGPSNext(b *testing.B) {
	r, _ := GPS().OpenSplit(ctx, 0, nil)
	var p GPSPoint
	b.ReportAllocs()
	for b.Loop() {
		r.Next(&p)
	}
}

func BenchmarkOrdersNext(b *testing.B) {
	r, _ := Orders().OpenSplit(ctx, 0, nil)
	var o OrderCreatedEvent
	b.ReportAllocs()
	for b.Loop() {
		r.Next(&o)
	}
}
