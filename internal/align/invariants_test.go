package align

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestAlignerRandom drives Aligners with random command sequences and
// checks the invariants that hold whatever the order of arrivals.
func TestAlignerRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 2000 {
		prog := make([]byte, 2+2*rng.IntN(150))
		for i := range prog {
			prog[i] = byte(rng.UintN(256))
		}
		if err := runProgram(prog); err != nil {
			t.Fatalf("run %d, program %x: %v", run, prog, err)
		}
	}
}

// FuzzAligner decodes bytes into a command sequence (see runProgram) and
// checks that the Aligner never panics and keeps its invariants.
func FuzzAligner(f *testing.F) {
	f.Add([]byte{2, 0, 0, 1, 0, 1, 1, 0})                   // align 2 inputs, release
	f.Add([]byte{1, 3, 0, 0, 0, 2, 0, 3, 1, 3, 1, 0})       // abandon, stale
	f.Add([]byte{2, 0, 2, 10, 2, 21, 3, 0, 3, 1, 4, 0})     // watermarks, idle, active
	f.Add([]byte{0, 0, 0, 1, 6, 2, 0, 2, 5, 1, 5, 0, 7, 9}) // terminate, eod, advanced
	f.Fuzz(func(t *testing.T, prog []byte) {
		if err := runProgram(prog); err != nil {
			t.Fatal(err)
		}
	})
}

// runProgram runs prog against a fresh Aligner and returns the first
// broken invariant, with the commands that led to it. prog[0] picks the
// number of inputs (1 to 4), prog[1] the floor, and each following pair
// (op, arg) one command: the low bits of op the command, the high bits
// the input.
func runProgram(prog []byte) error {
	if len(prog) < 2 {
		return nil
	}
	n := 1 + int(prog[0]%4)
	c := &checker{a: New(n, eventTime(prog[1])), terminated: make([]bool, n), last: eventTime(prog[1])}
	c.trace = append(c.trace, fmt.Sprintf("new inputs=%d floor=%d", n, c.last))
	for p := 2; p+1 < len(prog); p += 2 {
		op, arg := prog[p], prog[p+1]
		if err := c.step(op%8, int(op>>3)%n, arg); err != nil {
			tail := c.trace[max(0, len(c.trace)-20):]
			return fmt.Errorf("%v\nlast commands:\n  %s", err, strings.Join(tail, "\n  "))
		}
	}
	return nil
}

// eventTime maps a byte to an event time: mostly small values close
// together, sometimes the extremes.
func eventTime(b byte) int64 {
	switch b {
	case 0:
		return math.MinInt64
	case 255:
		return math.MaxInt64
	}
	return int64(b%64)*10 - 100
}

// checker mirrors what the caller of an Aligner can know and checks every
// result against it.
type checker struct {
	a          *Aligner
	terminated []bool // Terminate returned nil for the input
	last       int64  // floor, greatest Advanced or Advance returned
	taken      uint64 // id of the last checkpoint completed
	nextID     uint64 // greatest barrier id sent so far
	idle       bool   // the subtask last said it is idle
	exhausted  bool   // EndOfData returned true
	trace      []string
}

