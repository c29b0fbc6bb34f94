package demojob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/internal/graph"
	"github.com/eddyflow/eddy/state"
)

// The random job-graph test: TestRandomGraphs generates job graphs from a
// seed, predicts from each graph's spec whether two of its checkpointed
// parts share an id, and checks that Run agrees; a graph that builds is run
// once uninterrupted for the reference, then again in a subprocess that is
// SIGKILLed and resumed, and must commit exactly the reference.

const (
	graphSeedEnv   = "EDDY_RANDOMGRAPH_SEED"   // replays a run of TestRandomGraphs
	graphCountEnv  = "EDDY_RANDOMGRAPH_GRAPHS" // how many graphs to run (default 6)
	graphHelperEnv = "EDDY_RANDOMGRAPH_HELPER" // the JSON graphRun of TestHelperRandomGraph
	// graphSpecEnv runs the graphSpec (JSON, as logged) in place of every
	// generated graph, to study a failing one.
	graphSpecEnv = "EDDY_RANDOMGRAPH_SPEC"
)

// graphSpec describes a job graph; it is JSON so that the subprocess builds
// exactly the graph the test generated.
type graphSpec struct {
	Sources []*sourceSpec `json:"sources"`
	// Changelog runs the graph with the changelog state backend,
	// materializing every this many ms; 0: the default backend.
	ChangelogMs int `json:"changelog_ms,omitempty"`
	// Pebble keeps the keyed state in Pebble databases (in a directory
	// next to the checkpoints) instead of the heap.
	Pebble bool `json:"pebble,omitempty"`
}

// sourceSpec is a datagen.GPS source and what consumes it. Each consumer
// gets its own Map to grec, so the source's stream itself fans out when it
// has several.
type sourceSpec struct {
	Seed    uint64 `json:"seed"`
	Events  int64  `json:"events"`
	Drivers int    `json:"drivers"`
	Splits  int    `json:"splits"`
	// Rate limits the source in the killed runs, so that they last long
	// enough to be killed after a checkpoint; the reference runs unlimited.
	Rate float64 `json:"rate"`
	Par  int     `json:"par,omitempty"` // eddy.WithParallelism; 0: the environment's
	// EventTime gives the source eddy.Watermarks on the points' Timestamp,
	// DelayMs behind, aligned within AlignMs when that is not 0.
	EventTime bool        `json:"event_time,omitempty"`
	DelayMs   int         `json:"delay_ms,omitempty"`
	AlignMs   int         `json:"align_ms,omitempty"`
	ID        idSpec      `json:"id"`
	Out       []*nodeSpec `json:"out"`
}

// idSpec is the eddy.Named and eddy.UID of a checkpointed part; empty
// strings mean none.
type idSpec struct {
	Named string `json:"named,omitempty"`
	UID   string `json:"uid,omitempty"`
	// ViaOp passes them to a window operator through eddy.WindowOp.
	ViaOp bool `json:"via_op,omitempty"`
}

// The kinds of nodeSpec. Map, filter, keyBy and sink consume a stream;
// reduce, process and window consume the keyed stream of their parent keyBy.
const (
	kindMap     = "map"
	kindFilter  = "filter"
	kindKeyBy   = "keyBy"
	kindSink    = "sink"
	kindReduce  = "reduce"
	kindProcess = "process"
	kindWindow  = "window"
)

// nodeSpec is one operator of the graph and its consumers.
type nodeSpec struct {
	Kind string `json:"kind"`
	Fn   int    `json:"fn,omitempty"`  // map, filter, keyBy, reduce: the index in its table
	Par  int    `json:"par,omitempty"` // keyBy: eddy.WithParallelism; 0: none
	ID   idSpec `json:"id"`            // reduce, process, window, sink
	// Win is a window's assigner, fold and lateness.
	Win *winSpec `json:"win,omitempty"`
	// Sink numbers a sink; it writes into the directory sink-<Sink>.
	Sink int `json:"sink,omitempty"`
	// Late is a sink of a window's Late stream; nil leaves it unconsumed.
	Late *nodeSpec   `json:"late,omitempty"`
	Out  []*nodeSpec `json:"out,omitempty"`
}

// winSpec is a window operator.
type winSpec struct {
	Assign     string `json:"assign"` // tumbling, sliding, session
	SizeMs     int64  `json:"size_ms"`
	SlideMs    int64  `json:"slide_ms,omitempty"`
	Fold       string `json:"fold"` // aggregate, reduce, process
	LatenessMs int64  `json:"lateness_ms,omitempty"`
}

// grec is the record of every stream of a random graph after its source.
// K is a driver id, or a key derived from one; the other fields are numbers
// the operators compute, all integers so that output lines compare exactly.
type grec struct {
	K   string `json:"k" proto:"1"`
	Seq int64  `json:"seq" proto:"2"`
	X   int64  `json:"x" proto:"3"`
	N   int64  `json:"n" proto:"4"`
	W   int64  `json:"w,omitempty" proto:"5"` // window results: the window's end, Unix ms
}

func toGrec(p *datagen.GPSPoint) grec {
	return grec{K: p.DriverID, Seq: p.Timestamp.UnixMilli(), X: int64(p.SpeedKmh * 10), N: 1}
}

