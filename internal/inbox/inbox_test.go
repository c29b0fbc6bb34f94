package inbox

import (
	"testing"

	"github.com/eddyflow/eddy/internal/race"
)

// TestCreditsPerInput: an input whose messages are held (not released) stops
// at its credits while another input still gets through.
func TestCreditsPerInput(t *testing.T) {
	in := New[int](2, 2)
	done := make(chan struct{})
	for k := range 2 {
		if !in.Send(done, 0, k) {
			t.Fatal("send refused")
		}
	}
	third := make(chan bool)
	go func() { third <- in.Send(done, 0, 2) }()
	// Input 1 is not held back by input 0's used credits.
	if !in.Send(done, 1, 10) {
		t.Fatal("send refused")
	}
	got := map[int][]int{}
	for range 3 {
		e := <-in.C()
		got[e.From] = append(got[e.From], e.Msg)
	}
	if len(got[0]) != 2 || got[0][0] != 0 || got[0][1] != 1 || len(got[1]) != 1 {
		t.Fatalf("received %v", got)
	}
	select {
	case <-third:
		t.Fatal("input 0 sent a third message with both credits out")
	default:
	}
	in.Release(0) // one of input 0's messages is handled
	if !<-third {
		t.Fatal("send refused")
	}
	if e := <-in.C(); e.From != 0 || e.Msg != 2 {
		t.Fatalf("received %+v", e)
	}
	// A sender waiting for a credit gives up when done closes.
	go func() { third <- in.Send(done, 0, 3) }()
	close(done)
	if <-third {
		t.Fatal("send after done")
	}
}

func TestNoAllocation(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts differ under the race detector")
	}
	in := New[[3]int](4, 4)
	done := make(chan struct{})
	allocs := testing.AllocsPerRun(1000, func() {
		in.Send(done, 3, [3]int{1, 2, 3})
		e := <-in.C()
		in.Release(e.From)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per message", allocs)
	}
}

// TestTrySend: TrySend delivers while the input has credits and refuses,
// without waiting or sending, once they are out.
func TestTrySend(t *testing.T) {
	in := New[int](2, 1)
	if !in.TrySend(0, 1) {
		t.Fatal("TrySend refused with a credit left")
	}
	if in.TrySend(0, 2) {
		t.Fatal("TrySend sent with the input's credits out")
	}
	if !in.TrySend(1, 3) {
		t.Fatal("TrySend refused on another input")
	}
	if len(in.C()) != 2 {
		t.Fatalf("%d messages queued, want 2", len(in.C()))
	}
	e := <-in.C()
	in.Release(e.From)
	if e.From != 0 || e.Msg != 1 || !in.TrySend(0, 4) {
		t.Fatalf("after release: got %+v, TrySend refused", e)
	}
	if race.Enabled {
		return
	}
	if allocs := testing.AllocsPerRun(1000, func() {
		in.TrySend(1, 5)
		e := <-in.C()
		in.Release(e.From)
	}); allocs != 0 {
		t.Fatalf("%v allocations per TrySend", allocs)
	}
}
