package eddy_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/discard"
	"github.com/eddyflow/eddy/connector/file"
)

// failingCommitSink is a file sink whose Commit fails with err.
type failingCommitSink[T any] struct {
	eddy.Sink[T]
	err error
}

func (s failingCommitSink[T]) Commit(context.Context, [][]byte) error { return s.err }

// TestCoordinatorErrorIsTheCause: a failure of the coordinator (a sink's
// commit) is what Run reports, not the "context canceled" the subtasks
// it stopped saw; a permanent one is not retried.
func TestCoordinatorErrorIsTheCause(t *testing.T) {
	dir := t.TempDir()
	logs := &logBuf{}
	cause := errors.New("commit refused")
	env := eddy.New(eddy.Checkpoints(filepath.Join(dir, "data"), 10*time.Millisecond), eddy.Parallelism(2),
		eddy.Restarts(3, time.Millisecond), eddy.LogOutput(logs))
	src := eddy.FromSource(env, datagen.GPS(datagen.Events(50_000)))
	eddy.ToSink(src, failingCommitSink[datagen.GPSPoint]{file.JSONLines[datagen.GPSPoint](filepath.Join(dir, "out")), eddy.Permanent(cause)})
	err := env.Run(context.Background())
	if !errors.Is(err, cause) || !errors.Is(err, eddy.ErrPermanent) || errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want the commit's error", err)
	}
	if !strings.Contains(err.Error(), "commit refused") || strings.Contains(logs.String(), "job failed (attempt") {
		t.Fatalf("Run = %v; log:\n%s", err, logs)
	}
}

// gateSource is one split that emits n records, then waits (Idle) until
// end is closed, then ends.
type gateSource struct {
	n   int
	end chan struct{}
}

func (s gateSource) Name() string { return "gate" }
func (s gateSource) Splits() int  { return 1 }
func (s gateSource) OpenSplit(_ context.Context, _ int, pos []byte) (eddy.SplitReader[datagen.GPSPoint], error) {
	return &gateReader{s: s}, nil
}

type gateReader struct {
	s gateSource
	i int
}

func (r *gateReader) Next(p *datagen.GPSPoint) (eddy.ReadStatus, error) {
	if r.i < r.s.n {
		p.DriverID = fmt.Sprint("d", r.i%7)
		r.i++
		return eddy.Record, nil
	}
	select {
	case <-r.s.end:
		return eddy.End, nil
	default:
		return eddy.Idle, nil
	}
}
func (r *gateReader) Position() []byte { return []byte(fmt.Sprint(r.i)) }
func (r *gateReader) Close() error     { return nil }

// stallFirstState holds the first state upload, after letting the source
// end, until a second one starts.
type stallFirstState struct {
	blob.Store
	mu      sync.Mutex
	puts    int
	end     chan struct{}
	release chan struct{}
}

func (s *stallFirstState) Put(ctx context.Context, name string, data []byte) error {
	if strings.HasSuffix(name, ".state") {
		s.mu.Lock()
		s.puts++
		n := s.puts
		s.mu.Unlock()
		switch n {
		case 1:
			close(s.end)
			select {
			case <-s.release:
			case <-ctx.Done():
				return ctx.Err()
			}
		case 2:
			close(s.release)
		}
	}
	return s.Store.Put(ctx, name, data)
}

// TestFinalCheckpointAfterAbortedOne: when the checkpoint in flight as the
// last source finishes is aborted (here it times out), the final
// checkpoint is still taken. It used to be triggered only by a finishing
// source or a tick, and ticks stop once every source has finished: the job
// hung. (Should the timeout fire before the coordinator hears that the
// source finished, the old code passes too; the new one passes either way.)
func TestFinalCheckpointAfterAbortedOne(t *testing.T) {
	dir := t.TempDir()
	inner, err := blob.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	store := &stallFirstState{Store: inner, end: make(chan struct{}), release: make(chan struct{})}
	logs := &logBuf{}
	env := eddy.New(eddy.CheckpointStore(store, 10*time.Millisecond), eddy.CheckpointTimeout(200*time.Millisecond),
		eddy.Parallelism(1), eddy.LogOutput(logs))
	ks := eddy.KeyBy(eddy.FromSource[datagen.GPSPoint](env, gateSource{n: 100, end: store.end}), func(p *datagen.GPSPoint) string { return p.DriverID })
	eddy.ToSink(eddy.Reduce(ks, func(a, b datagen.GPSPoint) datagen.GPSPoint { return b }), discard.Sink[datagen.GPSPoint]())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := env.Run(ctx); err != nil {
		t.Fatalf("Run = %v; log:\n%s", err, logs)
	}
	if !strings.Contains(logs.String(), "checkpoint timed out") {
		t.Fatalf("the first checkpoint did not time out; log:\n%s", logs)
	}
}