// bucket coarsens a key to one of ten: the keys of many drivers, from many
// splits, share a bucket.
func bucket(k string) string {
	if k == "" {
		return "bucket-"
	}
	return "bucket-" + k[len(k)-1:]
}

func keyHash(k string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(k))
	return h.Sum32()
}

// order is what is deterministic about a stream, whatever the parallelism,
// kills and timing; the generator places an operator only where its
// output stays deterministic.
//
// A datagen source's stream has all three: a driver comes from one split,
// in order, with its timestamps. Map and Filter keep them, except the Map
// that changes K, which merges the sequences of many drivers from many
// splits. A Reduce emits running results, which depend on the order of its
// key's records: it only consumes a stream keyed by K whose values per K are
// in order. The count Process takes any input (its outputs per key are
// 1..n); but it pairs count n with the event time of the key's n-th record,
// so that pairing is deterministic only if the key's (record, time)
// sequence is. Windows fold commutatively (counts, sums, maxima), so they
// need the set of (record, time) pairs and nothing more; each key's results
// leave one subtask in window order, with the window's end as event time.
// Windows also need no record to be late: a datagen source's splits are in
// event-time order, so no record falls behind the watermark, whatever the
// interleaving.
//
// Excluded for that reason: datagen.LateEvery and eddy.IdleAfter (whether
// a record is late would depend on when the watermark moved in that run),
// processing-time timers, and operators emitting record fields or event
// times from a stream whose order is not deterministic.
type order struct {
	// seq: each value of K reaches a consumer from one subtask, as one
	// sequence of (record, event time).
	seq bool
	// values: the same for the records alone, their event times aside.
	values bool
	// timed: the set of (record, event time) pairs is deterministic.
	timed bool
}

// sourceOrder is the order of a datagen source's stream.
var sourceOrder = order{seq: true, values: true, timed: true}

// allows reports whether a keyed operator of kind, on a stream of order o
// keyed by graphKeys[key], emits a deterministic output.
func (o order) allows(kind string, key int) bool {
	switch kind {
	case kindReduce:
		return o.values && key == 0
	case kindWindow:
		return o.timed
	}
	return true // the count Process
}

// after returns the order of the output of n, a consumer of a stream of
// order o; key is the index of the KeyBy function feeding a keyed
// operator.
func (o order) after(n *nodeSpec, key int) order {
	switch n.Kind {
	case kindMap:
		if !graphMaps[n.Fn].keepsK {
			return order{timed: o.timed}
		}
	case kindReduce:
		return order{seq: o.seq, values: true, timed: o.seq}
	case kindProcess:
		byK := o.seq && key == 0
		return order{seq: byK, values: true, timed: byK}
	case kindWindow:
		return sourceOrder
	}
	return o
}

// graphMaps are the Map functions; keepsK says whether the map leaves K
// alone.
var graphMaps = []struct {
	keepsK bool
	fn     func(*grec) grec
}{
	{true, func(r *grec) grec { o := *r; o.X = o.X*3 + 1; return o }},
	{true, func(r *grec) grec { o := *r; o.Seq %= 100_000; o.N++; return o }},
	{false, func(r *grec) grec { o := *r; o.K = bucket(o.K); return o }},
}

var graphFilters = []func(*grec) bool{
	func(r *grec) bool { return r.X%2 == 0 },
	func(r *grec) bool { return r.Seq%3 != 0 },
	func(r *grec) bool { return keyHash(r.K)%4 != 0 }, // drops whole keys
}

// graphKeys are the KeyBy functions; index 0 keys by K itself.
var graphKeys = []func(*grec) string{
	func(r *grec) string { return r.K },
	func(r *grec) string { return bucket(r.K) },
}

// graphReducers are the Reduce functions: order-sensitive (Seq is the
// latest record's).
var graphReducers = []func(acc, x grec) grec{
	func(acc, x grec) grec { return grec{K: acc.K, Seq: x.Seq, X: acc.X + x.X, N: acc.N + x.N} },
	func(acc, x grec) grec { return grec{K: acc.K, Seq: x.Seq, X: max(acc.X, x.X), N: acc.N + 1} },
}

// foldWindow is ReduceWindows' function: commutative and associative, so a
// window's result does not depend on the order of its records.
func foldWindow(a, b grec) grec {
	return grec{K: min(a.K, b.K), Seq: max(a.Seq, b.Seq), X: a.X + b.X, N: a.N + b.N}
}

// winAcc is AggregateWindows' accumulator.
type winAcc struct {
	N   int64 `proto:"1"`
	X   int64 `proto:"2"`
	Seq int64 `proto:"3"`
}

var winAggregator = eddy.Aggregator[string, grec, winAcc, grec]{
	Add: func(a winAcc, r *grec) winAcc { return winAcc{N: a.N + 1, X: a.X + r.X, Seq: max(a.Seq, r.Seq)} },
	Merge: func(a, b winAcc) winAcc {
		return winAcc{N: a.N + b.N, X: a.X + b.X, Seq: max(a.Seq, b.Seq)}
	},
	Result: func(k string, w eddy.Window, a winAcc) grec {
		return grec{K: k, Seq: w.Start.UnixMilli(), W: w.End.UnixMilli(), X: a.X, N: a.N}
	},
}

