package runtime

import (
	"context"
	"fmt"
	"slices"

	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/internal/shuffle"
	"github.com/eddyflow/eddy/state"
)

// Graph is a job's physical plan as the API builds it: stages (chains of
// operators that run in one goroutine per subtask), the hash shuffles
// between them, its sources and its sinks.
type Graph struct {
	stages  []*Stage
	sources []*SourceEntry
	sinks   []*SinkEntry
}

// Stage is a chain of operators that runs in one goroutine per subtask: a
// source or a shuffle input, then operators up to a sink or a shuffle
// output.
type Stage struct {
	id          int
	parallelism int
	name        string   // see Name
	ops         []string // the chained operators, for the job graph's description
	source      *SourceEntry
	inputs      []*Edge // the shuffles feeding this stage, in the order of their inbox inputs
	outs        []*Edge // the shuffles this stage feeds
	keyedOps    int     // keyed operators chained (at most: each has a state backend)
}

// Parallelism is the stage's number of subtasks.
func (st *Stage) Parallelism() int { return st.parallelism }

// Edge is a hash shuffle between two stages.
type Edge struct {
	from, to *Stage
	pool     *shuffle.Pool // the edge's batches, recycled
	// offset is the first of to's inbox inputs: subtask i of from sends as
	// input offset+i (layoutInputs).
	offset int
	// receive builds, per subtask of to, the handler of a batch from this
	// edge; the handler calls mark for each watermark in the batch, at its
	// place among the records.
	receive func(sc *Subtask) (func(batch any, mark func(wm int64) error) error, error)
}

// layoutInputs numbers the inbox inputs of the stage's edges and returns
// how many there are.
func (st *Stage) layoutInputs() int {
	n := 0
	for _, e := range st.inputs {
		e.offset = n
		n += e.from.parallelism
	}
	return n
}

// MoveInputs makes the shuffles that feed stage from feed stage to
// instead, after to's own, and removes from, which must have no operator
// and no output yet, from the graph. It is how two keyed streams become
// the two inputs of one operator.
func (g *Graph) MoveInputs(from, to *Stage) error {
	if from.source != nil || len(from.outs) > 0 || len(from.ops) > 0 {
		return fmt.Errorf("stage %s is in use", from.Name())
	}
	for _, e := range from.inputs {
		e.to = to
		to.inputs = append(to.inputs, e)
	}
	from.inputs = nil
	i := slices.Index(g.stages, from)
	if i < 0 {
		return fmt.Errorf("stage %s is not in the graph", from.Name())
	}
	g.stages = slices.Delete(g.stages, i, i+1)
	for k, st := range g.stages {
		st.id = k
	}
	return nil
}

// SourceEntry is a source of the job, type-erased.
type SourceEntry struct {
	index  int
	name   string
	splits int
	st     *Stage
	run    func(sc *Subtask) error
}

// SinkEntry is a sink of the job, type-erased.
type SinkEntry struct {
	name     string
	recover  func(ctx context.Context, txns [][]byte) error
	commit   func(ctx context.Context, txns [][]byte) error
	rollback connector.RollbackSink // nil if the sink cannot undo a commit
}

// AddSource adds a source stage of parallelism par reading a source with
// id name and splits splits; run is its subtask loop (RunSource).
func (g *Graph) AddSource(par int, name string, splits int) (*Stage, *SourceEntry) {
	st := g.newStage(par)
	entry := &SourceEntry{index: len(g.sources), name: name, splits: splits, st: st}
	st.source = entry
	st.name, st.ops = name, []string{"source " + name}
	g.sources = append(g.sources, entry)
	return st, entry
}

// SetRun sets the loop of the source's subtasks.
func (s *SourceEntry) SetRun(run func(sc *Subtask) error) { s.run = run }

