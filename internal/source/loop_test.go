package source

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/internal/shuffle"
)

type event struct {
	Split, N int
	TS       int64
}

// sliceSource holds each split's events in memory; a split's position is
// the index of its next event. A split with open set returns Idle at its
// end instead of End.
type sliceSource struct {
	splits [][]event
	open   bool
	opened []int
	mu     sync.Mutex
}

func (s *sliceSource) Name() string { return "slices" }
func (s *sliceSource) Splits() int  { return len(s.splits) }
func (s *sliceSource) OpenSplit(_ context.Context, split int, pos []byte) (connector.SplitReader[event], error) {
	s.mu.Lock()
	s.opened = append(s.opened, split)
	s.mu.Unlock()
	r := &sliceReader{events: s.splits[split], open: s.open}
	if pos != nil {
		r.next = int(binary.BigEndian.Uint64(pos))
	}
	return r, nil
}

type sliceReader struct {
	events []event
	next   int
	open   bool
}

func (r *sliceReader) Next(e *event) (connector.ReadStatus, error) {
	if r.next == len(r.events) {
		if r.open {
			return connector.Idle, nil
		}
		return connector.End, nil
	}
	*e = r.events[r.next]
	r.next++
	return connector.Record, nil
}
func (r *sliceReader) Position() []byte { return binary.BigEndian.AppendUint64(nil, uint64(r.next)) }
func (r *sliceReader) Close() error     { return nil }

func pos(n int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

// host records what the loop tells its subtask.
type host struct {
	ctx         context.Context
	mu          sync.Mutex
	controls    []string
	checkpoints [][]checkpoint.SplitState
	running     int
	finished    chan struct{}
	checkpoint  chan struct{}
}

func newHost(ctx context.Context) *host {
	return &host{ctx: ctx, finished: make(chan struct{}, 1), checkpoint: make(chan struct{}, 4)}
}

func (h *host) Context() context.Context { return h.ctx }
func (h *host) Running()                 { h.running++ }
func (h *host) Checkpoint(id uint64, final bool, splits []checkpoint.SplitState) error {
	h.mu.Lock()
	h.checkpoints = append(h.checkpoints, splits)
	h.controls = append(h.controls, fmt.Sprintf("barrier %d %v", id, final))
	h.mu.Unlock()
	h.checkpoint <- struct{}{}
	return nil
}
func (h *host) Control(m shuffle.Msg) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch m.Kind {
	case shuffle.Watermark:
		h.controls = append(h.controls, fmt.Sprintf("wm %d", int64(m.ID)))
	case shuffle.EndOfData:
		h.controls = append(h.controls, "end")
	case shuffle.Terminate:
		h.controls = append(h.controls, "terminate")
	case shuffle.Idle:
		h.controls = append(h.controls, fmt.Sprintf("idle %v", m.Batch))
	}
	return nil
}
func (h *host) FlushOut() error { return nil }
func (h *host) FlushCounters()  {}
func (h *host) Finished() error { h.finished <- struct{}{}; return nil }

func events(split, n int) []event {
	out := make([]event, n)
	for i := range out {
		out[i] = event{Split: split, N: i, TS: int64(100*i + split)}
	}
	return out
}

// TestLoopReadsItsSplitsFromTheirPositions runs subtask 1 of 2 over four
// splits, restored with split 1 part read and split 3 done: it opens only
// split 1, reads it on from its position, ends its input, and takes the
// final checkpoint with every split done.
func TestLoopReadsItsSplitsFromTheirPositions(t *testing.T) {
	src := &sliceSource{splits: [][]event{events(0, 5), events(1, 300), events(2, 5), events(3, 5)}}
	h := newHost(context.Background())
	var got []event
	var recordsIn, idle int64
	triggers := make(chan Trigger, 1)
	l := &Loop[event]{Name: "slices", Splits: 4, Subtask: 1, Parallelism: 2, Source: src,
		Restored: []checkpoint.SplitState{{Split: 1, Pos: pos(2)}, {Split: 3, Pos: pos(5), Done: true}, {Split: 0, Pos: pos(4)}},
		Push: func(ts int64, e *event) error {
			if ts != shuffle.NoTimestamp {
				return fmt.Errorf("event time %d without a watermark strategy", ts)
			}
			got = append(got, *e)
			return nil
		},
		Triggers: triggers, Slots: NewSlots(2), RecordsIn: &recordsIn, Idle: &idle}
	done := make(chan error, 1)
	go func() { done <- l.Run(h) }()
	<-h.finished
	triggers <- Trigger{ID: 9, Final: true}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(src.opened, []int{1}) {
		t.Fatalf("opened splits %v, want only 1", src.opened)
	}
	if want := events(1, 300)[2:]; !slices.Equal(got, want) {
		t.Fatalf("read %d events from %v, want split 1 from event 2 (%d)", len(got), got[0], len(want))
	}
	if recordsIn != int64(len(got)) || h.running != 1 {
		t.Fatalf("counted %d records in, running %d times", recordsIn, h.running)
	}
	if want := []string{"end", "barrier 9 true", "terminate"}; !slices.Equal(h.controls, want) {
		t.Fatalf("controls %v, want %v", h.controls, want)
	}
	want := []checkpoint.SplitState{{Split: 1, Pos: pos(300), Done: true}, {Split: 3, Pos: pos(5), Done: true}}
	if len(h.checkpoints) != 1 || !equalSplits(h.checkpoints[0], want) {
		t.Fatalf("final checkpoint positions %v, want %v", h.checkpoints, want)
	}
	if l.Slots[1].Load() != Excluded {
		t.Fatalf("a finished subtask's watermark slot is %d, want Excluded", l.Slots[1].Load())
	}
}

