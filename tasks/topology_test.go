package tasks_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	blobfile "github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/internal/group"
	"github.com/eddyflow/eddy/tasks"
)

// TestTopologyRefused: the first process of a job records its topology; a
// process whose graph differs (another operator) is refused before it
// joins the group, with an error naming the difference; one with the same
// graph is not.
func TestTopologyRefused(t *testing.T) {
	brokers := newCluster(t)
	store, err := blobfile.New(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := tasks.Config{Job: job, Brokers: brokers, Topic: "in", Store: store, Interval: 100 * time.Millisecond,
		SessionTimeout: session, HeartbeatInterval: heartbeat, RebalanceTimeout: rebalance, HandoverTimeout: handover,
		Options: []eddy.Option{eddy.LogOutput(io.Discard)}}
	// A process that starts, runs its tasks for a moment and stops.
	run := func(b tasks.Build) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return tasks.Run(ctx, cfg, b)
	}
	if err := run(build(brokers)); err != nil {
		t.Fatal(err)
	}
	other := func(env *eddy.Env, task tasks.Task) error {
		if err := build(brokers)(env, task); err != nil {
			return err
		}
		// One more operator than the job recorded.
		eddy.FromSource(env, &emptySource{}, eddy.Named("extra"))
		return nil
	}
	err = run(other)
	if !errors.Is(err, group.ErrTopologyMismatch) || !strings.Contains(err.Error(), `operator 4 is "extra"`) {
		t.Fatalf("a process with another graph: %v, want a topology mismatch naming the extra operator", err)
	}
	if err := run(build(brokers)); err != nil {
		t.Fatalf("a process with the job's graph after a refused one: %v", err)
	}
}

// emptySource is a source without records.
type emptySource struct{}

func (emptySource) Name() string { return "empty" }
func (emptySource) Splits() int  { return 1 }
func (emptySource) OpenSplit(context.Context, int, []byte) (eddy.SplitReader[Event], error) {
	return emptyReader{}, nil
}

type emptyReader struct{}

func (emptyReader) Next(*Event) (eddy.ReadStatus, error) { return eddy.End, nil }
func (emptyReader) Position() []byte                     { return nil }
func (emptyReader) Close() error                         { return nil }