// AddSink adds a sink with id name to the job; rollback is nil unless the
// sink can undo what it committed.
func (g *Graph) AddSink(name string, recover, commit func(ctx context.Context, txns [][]byte) error, rollback connector.RollbackSink) *SinkEntry {
	s := &SinkEntry{name: name, recover: recover, commit: commit, rollback: rollback}
	g.sinks = append(g.sinks, s)
	return s
}

func (g *Graph) newStage(parallelism int) *Stage {
	st := &Stage{id: len(g.stages), parallelism: parallelism}
	g.stages = append(g.stages, st)
	return st
}

// KeyedStage adds a stage of parallelism par fed by hash shuffles of
// records of type T with keys of type K from the stages from (one edge
// each, a union when there are several), batching batchSize records and
// allowing each input channelBatches batches in flight. Set what its
// subtasks do with the records with SetReceive.
func KeyedStage[K comparable, T any](g *Graph, from []*Stage, par, batchSize, channelBatches int) (*Stage, []*Edge) {
	st := g.newStage(par)
	return st, addInputs[K, T](st, from, batchSize, channelBatches)
}

// addInputs adds an edge from each of the stages from to st, carrying
// records of type T with keys of type K.
func addInputs[K comparable, T any](st *Stage, from []*Stage, batchSize, channelBatches int) []*Edge {
	edges := make([]*Edge, len(from))
	for i, f := range from {
		// At most every input's credits and open batch are out at once.
		e := &Edge{from: f, to: st, pool: shuffle.NewPool[K, T](f.parallelism*st.parallelism*(channelBatches+1), batchSize)}
		f.outs = append(f.outs, e)
		st.inputs = append(st.inputs, e)
		edges[i] = e
	}
	return edges
}

// EdgeFrom is the edge among edges (one per stage feeding a stage) whose
// sending stage is subtask sc's.
func EdgeFrom(sc *Subtask, edges []*Edge) (*Edge, error) {
	for _, e := range edges {
		if e.from == sc.st {
			return e, nil
		}
	}
	return nil, fmt.Errorf("eddy: stage %s feeds none of %d edges", sc.st.Name(), len(edges))
}

// BroadcastInputs adds to stage st broadcast edges of records of type T
// from the stages from: every subtask of st receives every record. Set
// what st's subtasks do with them with SetReceive (keys are
// BroadcastKey{}), and write them with Broadcast.
func BroadcastInputs[T any](st *Stage, from []*Stage, batchSize, channelBatches int) []*Edge {
	return addInputs[BroadcastKey, T](st, from, batchSize, channelBatches)
}

// BroadcastKey is the key of a record on a broadcast edge: it has none.
type BroadcastKey struct{}

// Broadcast returns, for subtask sc of a stage that feeds broadcast edge
// e, the push that sends every record to every receiver.
func Broadcast[T any](sc *Subtask, e *Edge) Push[T] {
	cfg := sc.job.env.cfg
	w := shuffle.NewWriter[BroadcastKey, T](sc, e.offset+sc.subtask, sc.job.inboxes[e.to], e.pool, nil, nil, cfg.MaxParallelism, cfg.BatchSize, &sc.shuffled)
	sc.outs = append(sc.outs, w)
	return w.Broadcast
}

// SetReceive sets how the receiving subtasks of edges (of one keyed
// stream) handle their records: build returns, per subtask, the push of
// the stream's keyed operators, built once per subtask whatever the
// number of edges.
func SetReceive[K comparable, T any](edges []*Edge, build func(sc *Subtask) (KeyedPush[K, T], error)) {
	key := new(byte)
	for _, e := range edges {
		e.receive = func(sc *Subtask) (func(any, func(int64) error) error, error) {
			push, err := Memo(sc, key, func() (KeyedPush[K, T], error) { return build(sc) })
			if err != nil {
				return nil, err
			}
			return func(b any, mark func(int64) error) error {
				n, err := shuffle.Deliver(e.pool, b, push, mark)
				sc.received += int64(n)
				return err
			}, nil
		}
	}
}