func equalSplits(a, b []checkpoint.SplitState) bool {
	return slices.EqualFunc(a, b, func(x, y checkpoint.SplitState) bool {
		return x.Split == y.Split && x.Done == y.Done && slices.Equal(x.Pos, y.Pos)
	})
}

// TestLoopCheckpointsWhereItHasRead triggers a checkpoint while the splits
// wait for more input: its positions are exactly what was pushed, and the
// watermark is the smallest split's largest event time minus the delay.
func TestLoopCheckpointsWhereItHasRead(t *testing.T) {
	src := &sliceSource{splits: [][]event{events(0, 40), events(1, 700)}, open: true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHost(ctx)
	pushed := make(chan struct{})
	n := 0
	var recordsIn, idle int64
	triggers := make(chan Trigger, 1)
	var lag atomic.Int64
	var wmGauge atomic.Int64
	l := &Loop[event]{Name: "slices", Splits: 2, Subtask: 0, Parallelism: 1, Source: src,
		Push: func(ts int64, e *event) error {
			if ts != e.TS {
				return fmt.Errorf("event %+v pushed at event time %d", *e, ts)
			}
			if n++; n == 740 {
				close(pushed)
			}
			return nil
		},
		Watermarks: &WatermarkSpec[event]{TS: func(e *event) time.Time { return time.Unix(0, e.TS) }, Delay: 50},
		Triggers:   triggers, Slots: NewSlots(1), RecordsIn: &recordsIn, Idle: &idle, Watermark: &wmGauge, Lag: &lag}
	done := make(chan error, 1)
	go func() { done <- l.Run(h) }()
	<-pushed
	triggers <- Trigger{ID: 3}
	<-h.checkpoint
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v after the cancel", err)
	}
	want := []checkpoint.SplitState{{Split: 0, Pos: pos(40)}, {Split: 1, Pos: pos(700)}}
	if !equalSplits(h.checkpoints[0], want) {
		t.Fatalf("checkpoint positions %v, want %v", h.checkpoints[0], want)
	}
	// Split 0 ends at event time 3900, split 1 runs ahead: the watermark
	// is held by split 0.
	final := int64(100*39 + 0 - 50)
	var last int64 = math.MinInt64
	for _, c := range h.controls {
		var wm int64
		if _, err := fmt.Sscanf(c, "wm %d", &wm); err == nil {
			if wm <= last {
				t.Fatalf("watermark %d after %d: %v", wm, last, h.controls)
			}
			last = wm
		}
	}
	if last != final || wmGauge.Load() != final || l.Slots[0].Load() != Excluded {
		t.Fatalf("last watermark %d, gauge %d, slot %d; want %d, and the slot Excluded after the end", last, wmGauge.Load(), l.Slots[0].Load(), final)
	}
}

func TestAligned(t *testing.T) {
	const drift = 10
	for _, tc := range []struct {
		name  string
		slots []int64 // self is slot 0, whose own watermark is slots[0]
		want  bool
	}{
		{"alone", []int64{100}, true},
		{"within drift", []int64{100, 95, 90}, true},
		{"ahead past drift", []int64{100, 95, 89}, false},
		{"behind", []int64{50, 100}, true},
		{"other has none yet", []int64{100, NoWatermark}, false},
		{"nothing read yet, other has none", []int64{NoWatermark, NoWatermark}, true},
		{"nothing read yet, other ahead", []int64{NoWatermark, 500}, true},
		{"others excluded", []int64{100, Excluded, Excluded}, true},
		{"excluded ignored, one behind", []int64{100, Excluded, 80}, false},
	} {
		slots := NewSlots(len(tc.slots))
		for i, v := range tc.slots {
			slots[i].Store(v)
		}
		if got := aligned(slots, 0, tc.slots[0], drift); got != tc.want {
			t.Errorf("%s: aligned = %v, want %v", tc.name, got, tc.want)
		}
	}
}