func processWindow(k string, w eddy.Window, recs []grec, emit func(grec)) error {
	var x int64
	for _, r := range recs {
		x += r.X
	}
	emit(grec{K: k, Seq: w.Start.UnixMilli(), W: w.End.UnixMilli(), X: x, N: int64(len(recs))})
	return nil
}

// countFn counts each key's records in a Value state and emits the count.
type countFn struct {
	n *state.Value[int64]
}

func (f *countFn) Open(ctx *eddy.OpenContext) error {
	var err error
	f.n, err = state.NewValue[int64](ctx.State, "count")
	return err
}

func (f *countFn) Process(ctx *eddy.Context[string, grec], _ *grec) error {
	n, _ := f.n.Get()
	n++
	f.n.Update(n)
	ctx.Emit(grec{K: ctx.Key, Seq: n, N: n})
	return nil
}

// namePool is small so that names collide in a good share of graphs.
var namePool = []string{"a", "b", "c"}

// graphGen generates a graphSpec.
type graphGen struct {
	rng    *rand.Rand
	naming float64 // the probability that a part gets a Named or UID
	budget int     // operators left to place under the current source
	sinks  int
	window bool // a window under the current source: it needs event time
}

func genGraph(rng *rand.Rand) *graphSpec {
	g := &graphGen{rng: rng, naming: []float64{0, 0.08, 0.15, 0.3}[rng.IntN(4)]}
	spec := &graphSpec{}
	if rng.IntN(4) == 0 {
		spec.ChangelogMs = 50 + rng.IntN(150)
	} else {
		spec.Pebble = rng.IntN(3) == 0
	}
	// Each run without kills lasts about this long at the sources' rates.
	target := 0.7 + 0.6*rng.Float64()
	for i := range []int{1, 1, 1, 2, 2, 3}[rng.IntN(6)] {
		s := &sourceSpec{
			Seed:    rng.Uint64() % 1000,
			Events:  3000 + rng.Int64N(17_000),
			Drivers: []int{3, 12, 50, 200}[rng.IntN(4)],
			Splits:  1 + rng.IntN(8),
			ID:      g.id(),
		}
		if rng.IntN(2) == 0 {
			// What a job with several sources of one connector must do;
			// without it, they collide on the connector's name.
			s.ID.UID = fmt.Sprintf("gps-%d", i)
		}
		s.Rate = float64(s.Events) / target
		if rng.IntN(5) == 0 {
			s.Par = 1 + rng.IntN(3)
		}
		g.budget, g.window = 2+rng.IntN(5), false
		s.Out = g.kids(0, sourceOrder)
		if g.window || rng.IntN(3) == 0 {
			s.EventTime = true
			s.DelayMs = []int{0, 20, 500}[rng.IntN(3)]
			if rng.IntN(2) == 0 {
				s.AlignMs = []int{1000, 10_000}[rng.IntN(2)]
			}
		}
		spec.Sources = append(spec.Sources, s)
	}
	return spec
}

// id draws a part's Named and UID from the pool, or none.
func (g *graphGen) id() idSpec {
	var id idSpec
	if g.rng.Float64() < g.naming {
		id.Named = namePool[g.rng.IntN(len(namePool))]
	}
	if g.rng.Float64() < g.naming {
		id.UID = namePool[g.rng.IntN(len(namePool))]
	}
	return id
}

// kids returns the consumers of a stream: usually one, two for a fan-out.
func (g *graphGen) kids(depth int, o order) []*nodeSpec {
	n := 1
	if g.budget > 0 && g.rng.IntN(4) == 0 {
		n = 2
	}
	out := make([]*nodeSpec, n)
	for i := range out {
		out[i] = g.node(depth, o)
	}
	return out
}

func (g *graphGen) node(depth int, o order) *nodeSpec {
	if depth >= 5 || g.budget <= 0 {
		return g.sink()
	}
	g.budget--
	switch r := g.rng.IntN(10); {
	case r < 2:
		n := &nodeSpec{Kind: kindMap, Fn: g.rng.IntN(len(graphMaps))}
		n.Out = g.kids(depth+1, o.after(n, 0))
		return n
	case r < 4:
		n := &nodeSpec{Kind: kindFilter, Fn: g.rng.IntN(len(graphFilters))}
		n.Out = g.kids(depth+1, o.after(n, 0))
		return n
	case r < 9:
		return g.keyBy(depth, o)
	}
	g.budget++
	return g.sink()
}

func (g *graphGen) sink() *nodeSpec {
	g.sinks++
	return &nodeSpec{Kind: kindSink, Sink: g.sinks, ID: g.id()}
}

