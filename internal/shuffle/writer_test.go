package shuffle

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/eddyflow/eddy/internal/inbox"
	"github.com/eddyflow/eddy/internal/race"
	"github.com/eddyflow/eddy/state"
)

type rec struct {
	Key string
	N   int
}

// recorder is a Sender that delivers every data batch at once and keeps,
// per output, what arrived: records ("r<N>"), watermarks ("w<wm>") and
// control messages ("c<kind>").
type recorder struct {
	outs    []*inbox.Inbox[Msg]
	pool    *Pool
	got     [][]string
	batches int
}

func (r *recorder) SendTo(ib *inbox.Inbox[Msg], _ int, m Msg) error {
	j := slices.Index(r.outs, ib)
	if m.Kind != Data {
		r.got[j] = append(r.got[j], fmt.Sprintf("c%d", m.Kind))
		return nil
	}
	r.batches++
	_, err := Deliver(r.pool, m.Batch, func(key *string, kb []byte, kg int, ts int64, x *rec) error {
		if *key != x.Key || string(kb) != x.Key || kg != state.KeyGroupFor(kb, 128) {
			return fmt.Errorf("record %d arrived with key %q, bytes %q, key group %d", x.N, *key, kb, kg)
		}
		if ts != int64(x.N) {
			return fmt.Errorf("record %d arrived with event time %d", x.N, ts)
		}
		r.got[j] = append(r.got[j], fmt.Sprintf("r%d", x.N))
		return nil
	}, func(wm int64) error {
		r.got[j] = append(r.got[j], fmt.Sprintf("w%d", wm))
		return nil
	})
	return err
}

