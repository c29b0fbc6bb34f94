package manifest

import (
	"slices"
	"sort"
	"time"

	"github.com/eddyflow/eddy/checkpoint"
)

// Ack is a subtask's answer to a checkpoint barrier.
type Ack struct {
	Stage, Subtask int
	ID             uint64
	// Source is the id of the source the subtask reads ("" for a
	// subtask of a keyed stage), whose positions are Splits.
	Source      string
	Splits      []checkpoint.SplitState
	Parallelism int // of the subtask's stage
	Parts       []OpPart
	Logs        []OpLog
	Watermarks  []OpWatermark     // of changelog operators
	ExtraFiles  []string          // blobs to keep though no part lists them
	SinkTxns    map[string][]byte // by sink id
	Entries     int64             // keyed state entries
	Bytes       int64             // state bytes written for this checkpoint
	Uploaded    int64             // other bytes uploaded for it (materialized parts, log)
	SyncDur     time.Duration     // time the subtask spent at the barrier
	Barrier     time.Time         // when the barrier reached the subtask
	Err         error
	Fatal       bool // Err means the job must fail over, not only this checkpoint
}

// OpPart is a state part of keyed operator UID.
type OpPart struct {
	UID  string
	Part checkpoint.StatePart
}

// OpLog is a range of the changelog of keyed operator UID.
type OpLog struct {
	UID  string
	Part checkpoint.LogPart
}

// OpWatermark is the watermark of keyed operator UID over some key groups.
type OpWatermark struct {
	UID       string
	Watermark checkpoint.Watermark
}

// Txn is a sink transaction pre-committed at the barrier of checkpoint ID.
type Txn struct {
	ID   uint64
	Data []byte
}

// Result is an assembled checkpoint.
type Result struct {
	Manifest *checkpoint.Manifest
	// Commits are the transactions each sink commits once the manifest is
	// written: those of this checkpoint and of earlier ones that never
	// completed (their records precede this barrier). Also in Manifest.
	Commits map[string][][]byte
	// Pending are the transactions of later checkpoints, which wait.
	Pending map[string][]Txn
	// Bytes and Uploaded sum the acks'; Full is the bytes of every state
	// part and log range the manifest lists; Entries the state entries.
	Bytes, Uploaded, Full, Entries int64
}

// Assemble builds the manifest of checkpoint id of job from the acks of
// all its subtasks and the sink transactions pending so far. Operators are
// recorded with maxParallelism key groups. The result does not depend on
// the order of acks, except for the order of log ranges, which stay in the
// order of each ack (a restored base's log before the log since; the acks
// of different subtasks list disjoint key groups): sources, splits,
// operators, parts, watermarks, files and sinks are sorted.
func Assemble(id uint64, job string, createdAt int64, maxParallelism int, acks []Ack, pending map[string][]Txn) Result {
	r := Result{Manifest: &checkpoint.Manifest{ID: id, Job: job, CreatedAt: createdAt},
		Commits: map[string][][]byte{}, Pending: map[string][]Txn{}}
	m := r.Manifest
	files, keepFiles := map[string]bool{}, map[string]bool{}
	sources := map[string]*checkpoint.SourceState{}
	ops := map[string]*checkpoint.OperatorState{}
	for _, a := range acks {
		r.Bytes += a.Bytes
		r.Entries += a.Entries
		r.Uploaded += a.Uploaded
		for _, f := range a.ExtraFiles {
			keepFiles[f] = true
		}
		if a.Source != "" {
			ss := sources[a.Source]
			if ss == nil {
				ss = &checkpoint.SourceState{Name: a.Source}
				sources[a.Source] = ss
			}
			ss.Splits = append(ss.Splits, a.Splits...)
		}
		// opState is the manifest entry of operator uid, created on
		// first use.
		opState := func(uid string) *checkpoint.OperatorState {
			op := ops[uid]
			if op == nil {
				op = &checkpoint.OperatorState{Name: uid, MaxParallelism: uint32(maxParallelism), Parallelism: uint32(a.Parallelism)}
				ops[uid] = op
			}
			return op
		}
		for _, p := range a.Parts {
			op := opState(p.UID)
			op.Parts = append(op.Parts, p.Part)
			if p.Part.Blob != "" {
				files[p.Part.Blob] = true
			}
			r.Full += p.Part.Size
			if pp := p.Part.Pebble; pp != nil {
				// Shared with other checkpoints, but listed by each that
				// uses them: retention keeps them while one is retained.
				for _, f := range pp.Files {
					files[f.Object] = true
					r.Full += f.Size
				}
			}
		}
		for _, w := range a.Watermarks {
			op := opState(w.UID)
			op.Watermarks = append(op.Watermarks, w.Watermark)
		}
		for _, l := range a.Logs {
			op := opState(l.UID)
			op.Changelog = append(op.Changelog, l.Part)
			for _, o := range l.Part.Objects {
				files[o] = true
			}
			r.Full += l.Part.Size
		}
	}
	for _, name := range sortedKeys(sources) {
		ss := sources[name]
		sort.Slice(ss.Splits, func(a, b int) bool { return ss.Splits[a].Split < ss.Splits[b].Split })
		m.Sources = append(m.Sources, *ss)
	}
	for _, name := range sortedKeys(ops) {
		op := ops[name]
		sort.Slice(op.Parts, func(a, b int) bool { return op.Parts[a].KeyGroupStart < op.Parts[b].KeyGroupStart })
		sort.Slice(op.Watermarks, func(a, b int) bool { return op.Watermarks[a].KeyGroupStart < op.Watermarks[b].KeyGroupStart })
		m.Operators = append(m.Operators, *op)
	}
	for _, name := range sortedKeys(pending) {
		for _, t := range pending[name] {
			if t.ID <= id {
				r.Commits[name] = append(r.Commits[name], t.Data)
			} else {
				r.Pending[name] = append(r.Pending[name], t)
			}
		}
		if len(r.Commits[name]) > 0 {
			m.Sinks = append(m.Sinks, checkpoint.SinkState{Name: name, Txns: r.Commits[name]})
		}
	}
	m.Files = sortedKeys(files)
	m.Keep = sortedKeys(keepFiles)
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