// Memo returns what build returns, calling it only the first time key is
// asked for in subtask sc: a part of the graph that several inputs or
// chains of one subtask lead to (a union, an operator with two inputs) is
// built once per subtask. Subtasks build on their own goroutines, so it
// takes no lock.
func Memo[V any](sc *Subtask, key any, build func() (V, error)) (V, error) {
	if v, ok := sc.memo[key]; ok {
		return v.(V), nil
	}
	v, err := build()
	if err != nil {
		return v, err
	}
	if sc.memo == nil {
		sc.memo = map[any]any{}
	}
	sc.memo[key] = v
	return v, nil
}

// Shuffle returns, for subtask sc of the stage that feeds e, the push that
// partitions records by key over e's receivers.
func Shuffle[K comparable, T any](sc *Subtask, e *Edge, key func(*T) K, enc func([]byte, *K) []byte) Push[T] {
	cfg := sc.job.env.cfg
	w := shuffle.NewWriter(sc, e.offset+sc.subtask, sc.job.inboxes[e.to], e.pool, key, enc, cfg.MaxParallelism, cfg.BatchSize, &sc.shuffled)
	// A batch waits for at most as many records of the subtask as fill
	// one batch of every receiver: never, for a subtask with one output
	// whose keys spread evenly.
	w.LimitAge(&sc.pushed, cfg.BatchSize*len(sc.job.inboxes[e.to]))
	sc.outs = append(sc.outs, w)
	return w.Push
}

// Push hands one record, with its event time in nanoseconds (NoTimestamp
// when it has none), to the next operator.
type Push[T any] = shuffle.Push[T]

// KeyedPush hands one record of a keyed stream to the next operator, with
// its key, serialized key and key group.
type KeyedPush[K comparable, T any] = shuffle.KeyedPush[K, T]

// NoTimestamp marks a record without event time.
const NoTimestamp = shuffle.NoTimestamp

// OpenSink opens writer index of total of sink entry in subtask sc (the
// subtask's index and its stage's parallelism, unless a union of stages
// feeds the sink), which the subtask pre-commits at each barrier and
// closes at its end.
func OpenSink[T any](sc *Subtask, entry *SinkEntry, sink connector.Sink[T], index, total int) (connector.SinkWriter[T], error) {
	w, err := sink.OpenWriter(sc.ctx, index, total)
	if err != nil {
		return nil, fmt.Errorf("eddy: sink %s writer %d of %d: %w", entry.name, index, total, err)
	}
	sc.sinks = append(sc.sinks, sinkHandle{entry: entry, w: w})
	return w, nil
}

// keyGroups is the key-group range of subtask sc of a keyed stage.
func (sc *Subtask) keyGroups() (int, int) {
	return state.KeyGroupRange(sc.job.env.cfg.MaxParallelism, sc.par, sc.subtask)
}

// Index is the subtask's number within its stage.
func (sc *Subtask) Index() int { return sc.subtask }

// Parallelism is the number of subtasks of the subtask's stage.
func (sc *Subtask) Parallelism() int { return sc.par }

// Context is the context of the subtask's attempt.
func (sc *Subtask) Context() context.Context { return sc.ctx }

// CountOut counts one record written to a sink.
func (sc *Subtask) CountOut() { sc.recordsOut++ }

// LateRecords is the subtask's counter of records that came after their
// windows were gone.
func (sc *Subtask) LateRecords() *int64 { return &sc.lateRecords }

// DroppedRecords is the subtask's counter of late records dropped because
// nothing consumes the Late side output.
func (sc *Subtask) DroppedRecords() *int64 { return &sc.dropped }

// NumSources is the number of sources of the graph.
func (g *Graph) NumSources() int { return len(g.sources) }

// Stage is the stage the subtask belongs to.
func (sc *Subtask) Stage() *Stage { return sc.st }