// TestWriterRoutesRecordsAndWatermarks pushes random records and
// watermarks through a Writer and checks what each receiver sees: exactly
// the records of its key groups and the control messages, in order, each
// at the event time it was sent at; watermarks only advance.
func TestWriterRoutesRecordsAndWatermarks(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		par := 1 + rng.IntN(4)
		batchSize := 1 + rng.IntN(8)
		outs := make([]*inbox.Inbox[Msg], par)
		for i := range outs {
			outs[i] = inbox.New[Msg](1, 4)
		}
		pool := NewPool[string, rec](8, batchSize)
		r := &recorder{outs: outs, pool: pool, got: make([][]string, par)}
		var shuffled int64
		w := NewWriter(r, 0, outs, pool, func(x *rec) string { return x.Key },
			func(dst []byte, k *string) []byte { return append(dst, *k...) }, 128, batchSize, &shuffled)
		// What each output should see, as the writer promises it.
		want := make([][]string, par)
		pendingWM := make([]int64, par) // a watermark not yet followed by a record
		lastWM := make([]int64, par)
		for j := range par {
			pendingWM[j], lastWM[j] = NoTimestamp, NoTimestamp
		}
		wm := int64(0)
		records := 0
		for n := range 300 {
			switch op := rng.IntN(10); {
			case op < 7:
				x := rec{Key: fmt.Sprintf("k%d", rng.IntN(50)), N: n}
				kg := state.KeyGroupFor([]byte(x.Key), 128)
				j := state.SubtaskFor(kg, 128, par)
				if pendingWM[j] != NoTimestamp {
					want[j] = append(want[j], fmt.Sprintf("w%d", pendingWM[j]))
					pendingWM[j] = NoTimestamp
				}
				want[j] = append(want[j], fmt.Sprintf("r%d", n))
				records++
				if err := w.Push(int64(n), &x); err != nil {
					t.Fatal(err)
				}
			case op < 9:
				if rng.IntN(4) > 0 {
					wm += int64(rng.IntN(3)) // sometimes no advance
				}
				for j := range par {
					if wm > lastWM[j] {
						lastWM[j], pendingWM[j] = wm, wm
					}
				}
				if err := w.Watermark(wm); err != nil {
					t.Fatal(err)
				}
			default:
				for j := range par {
					if pendingWM[j] != NoTimestamp {
						want[j] = append(want[j], fmt.Sprintf("w%d", pendingWM[j]))
						pendingWM[j] = NoTimestamp
					}
					want[j] = append(want[j], fmt.Sprintf("c%d", Idle))
				}
				if err := w.Control(Msg{Kind: Idle, Batch: true}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		for j := range par {
			if pendingWM[j] != NoTimestamp {
				want[j] = append(want[j], fmt.Sprintf("w%d", pendingWM[j]))
			}
			if err := sameEventTime(r.got[j], want[j]); err != nil {
				t.Fatalf("seed %d, parallelism %d, batch %d: output %d: %v\nsaw  %v\nwant %v", seed, par, batchSize, j, err, r.got[j], want[j])
			}
		}
		if shuffled != int64(records) {
			t.Fatalf("seed %d: counted %d records sent, pushed %d", seed, shuffled, records)
		}
		if minBatches := records / batchSize / par; r.batches < minBatches {
			t.Fatalf("seed %d: %d batches for %d records", seed, r.batches, records)
		}
	}
}

// sameEventTime compares what an output saw with the model (watermarks
// there coalesced as far as possible): the same records and controls in
// the same order, each seen at the model's event time, the same final
// event time, and watermarks strictly increasing. A writer may send a
// watermark the model coalesced, when a batch holding it went out early
// so that event time moves on at an output that gets few records.
func sameEventTime(got, want []string) error {
	type item struct {
		what string
		wm   string
	}
	walk := func(seq []string) ([]item, string, error) {
		var items []item
		wm, last := "", int64(NoTimestamp)
		for _, s := range seq {
			if s[0] == 'w' {
				var v int64
				fmt.Sscanf(s[1:], "%d", &v)
				if v <= last {
					return nil, "", fmt.Errorf("watermark %d after %d", v, last)
				}
				last, wm = v, s
				continue
			}
			items = append(items, item{s, wm})
		}
		return items, wm, nil
	}
	g, gwm, err := walk(got)
	if err != nil {
		return err
	}
	w, wwm, _ := walk(want)
	if !slices.Equal(g, w) {
		return fmt.Errorf("records, controls or their event times differ")
	}
	if gwm != wwm {
		return fmt.Errorf("final event time %s, want %s", gwm, wwm)
	}
	return nil
}

// discard delivers every batch to a push that does nothing.
type discard struct{ pool *Pool }

func (d discard) SendTo(_ *inbox.Inbox[Msg], _ int, m Msg) error {
	if m.Kind != Data {
		return nil
	}
	_, err := Deliver(d.pool, m.Batch, func(*string, []byte, int, int64, *rec) error { return nil }, func(int64) error { return nil })
	return err
}

// TestPushAllocatesNothing: once batches are recycled, records and
// watermarks cost no allocation on their way through the writer and
// Deliver.
func TestPushAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("allocations are counted without the race detector")
	}
	outs := []*inbox.Inbox[Msg]{inbox.New[Msg](1, 4), inbox.New[Msg](1, 4)}
	pool := NewPool[string, rec](8, 16)
	var shuffled int64
	w := NewWriter(discard{pool}, 0, outs, pool, func(x *rec) string { return x.Key },
		func(dst []byte, k *string) []byte { return append(dst, *k...) }, 128, 16, &shuffled)
	keys := []rec{{Key: "a"}, {Key: "b"}, {Key: "c"}, {Key: "d"}}
	n := 0
	step := func() {
		if err := w.Push(int64(n), &keys[n%4]); err != nil {
			t.Fatal(err)
		}
		if n%7 == 0 {
			if err := w.Watermark(int64(n)); err != nil {
				t.Fatal(err)
			}
		}
		n++
	}
	for range 1000 {
		step()
	}
	if allocs := testing.AllocsPerRun(10000, step); allocs != 0 {
		t.Fatalf("%.3f allocations per record", allocs)
	}
}

