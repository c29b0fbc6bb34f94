package main

import (
	"fmt"
	"io"
	"os"
	"runtime/trace"
	"sync"
	"time"

	"github.com/eddyflow/eddy"
)

// slowTracer keeps a flight recording of the execution trace while a
// bench run measures, and writes the last seconds of it when a checkpoint
// takes longer than a threshold: what every goroutine did while that
// checkpoint waited. A nil *slowTracer does nothing.
type slowTracer struct {
	fr      *trace.FlightRecorder
	limit   time.Duration
	prefix  string
	stderr  io.Writer
	mu      sync.Mutex
	written int
	busy    bool
	notes   []string // what the background writes did, printed by stop
	wg      sync.WaitGroup
}

// maxSlowTraces is how many traces one run writes.
const maxSlowTraces = 3

// slowTracer starts a flight recorder if cfg asks for one.
func (cfg benchConfig) slowTracer(stderr io.Writer) *slowTracer {
	if cfg.traceSlow <= 0 {
		return nil
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: cfg.traceSlow + 2*time.Second, MaxBytes: 256 << 20})
	if err := fr.Start(); err != nil {
		fmt.Fprintf(stderr, "eddy bench: flight recorder: %v\n", err)
		return nil
	}
	return &slowTracer{fr: fr, limit: cfg.traceSlow, prefix: fmt.Sprintf("%s-%s-%v", cfg.traceOut, cfg.job, cfg.changelog), stderr: stderr}
}

// check writes a trace if s took longer than the threshold, in the
// background, one at a time.
func (t *slowTracer) check(s eddy.CheckpointStats) {
	if t == nil || s.Duration <= t.limit {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy || t.written >= maxSlowTraces {
		return
	}
	t.busy = true
	t.written++
	name := fmt.Sprintf("%s-%d.trace", t.prefix, s.ID)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		note := fmt.Sprintf("eddy bench: checkpoint %d took %v (sync %v): trace in %s", s.ID, s.Duration, s.SyncDuration, name)
		if err := t.write(name); err != nil {
			note = fmt.Sprintf("eddy bench: writing %s: %v", name, err)
		}
		t.mu.Lock()
		t.busy = false
		t.notes = append(t.notes, note)
		t.mu.Unlock()
	}()
}

func (t *slowTracer) write(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := t.fr.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// stop waits for traces being written, stops the recorder and reports
// the traces (here, not from the writers: the bench writes to stderr
// meanwhile, and stderr need not be safe for concurrent use).
func (t *slowTracer) stop() {
	if t == nil {
		return
	}
	t.wg.Wait()
	t.fr.Stop()
	for _, n := range t.notes {
		fmt.Fprintln(t.stderr, n)
	}
}