// keyBy returns a KeyBy with one keyed operator, or two on the same keyed
// stream.
func (g *graphGen) keyBy(depth int, o order) *nodeSpec {
	n := &nodeSpec{Kind: kindKeyBy, Fn: g.rng.IntN(len(graphKeys))}
	if g.rng.IntN(4) == 0 {
		n.Par = 1 + g.rng.IntN(3)
	}
	ops := 1
	if g.budget > 0 && g.rng.IntN(4) == 0 {
		ops = 2
		g.budget--
	}
	for range ops {
		var kinds []string
		for _, k := range []string{kindProcess, kindWindow, kindWindow, kindReduce, kindReduce} {
			if o.allows(k, n.Fn) {
				kinds = append(kinds, k)
			}
		}
		op := &nodeSpec{Kind: kinds[g.rng.IntN(len(kinds))], ID: g.id()}
		switch op.Kind {
		case kindReduce:
			op.Fn = g.rng.IntN(len(graphReducers))
		case kindWindow:
			g.window = true
			op.Win = g.win()
			op.ID.ViaOp = g.rng.IntN(2) == 0
			if g.rng.IntN(5) == 0 {
				op.Late = g.sink() // empty: no record is ever late
			}
		}
		op.Out = g.kids(depth+1, o.after(op, n.Fn))
		n.Out = append(n.Out, op)
	}
	return n
}

func (g *graphGen) win() *winSpec {
	w := &winSpec{Fold: []string{"aggregate", "reduce", "process"}[g.rng.IntN(3)]}
	switch g.rng.IntN(3) {
	case 0:
		w.Assign, w.SizeMs = "tumbling", []int64{1000, 2000, 5000, 10_000}[g.rng.IntN(4)]
	case 1:
		w.Assign, w.SizeMs = "sliding", []int64{2000, 4000, 10_000}[g.rng.IntN(3)]
		w.SlideMs = w.SizeMs / []int64{1, 2, 4}[g.rng.IntN(3)]
	default:
		w.Assign, w.SizeMs = "session", []int64{100, 500, 2000}[g.rng.IntN(3)]
	}
	if g.rng.IntN(4) == 0 {
		w.LatenessMs = []int64{100, 3000}[g.rng.IntN(2)]
	}
	return w
}

// predictDuplicate walks g in the order buildGraph declares its
// checkpointed parts and returns the first two that share an id, as Run
// should report them (places aside), or nil. An id is the UID, else the
// Named name, else derived: "datagen-gps" for an unnamed source; an
// unnamed keyed or window operator's carries its position in the job and
// an unnamed sink's its own directory, so those are unique and left out
// (no pool name looks like one).
func predictDuplicate(g *graphSpec) *graph.DuplicateIDError {
	seen := map[string]graph.Node{}
	var dup *graph.DuplicateIDError
	note := func(kind string, id idSpec, derived string) {
		n := graph.Node{Kind: kind, ID: id.UID, How: "eddy.UID"}
		switch {
		case n.ID != "":
		case id.Named != "":
			n.ID, n.How = id.Named, "eddy.Named"
		case derived != "":
			n.ID, n.How = derived, "the connector's Name"
		default:
			return
		}
		if first, ok := seen[n.ID]; ok && dup == nil {
			dup = &graph.DuplicateIDError{ID: n.ID, First: first, Second: n}
		}
		if _, ok := seen[n.ID]; !ok {
			seen[n.ID] = n
		}
	}
	var walk func(n *nodeSpec)
	walk = func(n *nodeSpec) {
		switch n.Kind {
		case kindReduce, kindProcess:
			note("keyed operator", n.ID, "")
		case kindWindow:
			note("window operator", n.ID, "")
		case kindSink:
			note("sink", n.ID, "")
		}
		for _, k := range n.Out {
			walk(k)
		}
		if n.Late != nil {
			walk(n.Late)
		}
	}
	for _, s := range g.Sources {
		note("source", s.ID, "datagen-gps")
		for _, n := range s.Out {
			walk(n)
		}
	}
	return dup
}

// sinkDirs lists the sink directories of g under out, by sink number.
func sinkDirs(g *graphSpec, out string) map[int]string {
	dirs := map[int]string{}
	var walk func(n *nodeSpec)
	walk = func(n *nodeSpec) {
		if n.Kind == kindSink {
			dirs[n.Sink] = filepath.Join(out, fmt.Sprintf("sink-%d", n.Sink))
		}
		for _, k := range n.Out {
			walk(k)
		}
		if n.Late != nil {
			walk(n.Late)
		}
	}
	for _, s := range g.Sources {
		for _, n := range s.Out {
			walk(n)
		}
	}
	return dirs
}

// sinkPath describes the path from a source to sink n of g, for failure
// messages: "source 1 > keyBy 0 > reduce 0 > sink 4".
func sinkPath(g *graphSpec, n int) string {
	var path []string
	var walk func(nd *nodeSpec) bool
	walk = func(nd *nodeSpec) bool {
		step := fmt.Sprintf("%s %d", nd.Kind, nd.Fn)
		switch nd.Kind {
		case kindSink:
			step = fmt.Sprintf("sink %d", nd.Sink)
		case kindProcess:
			step = "process"
		case kindWindow:
			step = fmt.Sprintf("window %s %d/%d %s", nd.Win.Assign, nd.Win.SizeMs, nd.Win.SlideMs, nd.Win.Fold)
		}
		path = append(path, step)
		if nd.Kind == kindSink && nd.Sink == n {
			return true
		}
		for _, k := range nd.Out {
			if walk(k) {
				return true
			}
		}
		if nd.Late != nil {
			path = append(path, "late")
			if walk(nd.Late) {
				return true
			}
			path = path[:len(path)-1]
		}
		path = path[:len(path)-1]
		return false
	}
	for i, s := range g.Sources {
		path = []string{fmt.Sprintf("source %d", i)}
		for _, nd := range s.Out {
			if walk(nd) {
				return strings.Join(path, " > ")
			}
		}
	}
	return "?"
}