// TestLimitAgeSendsSparseBatches: two writers of one subtask share an age
// clock; the batch of the writer that gets few records goes once the
// records pushed to either writer since its first reach the limit, at its
// next push, instead of waiting until it is full; the busy writer's
// batches still go full.
func TestLimitAgeSendsSparseBatches(t *testing.T) {
	out := []*inbox.Inbox[Msg]{inbox.New[Msg](1, 4)}
	key := func(x *rec) string { return x.Key }
	enc := func(dst []byte, k *string) []byte { return append(dst, *k...) }
	const batchSize, maxAge = 100, 150
	var clock int64
	mk := func() (*recorder, *Writer[string, rec]) {
		pool := NewPool[string, rec](8, batchSize)
		r := &recorder{outs: out, pool: pool, got: make([][]string, 1)}
		var shuffled int64
		w := NewWriter(r, 0, out, pool, key, enc, 128, batchSize, &shuffled)
		w.LimitAge(&clock, maxAge)
		return r, w
	}
	sparseR, sparse := mk()
	busyR, busy := mk()
	for n := range 1000 {
		w := busy
		if n%10 == 0 {
			w = sparse
		}
		if err := w.Push(int64(n), &rec{Key: "k", N: n}); err != nil {
			t.Fatal(err)
		}
	}
	// The sparse writer's first record (n=0) is the clock's 1st; its
	// push at n=150 is the 151st, 150 records later: its batch goes with
	// records 0 to 150, the next is born at n=160 and goes at n=310, and
	// so on: 6 batches of 16 records, the last up to n=950.
	if got := sparseR.got[0]; len(got) != 6*16 || got[15] != "r150" || got[len(got)-1] != "r950" || sparseR.batches != 6 {
		t.Fatalf("sparse writer: %d batches, %d records, last %v; want 6 batches of 16 records up to r950", sparseR.batches, len(got), got[max(0, len(got)-3):])
	}
	if busyR.batches != 9 {
		t.Fatalf("busy writer: %d batches of %d records; want 9 full ones", busyR.batches, len(busyR.got[0]))
	}
}

// TestWriterHonoursBatchLimit: a receiver that lowers its inbox's batch
// limit gets batches of that many records from the writer's next push on,
// other receivers still full ones; raised again, full batches return.
func TestWriterHonoursBatchLimit(t *testing.T) {
	outs := []*inbox.Inbox[Msg]{inbox.New[Msg](1, 4), inbox.New[Msg](1, 4)}
	key := func(x *rec) string { return x.Key }
	enc := func(dst []byte, k *string) []byte { return append(dst, *k...) }
	const batchSize = 64
	pool := NewPool[string, rec](16, batchSize)
	sizes := make([][]int, len(outs))
	var shuffled int64
	w := NewWriter(senderFunc(func(ib *inbox.Inbox[Msg], _ int, m Msg) error {
		j := slices.Index(outs, ib)
		b := m.Batch.(*KeyedBatch[string, rec])
		sizes[j] = append(sizes[j], b.Len())
		b.Reset()
		pool.Put(b)
		return nil
	}), 0, outs, pool, key, enc, 128, batchSize, &shuffled)
	// Keys of each receiver (key groups of 128 over 2 subtasks).
	keyOf := make([]string, len(outs))
	for i := 0; keyOf[0] == "" || keyOf[1] == ""; i++ {
		k := fmt.Sprint("k", i)
		keyOf[state.SubtaskFor(state.KeyGroupFor([]byte(k), 128), 128, 2)] = k
	}
	push := func(n int) {
		for i := range n {
			for _, k := range keyOf {
				if err := w.Push(int64(i), &rec{Key: k, N: i}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	push(2 * batchSize)
	outs[0].SetBatchLimit(5)
	push(20)
	outs[0].SetBatchLimit(1 << 20)
	push(2 * batchSize)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// Receiver 0: two full batches, four of 5 while limited, then full
	// ones again (the last partial at the flush).
	want0 := []int{64, 64, 5, 5, 5, 5, 64, 64}
	want1 := []int{64, 64, 64, 64, 20}
	if !slices.Equal(sizes[0], want0) || !slices.Equal(sizes[1], want1) {
		t.Fatalf("batch sizes: receiver 0 %v, want %v; receiver 1 %v, want %v", sizes[0], want0, sizes[1], want1)
	}
}

type senderFunc func(ib *inbox.Inbox[Msg], input int, m Msg) error

func (f senderFunc) SendTo(ib *inbox.Inbox[Msg], input int, m Msg) error { return f(ib, input, m) }