func (c *checker) step(op byte, in int, arg byte) error {
	a := c.a
	blocked := c.blocked()
	switch op {
	case 0, 1: // barrier: ids near the newest, so stale, equal and newer mix
		id := max(1, int64(c.nextID)-2+int64(arg%5))
		c.nextID = max(c.nextID, uint64(id))
		final := arg&0x80 != 0
		c.trace = append(c.trace, fmt.Sprintf("barrier in=%d id=%d final=%t", in, id, final))
		abandoned, held := a.Abandoned, a.Blocked(in)
		done, err := a.Barrier(in, uint64(id), final)
		switch {
		case err != nil:
			if got := c.blocked(); got != blocked || a.Abandoned != abandoned {
				return fmt.Errorf("barrier error %v changed state: blocked %s -> %s", err, blocked, got)
			}
			if !c.terminated[in] && !held {
				return fmt.Errorf("barrier error for an input neither held nor terminated: %v", err)
			}
		case done:
			for i, ended := range c.terminated {
				if !ended && !a.Blocked(i) {
					return fmt.Errorf("checkpoint %d completed with live input %d not blocked", id, i)
				}
			}
			if got, _ := a.Checkpoint(); got != uint64(id) || uint64(id) <= c.taken {
				return fmt.Errorf("completed checkpoint %d (Checkpoint says %d) after %d", id, got, c.taken)
			}
			c.taken = uint64(id)
		case a.Blocked(in):
			if got, _ := a.Checkpoint(); got != uint64(id) {
				return fmt.Errorf("input %d held for barrier %d, aligning %d", in, id, got)
			}
		}
		if a.Abandoned < abandoned || a.Abandoned > abandoned+1 {
			return fmt.Errorf("Abandoned went from %d to %d", abandoned, a.Abandoned)
		}
	case 2:
		wm := eventTime(arg)
		c.trace = append(c.trace, fmt.Sprintf("watermark in=%d wm=%d", in, wm))
		return c.event(a.Watermark(in, wm))
	case 3:
		c.trace = append(c.trace, fmt.Sprintf("idle in=%d", in))
		return c.event(a.Idle(in, true))
	case 4:
		c.trace = append(c.trace, fmt.Sprintf("active in=%d", in))
		return c.event(a.Idle(in, false))
	case 5:
		c.trace = append(c.trace, fmt.Sprintf("eod in=%d", in))
		ev, all := a.EndOfData(in)
		if all {
			c.exhausted = true
		} else if c.exhausted {
			return fmt.Errorf("EndOfData false after all inputs ended")
		}
		return c.event(ev)
	case 6:
		c.trace = append(c.trace, fmt.Sprintf("terminate in=%d", in))
		ev, done, err := a.Terminate(in)
		if err != nil {
			if !a.Blocked(in) {
				return fmt.Errorf("terminate error for an input not held: %v", err)
			}
			return nil
		}
		c.terminated[in] = true
		if done {
			for i, ended := range c.terminated {
				if !ended && !a.Blocked(i) {
					return fmt.Errorf("checkpoint completed by a termination with live input %d not blocked", i)
				}
			}
			id, _ := a.Checkpoint()
			if id <= c.taken {
				return fmt.Errorf("termination completed checkpoint %d after %d", id, c.taken)
			}
			c.taken = id
		}
		return c.event(ev)
	case 7:
		if arg%2 == 0 {
			c.trace = append(c.trace, "release")
			a.Release()
			if got := c.blocked(); got != "" {
				return fmt.Errorf("inputs %s still blocked after Release", got)
			}
		} else {
			wm := eventTime(arg)
			c.trace = append(c.trace, fmt.Sprintf("advanced wm=%d", wm))
			a.Advanced(wm)
			c.last = max(c.last, wm)
		}
	}
	return c.check()
}

// event checks what a Watermark or Idle call returned.
func (c *checker) event(ev Event) error {
	switch {
	case ev.Idle && (ev.Active || ev.Advance):
		return fmt.Errorf("event %+v: idle with active or advance", ev)
	case ev.Idle && c.idle:
		return fmt.Errorf("idle reported twice")
	case ev.Active && !c.idle:
		return fmt.Errorf("active reported while not idle")
	case ev.Advance && ev.Watermark <= c.last:
		return fmt.Errorf("advance to %d after %d", ev.Watermark, c.last)
	case ev.Advance && c.exhausted:
		return fmt.Errorf("advance to %d after every input's data ended", ev.Watermark)
	}
	if ev.Idle {
		c.idle = true
	}
	if ev.Active {
		c.idle = false
	}
	if ev.Advance {
		c.last = ev.Watermark
	}
	return nil
}

// check verifies what holds after every command.
func (c *checker) check() error {
	live := 0
	for i, ended := range c.terminated {
		if !ended {
			live++
		} else if c.a.Blocked(i) {
			return fmt.Errorf("terminated input %d is blocked", i)
		}
	}
	if c.a.Live() != live {
		return fmt.Errorf("Live() = %d, want %d", c.a.Live(), live)
	}
	return nil
}

// blocked lists the blocked inputs, e.g. "0 2".
func (c *checker) blocked() string {
	var ins []string
	for i := range c.terminated {
		if c.a.Blocked(i) {
			ins = append(ins, fmt.Sprint(i))
		}
	}
	return strings.Join(ins, " ")
}