// idOpts turns an idSpec into the options of one part: O is
// eddy.SourceOption, OperatorOption, WindowOption or SinkOption, all of
// which Named's and UID's IDOption implements.
func idOpts[O any](id idSpec) []O {
	var opts []O
	if id.Named != "" {
		opts = append(opts, any(eddy.Named(id.Named)).(O))
	}
	if id.UID != "" {
		opts = append(opts, any(eddy.UID(id.UID)).(O))
	}
	return opts
}

// graphBuilder adds a graphSpec to an environment.
type graphBuilder struct {
	out   string // sink directories are under out
	rated bool   // apply the sources' rate limits
}

func buildGraph(env *eddy.Env, g *graphSpec, out string, rated bool) {
	b := graphBuilder{out: out, rated: rated}
	for _, s := range g.Sources {
		gen := []datagen.Option{datagen.Seed(s.Seed), datagen.Events(s.Events), datagen.Drivers(s.Drivers), datagen.Splits(s.Splits)}
		if rated {
			gen = append(gen, datagen.Rate(s.Rate))
		}
		opts := idOpts[eddy.SourceOption](s.ID)
		if s.Par > 0 {
			opts = append(opts, eddy.WithParallelism(s.Par))
		}
		if s.EventTime {
			var wopts []eddy.WatermarkOption
			if s.AlignMs > 0 {
				wopts = append(wopts, eddy.AlignWatermarks(time.Duration(s.AlignMs)*time.Millisecond))
			}
			opts = append(opts, eddy.Watermarks(func(p *datagen.GPSPoint) time.Time { return p.Timestamp },
				time.Duration(s.DelayMs)*time.Millisecond, wopts...))
		}
		points := eddy.FromSource(env, datagen.GPS(gen...), opts...)
		for _, n := range s.Out {
			b.stream(eddy.Map(points, toGrec), n)
		}
	}
}

func (b graphBuilder) stream(s *eddy.Stream[grec], n *nodeSpec) {
	switch n.Kind {
	case kindMap:
		s = eddy.Map(s, graphMaps[n.Fn].fn)
	case kindFilter:
		s = eddy.Filter(s, graphFilters[n.Fn])
	case kindKeyBy:
		var opts []eddy.KeyByOption
		if n.Par > 0 {
			opts = append(opts, eddy.WithParallelism(n.Par))
		}
		ks := eddy.KeyBy(s, graphKeys[n.Fn], opts...)
		for _, op := range n.Out {
			b.keyed(ks, op)
		}
		return
	case kindSink:
		dir := filepath.Join(b.out, fmt.Sprintf("sink-%d", n.Sink))
		eddy.ToSink(s, file.JSONLines[grec](dir), idOpts[eddy.SinkOption](n.ID)...)
		return
	default:
		panic("randomgraph: a " + n.Kind + " consumes a keyed stream")
	}
	for _, k := range n.Out {
		b.stream(s, k)
	}
}

func (b graphBuilder) keyed(ks *eddy.KeyedStream[string, grec], n *nodeSpec) {
	var out, late *eddy.Stream[grec]
	switch n.Kind {
	case kindReduce:
		out = eddy.Reduce(ks, graphReducers[n.Fn], idOpts[eddy.OperatorOption](n.ID)...)
	case kindProcess:
		out = eddy.Process[string, grec, grec](ks, &countFn{}, idOpts[eddy.OperatorOption](n.ID)...)
	case kindWindow:
		w := windowOf(ks, n)
		out, late = w.Results, w.Late
	default:
		panic("randomgraph: a " + n.Kind + " does not consume a keyed stream")
	}
	for _, k := range n.Out {
		b.stream(out, k)
	}
	if n.Late != nil {
		b.stream(late, n.Late)
	}
}

func windowOf(ks *eddy.KeyedStream[string, grec], n *nodeSpec) eddy.Windowed[grec, grec] {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	var w eddy.Windows
	switch n.Win.Assign {
	case "tumbling":
		w = eddy.Tumbling(ms(n.Win.SizeMs))
	case "sliding":
		w = eddy.Sliding(ms(n.Win.SizeMs), ms(n.Win.SlideMs))
	default:
		w = eddy.Session(ms(n.Win.SizeMs))
	}
	var opts []eddy.WindowOption
	if n.ID.ViaOp {
		opts = append(opts, eddy.WindowOp(idOpts[eddy.OperatorOption](n.ID)...))
	} else {
		opts = idOpts[eddy.WindowOption](n.ID)
	}
	if n.Win.LatenessMs > 0 {
		opts = append(opts, eddy.AllowedLateness(ms(n.Win.LatenessMs)))
	}
	switch n.Win.Fold {
	case "aggregate":
		return eddy.AggregateWindows(ks, w, winAggregator, opts...)
	case "reduce":
		return eddy.ReduceWindows(ks, w, foldWindow, opts...)
	}
	return eddy.ProcessWindows(ks, w, processWindow, opts...)
}

