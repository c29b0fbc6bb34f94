package eddy

import (
	"reflect"

	"github.com/eddyflow/eddy/internal/graph"
)

// Options of the parts of a job are typed by where they apply, so that one
// that means nothing where it is passed does not compile: WithParallelism
// is a SourceOption and a KeyByOption, not an OperatorOption (a keyed
// operator runs in the stage its KeyBy starts).

// SourceOption configures FromSource: WithParallelism, Named, UID,
// Watermarks.
type SourceOption interface{ applySource(*sourceConfig) }

// KeyByOption configures KeyBy: WithParallelism.
type KeyByOption interface{ applyKeyBy(*keyByConfig) }

// OperatorOption configures a keyed operator (Process, Reduce): Named, UID.
type OperatorOption interface{ applyOperator(*opConfig) }

// SinkOption configures ToSink: Named, UID.
type SinkOption interface{ applySink(*sinkConfig) }

// WindowOption configures a window operator: AllowedLateness, Named, UID.
type WindowOption interface{ applyWindow(*windowConfig) }

// identity is what Named and UID set: the display name and the id.
type identity struct {
	name, uid string
}

// id returns the id of a checkpointed part of the job and how it was
// chosen: its UID, else its Named name, else derived (from derivedHow).
func (i identity) id(derived, derivedHow string) (id, how string) {
	switch {
	case i.uid != "":
		return i.uid, "eddy.UID"
	case i.name != "":
		return i.name, "eddy.Named"
	}
	return derived, derivedHow
}

type sourceConfig struct {
	identity
	parallelism int
	watermarks  any // *watermarkSpec[T] of the source's record type
	reuse       bool
}

type keyByConfig struct{ parallelism int }

type opConfig struct{ identity }

type sinkConfig struct{ identity }

// parallelismOption is WithParallelism.
type parallelismOption int

func (p parallelismOption) applySource(c *sourceConfig) { c.parallelism = int(p) }
func (p parallelismOption) applyKeyBy(c *keyByConfig)   { c.parallelism = int(p) }

// WithParallelism sets the number of subtasks of a source, or of the keyed
// stage a KeyBy starts (its keyed operators and what follows them up to the
// next KeyBy or sink run there).
func WithParallelism(n int) interface {
	SourceOption
	KeyByOption
} {
	return parallelismOption(n)
}

// reuseOption is ReuseRecords.
type reuseOption struct{}

func (reuseOption) applySource(c *sourceConfig) { c.reuse = true }

// ReuseRecords lets the source's readers reuse the memory of the records
// they returned (connector.SplitReader.Next gets the previous record back)
// instead of filling a zeroed record each time, which must then own new
// memory: Flink's object reuse, for sources whose records point to memory
// (strings aside, which are immutable) that a reader would otherwise
// allocate per record. A record is then valid only during the call that
// receives it, so the source's stream may be consumed by Map and FlatMap
// only, whose functions must copy what they keep or emit rather than keep
// a pointer into the record; Run refuses any other consumer (a KeyBy, a
// sink, a Filter), since those keep records past the call.
func ReuseRecords() SourceOption { return reuseOption{} }

// idOption is Named or UID.
type idOption struct {
	s   string
	uid bool
}

func (o idOption) set(i *identity) {
	if o.uid {
		i.uid = o.s
	} else {
		i.name = o.s
	}
}

func (o idOption) applySource(c *sourceConfig) { o.set(&c.identity) }
func (o idOption) applyOperator(c *opConfig)   { o.set(&c.identity) }
func (o idOption) applySink(c *sinkConfig)     { o.set(&c.identity) }
func (o idOption) applyWindow(c *windowConfig) { o.set(&c.identity) }

// IDOption is an option of every checkpointed part of a job: a source, a
// keyed or window operator, a sink.
type IDOption interface {
	SourceOption
	OperatorOption
	SinkOption
	WindowOption
}

// Named gives a part of the job a name, shown in errors and logs. Unless
// UID is given too, the name is also its id: what its state, positions or
// transactions are stored under in checkpoints. Name stateful operators
// whose position in the job may change.
func Named(name string) IDOption { return idOption{s: name} }

// UID gives a checkpointed part of the job (source, keyed or window
// operator, sink) its id in checkpoints, like Flink's uid: keep it when the
// job changes so a resumed job finds its state. Without UID or Named the id
// is derived: a source's and a sink's from the connector's Name (a path in
// it canonicalized), a keyed operator's from its kind and position in the
// job. Two parts with one id are an error from Run that names both.
func UID(id string) IDOption { return idOption{s: id, uid: true} }

// node records a checkpointed part of the job for the identity check.
func (e *Env) node(kind, id, how, typ string) {
	e.nodes = append(e.nodes, graph.Node{Kind: kind, ID: id, How: how, Type: typ, Place: graph.Place()})
}

// typeName names T for a job's fingerprint.
func typeName[T any]() string { return reflect.TypeFor[T]().String() }

// Operator is a checkpointed part of a job's graph, as Describe lists it.
type Operator struct {
	Kind  string // "source", "keyed operator", "window operator", "sink", ...
	ID    string // what checkpoints store it under
	Types string // its record types
}

// Describe returns the checkpointed parts of the job's graph (its sources,
// keyed and window operators and sinks), in the order they were declared,
// and its max parallelism: what a restore checks the job against, which
// the processes of one job running its tasks must share.
func (e *Env) Describe() (ops []Operator, maxParallelism int) {
	for _, n := range e.nodes {
		ops = append(ops, Operator{Kind: n.Kind, ID: n.ID, Types: n.Type})
	}
	return ops, e.cfg.MaxParallelism
}
