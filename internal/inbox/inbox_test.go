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