// graphRun is one run of a graph, in process or in TestHelperRandomGraph.
type graphRun struct {
	Graph       *graphSpec    `json:"graph"`
	Data        string        `json:"data"`
	Out         string        `json:"out"`
	Parallelism int           `json:"parallelism"`
	Interval    time.Duration `json:"interval"`
	Rated       bool          `json:"rated"`
}

func (r graphRun) env(opts ...eddy.Option) *eddy.Env {
	base := []eddy.Option{eddy.JobName("randomgraph"), eddy.Checkpoints(r.Data, r.Interval), eddy.Parallelism(r.Parallelism)}
	if r.Graph.ChangelogMs > 0 {
		base = append(base, eddy.Changelog(time.Duration(r.Graph.ChangelogMs)*time.Millisecond))
	}
	if r.Graph.Pebble {
		base = append(base, eddy.StateBackend(eddy.Pebble(r.Data+"-pebble")))
	}
	env := eddy.New(append(base, opts...)...)
	buildGraph(env, r.Graph, r.Out, r.Rated)
	return env
}

// TestHelperRandomGraph is not a test: it is the body of the subprocess
// that TestRandomGraphs starts and kills. It runs the graphRun in
// $EDDY_RANDOMGRAPH_HELPER and exits 0 once the job has finished, 1 on any
// error. Without the variable it returns at once.
func TestHelperRandomGraph(t *testing.T) {
	raw := os.Getenv(graphHelperEnv)
	if raw == "" {
		return
	}
	var r graphRun
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		fmt.Fprintf(os.Stderr, "helper: bad run: %v\n", err)
		os.Exit(2)
	}
	// No restarts inside the process: a failure must surface as exit code
	// 1, not be retried and hidden.
	if err := r.env(eddy.LogOutput(os.Stderr), eddy.Restarts(0, 0)).Run(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "helper: run: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runGraphChild runs r in a subprocess until it exits, or until kill
// (polled every 2 ms) says to SIGKILL it. It fails the test if the process
// exits with an error.
func runGraphChild(t *testing.T, r graphRun, kill func(now time.Time) bool) procResult {
	t.Helper()
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRandomGraph$", "-test.count=1")
	cmd.Env = append(os.Environ(), graphHelperEnv+"="+string(raw))
	var out bytes.Buffer
	cmd.Stderr, cmd.Stdout = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	hung := time.After(2 * time.Minute)
	var res procResult
wait:
	for {
		select {
		case res.exitErr = <-exited:
			break wait
		case now := <-tick.C:
			if kill == nil || !kill(now) {
				continue
			}
			if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				t.Fatal(err)
			}
			res.exitErr = <-exited
			// It may have exited by itself just before the kill.
			var ee *exec.ExitError
			res.killed = errors.As(res.exitErr, &ee) && !ee.Exited()
			break wait
		case <-hung:
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("helper process hung; its output:\n%s", out.String())
		}
	}
	res.duration, res.stderr = time.Since(start), out.String()
	if !res.killed && res.exitErr != nil {
		t.Fatalf("helper process failed (%v) with parallelism %d; its output:\n%s", res.exitErr, r.Parallelism, res.stderr)
	}
	return res
}

// committedSinks reads the committed lines of every sink of g under out,
// sorted, by sink number.
func committedSinks(t *testing.T, g *graphSpec, out string) map[int][]string {
	t.Helper()
	sinks := map[int][]string{}
	for n, dir := range sinkDirs(g, out) {
		lines := committedLines(t, dir)
		slices.Sort(lines)
		sinks[n] = lines
	}
	return sinks
}

// lineDiff says how got differs from want, both sorted: the lines extra
// and missing, the first three of each; "" if they are equal.
func lineDiff(got, want []string) string {
	var extra, missing []string
	i, j := 0, 0
	for i < len(got) || j < len(want) {
		switch {
		case j == len(want) || (i < len(got) && got[i] < want[j]):
			extra = append(extra, got[i])
			i++
		case i == len(got) || want[j] < got[i]:
			missing = append(missing, want[j])
			j++
		default:
			i++
			j++
		}
	}
	if len(extra) == 0 && len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("%d lines, want %d: %d extra %v, %d missing %v",
		len(got), len(want), len(extra), head3(extra), len(missing), head3(missing))
}

// TestRandomGraphs is the metamorphic test over random job graphs: DAGs of
// sources, maps, filters, key-bys, keyed processes, reduces, windows and
// sinks, with names drawn from a small pool so that ids collide in a good
// share of them. Each graph either fails to build with ErrDuplicateID,
// exactly when the test predicts a collision from its spec, or, killed and
// resumed at random, commits exactly the output of an uninterrupted run.
//
// The graphs and the kill schedule come from a logged seed; set
// EDDY_RANDOMGRAPH_SEED to replay it (-run 'TestRandomGraphs/graph-3$' for
// one graph), EDDY_RANDOMGRAPH_GRAPHS to run more graphs than the default
// 6 (not counting those with a duplicate id, at most 4 times as many in
// all), EDDY_RANDOMGRAPH_SPEC to run a logged graph.
func TestRandomGraphs(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocesses killed and resumed: seconds per graph")
	}
	seed := testSeed(t, graphSeedEnv)
	// Graphs that fail on a duplicate id cost nothing: count those that run.
	runs := 6
	if s := os.Getenv(graphCountEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", graphCountEnv, s)
		}
		runs = n
	}
	var graphs, dups, ran, kills, killsAfterCheckpoint int
	for i := 0; ran < runs && i < 4*runs; i++ {
		graphs++
		t.Run(fmt.Sprintf("graph-%d", i), func(t *testing.T) {
			// Per graph, so that one graph replays alone with -run.
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			g := genGraph(rng)
			if raw := os.Getenv(graphSpecEnv); raw != "" {
				g = &graphSpec{}
				if err := json.Unmarshal([]byte(raw), g); err != nil {
					t.Fatalf("%s: %v", graphSpecEnv, err)
				}
			}
			g = roundTrip(t, g)
			spec, _ := json.Marshal(g)
			t.Logf("graph %s", spec)
			dup, ref := checkIdentity(t, g, rng)
			if dup != "" {
				dups++
				return
			}
			ran++
			k, kc := killAndResume(t, g, committedSinks(t, g, ref), rng)
			kills += k
			killsAfterCheckpoint += kc
		})
	}
	t.Logf("%d graphs: %d with a duplicate id, %d run with %d kills (%d with a checkpoint on disk)",
		graphs, dups, ran, kills, killsAfterCheckpoint)
	if ran > 0 && killsAfterCheckpoint == 0 && !t.Failed() {
		t.Fatal("no kill landed after a checkpoint: the runs were too short to exercise restore")
	}
}

// roundTrip returns g through JSON, as the subprocess gets it, so that
// every run builds from the same decoded spec.
func roundTrip(t *testing.T, g *graphSpec) *graphSpec {
	t.Helper()
	raw, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	var back graphSpec
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	return &back
}

// checkIdentity runs g once in process, uninterrupted, and checks that it
// fails with ErrDuplicateID exactly when predictDuplicate says so, naming
// the two parts it predicts. It returns the duplicate id, or for a graph
// that builds the directory of its output: the reference (on the heap).
func checkIdentity(t *testing.T, g *graphSpec, rng *rand.Rand) (dup, out string) {
	t.Helper()
	want := predictDuplicate(g)
	dir := t.TempDir()
	// The reference keeps its state on the heap, so that a graph on
	// Pebble is compared with the other backend.
	heap := *g
	heap.Pebble = false
	r := graphRun{Graph: &heap, Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out"),
		Parallelism: 1 + rng.IntN(3), Interval: time.Duration(10+rng.IntN(41)) * time.Millisecond}
	env := r.env(eddy.LogOutput(testWriter{t}))
	// Bounded, so that a graph that hangs (as one with two parts under one
	// id can, should the check let it run) fails instead of timing out.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := env.Run(ctx)
	if want == nil {
		if err != nil {
			t.Fatalf("predicted no duplicate id; Run = %v", err)
		}
		st := env.Stats()
		t.Logf("reference: parallelism %d, interval %v: %d records in, %d out, %d checkpoints, %d late",
			r.Parallelism, r.Interval, st.RecordsIn, st.RecordsOut, st.Checkpoints, st.LateRecords)
		if st.LateRecords != 0 {
			t.Fatalf("%d late records: the generator must not make any (see order)", st.LateRecords)
		}
		return "", r.Out
	}
	if !errors.Is(err, eddy.ErrDuplicateID) {
		t.Fatalf("predicted the id %q of the %s and the %s; Run = %v, want ErrDuplicateID", want.ID, want.First.Kind, want.Second.Kind, err)
	}
	var de *graph.DuplicateIDError
	if !errors.As(err, &de) {
		t.Fatalf("Run = %v, not a *graph.DuplicateIDError", err)
	}
	got := *de
	// Both places are lines of this file's graph builder, where the two
	// parts were declared.
	for _, p := range []string{got.First.Place, got.Second.Place} {
		if !strings.HasPrefix(p, "randomgraph_test.go:") {
			t.Fatalf("Run = %v: place %q is not the line that declared the part", err, p)
		}
	}
	got.First.Place, got.Second.Place = "", ""
	got.First.Type, got.Second.Type = "", ""
	if got != *want {
		t.Fatalf("Run = %v\npredicted the id %q of the %s (%s) and the %s (%s)", err, want.ID,
			want.First.Kind, want.First.How, want.Second.Kind, want.Second.How)
	}
	if _, serr := os.Stat(r.Data); serr == nil {
		t.Fatal("the job touched its checkpoint storage before failing")
	}
	t.Logf("duplicate id %q, as predicted: %v", want.ID, err)
	return want.ID, ""
}

// killAndResume runs g in a fresh directory as a subprocess, SIGKILLs it
// 1-3 times at random moments after a checkpoint, resuming each time with
// a random parallelism, lets the last run finish, and demands the
// reference's committed output, want. It returns the kills, and those with
// a checkpoint on disk.
func killAndResume(t *testing.T, g *graphSpec, want map[int][]string, rng *rand.Rand) (kills, afterCheckpoint int) {
	t.Helper()
	dir := t.TempDir()
	r := graphRun{Graph: g, Data: filepath.Join(dir, "data"), Out: filepath.Join(dir, "out"), Rated: true}
	planned := 1 + rng.IntN(3)
	for run := 0; ; run++ {
		last := run == planned
		r.Parallelism = 1 + rng.IntN(3)
		r.Interval = time.Duration(10+rng.IntN(41)) * time.Millisecond
		// The last run need not last: it runs at full speed.
		r.Rated = !last
		before := maxID(manifestIDs(r.Data))
		// Mostly a while after a checkpoint of the run's own; sometimes,
		// once one is on disk, early, during start-up and restore.
		early := before > 0 && rng.IntN(4) == 0
		delay := time.Duration(rng.IntN(250)) * time.Millisecond
		if early {
			delay = time.Duration(rng.IntN(150)) * time.Millisecond
		}
		var armed time.Time
		var atKill uint64
		kill := func(now time.Time) bool {
			if armed.IsZero() {
				if !early && maxID(manifestIDs(r.Data)) <= before {
					return false
				}
				armed = now
			}
			if now.Sub(armed) < delay {
				return false
			}
			atKill = maxID(manifestIDs(r.Data))
			return true
		}
		if last {
			kill = nil
		}
		res := runGraphChild(t, r, kill)
		t.Logf("run %d: parallelism %d, interval %v, early %v, delay %v: killed %v after %v, restored %v, newest checkpoint %d -> %d",
			run, r.Parallelism, r.Interval, early, delay, res.killed, res.duration.Round(time.Millisecond),
			strings.Contains(res.stderr, "restoring from checkpoint"), before, maxID(manifestIDs(r.Data)))
		if !res.killed {
			if before > 0 && !strings.Contains(res.stderr, "restoring from checkpoint") {
				t.Fatalf("run %d finished without restoring checkpoint %d; its output:\n%s", run, before, res.stderr)
			}
			break // finished
		}
		kills++
		if atKill > 0 {
			afterCheckpoint++
		}
	}
	got := committedSinks(t, g, r.Out)
	dirs := sinkDirs(g, r.Out)
	for _, n := range slices.Sorted(maps.Keys(dirs)) {
		dir := dirs[n]
		if d := lineDiff(got[n], want[n]); d != "" {
			t.Errorf("sink-%d (%s): %s", n, sinkPath(g, n), d)
		} else {
			t.Logf("sink-%d: %d committed lines, as the reference", n, len(want[n]))
		}
		noPending(t, dir)
	}
	return kills, afterCheckpoint
}

// TestRandomGraphGenerator checks the generator without running a graph:
// ids collide in a good share of graphs, but not in most; every kind of
// part and window appears; a window's source has event time; every keyed
// operator is one its input's order allows.
func TestRandomGraphGenerator(t *testing.T) {
	const n = 2000
	rng := rand.New(rand.NewPCG(1, 2))
	dups, unnamedSources := 0, 0
	seen := map[string]int{}
	for range n {
		g := genGraph(rng)
		if predictDuplicate(g) != nil {
			dups++
		}
		// Re-derives every stream's order along the graph, from the rules
		// of order alone.
		var walk func(n *nodeSpec, o order, key int, eventTime bool)
		walk = func(n *nodeSpec, o order, key int, eventTime bool) {
			seen[n.Kind]++
			switch n.Kind {
			case kindKeyBy:
				for _, op := range n.Out {
					walk(op, o, n.Fn, eventTime)
				}
				return
			case kindReduce, kindProcess, kindWindow:
				if !o.allows(n.Kind, key) {
					t.Fatalf("a %s keyed by %d on a stream of order %+v", n.Kind, key, o)
				}
			}
			if n.Kind == kindWindow {
				seen[n.Win.Assign+"/"+n.Win.Fold]++
				if !eventTime {
					t.Fatal("a window under a source without event time")
				}
			}
			out := o.after(n, key)
			for _, k := range n.Out {
				walk(k, out, 0, eventTime)
			}
			if n.Late != nil {
				walk(n.Late, out, 0, eventTime)
			}
		}
		for _, s := range g.Sources {
			if s.ID == (idSpec{}) {
				unnamedSources++
			}
			for _, k := range s.Out {
				walk(k, sourceOrder, 0, s.EventTime)
			}
		}
	}
	t.Logf("%d of %d graphs with a duplicate id; %d unnamed sources; parts %v", dups, n, unnamedSources, seen)
	if dups < n/5 || dups > n*2/3 {
		t.Fatalf("%d of %d graphs with a duplicate id, want a good share but not most", dups, n)
	}
	for _, k := range []string{kindMap, kindFilter, kindKeyBy, kindSink, kindReduce, kindProcess, kindWindow,
		"tumbling/aggregate", "sliding/reduce", "session/process"} {
		if seen[k] == 0 {
			t.Errorf("no %s in %d graphs", k, n)
		}
	}
}
