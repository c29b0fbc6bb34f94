package inspect

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
)

// DumpOptions select what Dump decodes.
type DumpOptions struct {
	Operator string  // the operator's id, as the manifest names it
	State    string  // one state by name; "" for all
	Key      *string // one key, in the text form ParseKey reads; nil for all
	// Progress, if not nil, is called after each part and log range read,
	// with how many of each are done and in all.
	Progress func(partsDone, parts, logsDone, logs int)
}

// Entry is the decoded state of one key in one state.
type Entry struct {
	State    string `json:"state"`
	Kind     string `json:"kind"`
	KeyGroup int    `json:"key_group"`
	Key      any    `json:"key"`   // a string for string keys, else the decoded key
	Value    any    `json:"value"` // the decoded value; a wrapper's field, unwrapped
}

// ErrUnknown is matched by Dump's error for an operator, state or key that
// the checkpoint does not hold (the message lists the known ones).
var ErrUnknown = errors.New("not in the checkpoint")

// Dump decodes the keyed state of one operator of checkpoint m with only
// the schemas stored in its parts, replays its change log (with the
// changelog backend) as a restore at the checkpoint's parallelism would,
// and calls emit for every entry, ordered by state, key group and key
// bytes. With a key it reads only the part and log ranges of that key's
// key group.
func Dump(ctx context.Context, store blob.Store, m *checkpoint.Manifest, opts DumpOptions, emit func(Entry) error) error {
	op, err := findOperator(m, opts.Operator)
	if err != nil {
		return err
	}
	maxPar := int(op.MaxParallelism)
	if maxPar <= 0 {
		return fmt.Errorf("operator %q of checkpoint %d records no key groups (max parallelism 0)", op.Name, m.ID)
	}
	// The schemas come from the first part; the other parts must agree.
	var parts []checkpoint.StatePart
	for _, p := range op.Parts {
		if p.Blob != "" && p.KeyGroupStart < p.KeyGroupEnd {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		if len(op.Changelog) > 0 {
			return fmt.Errorf("operator %q of checkpoint %d has log ranges but no state part, and only parts carry the schemas to decode them", op.Name, m.ID)
		}
		return fmt.Errorf("operator %q of checkpoint %d has no state parts", op.Name, m.ID)
	}
	d := &dumper{store: store, m: m, op: op, opts: opts, maxPar: maxPar}
	first, err := d.readPart(ctx, parts[0])
	if err != nil {
		return err
	}
	if err := d.setSchemas(parts[0].Blob, first); err != nil {
		return err
	}
	kgFrom, kgTo := 0, maxPar
	if opts.Key != nil {
		key, err := ParseKey(d.keySchema, *opts.Key)
		if err != nil {
			return fmt.Errorf("--key %q: %w", *opts.Key, err)
		}
		d.key = &key
		kg := state.KeyGroupFor(key, maxPar)
		kgFrom, kgTo = kg, kg+1
	}
	var need []checkpoint.StatePart
	for _, p := range parts {
		if int(p.KeyGroupStart) < kgTo && int(p.KeyGroupEnd) > kgFrom {
			need = append(need, p)
		}
	}
	spans := logSpans(op, maxPar, kgFrom, kgTo)
	progress := func(pd, ld int) {
		if opts.Progress != nil {
			opts.Progress(pd, len(need), ld, len(spans))
		}
	}
	d.model = map[string]*modelEntry{}
	for i, p := range need {
		info := first
		if p.Blob != parts[0].Blob {
			if info, err = d.readPart(ctx, p); err != nil {
				return err
			}
		}
		if err := d.loadPart(p, info, kgFrom, kgTo); err != nil {
			return err
		}
		progress(i+1, 0)
	}
	for i, sp := range spans {
		apply := func(c *dstl.Change) error { return d.apply(c) }
		// Parallelism 1: apply builds one model without locks.
		if err := dstl.Read(ctx, store, dstl.ReadOptions{Parallelism: 1}, sp.handles, sp.from, sp.to, apply); err != nil {
			return fmt.Errorf("replaying the log of operator %q key groups [%d, %d): %w", op.Name, sp.from, sp.to, err)
		}
		progress(len(need), i+1)
	}
	return d.emit(emit)
}

func findOperator(m *checkpoint.Manifest, name string) (checkpoint.OperatorState, error) {
	var names []string
	for _, op := range m.Operators {
		if op.Name == name {
			return op, nil
		}
		names = append(names, op.Name)
	}
	if len(names) == 0 {
		return checkpoint.OperatorState{}, fmt.Errorf("operator %q: %w: checkpoint %d holds no keyed state", name, ErrUnknown, m.ID)
	}
	return checkpoint.OperatorState{}, fmt.Errorf("operator %q: %w: checkpoint %d holds the keyed state of %s",
		name, ErrUnknown, m.ID, quoteList(names))
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// logSpan is the log ranges to replay together for key groups [from, to).
type logSpan struct {
	from, to uint32
	handles  []dstl.Handle
}

// logSpans groups the operator's log parts as a restore at the
// checkpoint's parallelism does: per subtask, by their range clipped to
// the subtask's, in manifest order; only subtasks overlapping [kgFrom,
// kgTo) count, clipped to it.
func logSpans(op checkpoint.OperatorState, maxPar, kgFrom, kgTo int) []logSpan {
	if len(op.Changelog) == 0 {
		return nil
	}
	par := max(int(op.Parallelism), 1)
	var out []logSpan
	for sub := 0; sub < par; sub++ {
		s, e := state.KeyGroupRange(maxPar, par, sub)
		s, e = max(s, kgFrom), min(e, kgTo)
		if s >= e {
			continue
		}
		index := map[[2]uint32]int{}
		for _, l := range op.Changelog {
			sp := [2]uint32{max(l.KeyGroupStart, uint32(s)), min(l.KeyGroupEnd, uint32(e))}
			if sp[0] >= sp[1] {
				continue
			}
			i, ok := index[sp]
			if !ok {
				i = len(out)
				index[sp] = i
				out = append(out, logSpan{from: sp[0], to: sp[1]})
			}
			h := dstl.Handle{Writer: l.Writer, After: l.After, Upto: l.Upto, Objects: l.Objects, Size: l.Size, CRCs: l.CRCs}
			for _, u := range l.Uploads {
				h.Uploads = append(h.Uploads, dstl.Upload{Object: u.Object, ID: u.ID, Parts: u.Parts, Size: u.Size})
			}
			out[i].handles = append(out[i].handles, h)
		}
	}
	return out
}

type dumper struct {
	store  blob.Store
	m      *checkpoint.Manifest
	op     checkpoint.OperatorState
	opts   DumpOptions
	maxPar int

	keySchema serde.Schema
	rawKeys   bool // string keys, stored as their bytes
	states    []dumpState
	stored    [][]byte       // the value schema of each of states, as the first part stores it
	byID      map[uint32]int // state.StateID -> index in states
	key       *[]byte        // the one key wanted
	model     map[string]*modelEntry
}

// dumpState is one state to dump, with the schemas to decode it.
type dumpState struct {
	name, kind string
	schema     serde.Schema // of the value stored per key
	elem       serde.Schema // of one list element or map value (list, map)
	mapKey     serde.Schema // of one map key (map)
	wrapped    bool         // the value is a wrapper: show its field 1
}

// modelEntry is the state of one key in one state while it is rebuilt.
type modelEntry struct {
	state int
	kg    int
	key   []byte
	value any // decoded; a list's []any, a map's serde.DynamicMap
}

func (d *dumper) readPart(ctx context.Context, p checkpoint.StatePart) (*state.PartInfo, error) {
	data, err := d.store.Get(ctx, p.Blob)
	if err != nil {
		return nil, fmt.Errorf("state part %s of operator %q: %w", p.Blob, d.op.Name, err)
	}
	if p.CRC != 0 {
		if got := blob.Checksum(data); got != p.CRC {
			return nil, fmt.Errorf("state part %s of operator %q: the manifest records CRC-32C %08x, the blob holds %08x (replaced by another file?)",
				p.Blob, d.op.Name, p.CRC, got)
		}
	}
	info, err := state.ReadPart(data)
	if err != nil {
		return nil, fmt.Errorf("state part %s of operator %q: %w", p.Blob, d.op.Name, err)
	}
	if info.MaxParallelism != d.maxPar {
		return nil, fmt.Errorf("state part %s of operator %q has %d key groups, the manifest says %d", p.Blob, d.op.Name, info.MaxParallelism, d.maxPar)
	}
	if info.Header || p.Pebble != nil {
		return nil, fmt.Errorf("state part %s of operator %q: the state is in the files of a Pebble checkpoint, which this tool does not read (only heap snapshots)", p.Blob, d.op.Name)
	}
	return info, nil
}

// setSchemas decodes the key and value schemas of the first part and
// picks the states to dump.
func (d *dumper) setSchemas(blobName string, info *state.PartInfo) error {
	ks, err := serde.ParseSchema(info.KeySchema)
	if err != nil {
		return fmt.Errorf("state part %s of operator %q: key schema: %w", blobName, d.op.Name, err)
	}
	d.keySchema = ks
	_, d.rawKeys = stringWrapper(ks)
	d.byID = map[uint32]int{}
	var names []string
	for _, s := range info.States {
		names = append(names, s.Name)
		if d.opts.State != "" && s.Name != d.opts.State {
			continue
		}
		vs, err := serde.ParseSchema(s.ValueSchema)
		if err != nil {
			return fmt.Errorf("state part %s of operator %q: value schema of state %q: %w", blobName, d.op.Name, s.Name, err)
		}
		ds, err := newDumpState(s.Name, s.Kind, vs)
		if err != nil {
			return fmt.Errorf("state part %s of operator %q: %w", blobName, d.op.Name, err)
		}
		d.byID[state.StateID(s.Name)] = len(d.states)
		d.states = append(d.states, ds)
		d.stored = append(d.stored, s.ValueSchema)
	}
	if d.opts.State != "" && len(d.states) == 0 {
		return fmt.Errorf("state %q: %w: operator %q declares %s", d.opts.State, ErrUnknown, d.op.Name, quoteList(names))
	}
	return nil
}

func newDumpState(name, kind string, vs serde.Schema) (dumpState, error) {
	ds := dumpState{name: name, kind: kind, schema: vs}
	root := vs.Message(vs.Root)
	ds.wrapped = root != nil && root.Wrapper && len(root.Fields) == 1
	switch kind {
	case "value", "reducing":
		return ds, nil
	case "list", "map":
	default:
		return ds, fmt.Errorf("state %q has unknown kind %q", name, kind)
	}
	var f *serde.Field
	if root != nil {
		f = root.Field(1)
	}
	if f == nil || kind == "list" && f.Card != serde.Repeated || kind == "map" && f.Card != serde.Map {
		return ds, fmt.Errorf("state %q: a %s state whose value schema %s has no %s field 1", name, kind, vs.Root,
			map[string]string{"list": "repeated", "map": "map"}[kind])
	}
	ds.elem = elemSchema(vs, *f)
	if kind == "map" {
		ds.mapKey = elemSchema(vs, serde.Field{Number: 1, Name: "value", Kind: f.MapKey, Bits: f.KeyBits})
	}
	return ds, nil
}

// elemSchema is the schema of one element of field f as serde encodes a
// value of its type alone: a message as itself, anything else wrapped as
// field 1 of a message.
func elemSchema(s serde.Schema, f serde.Field) serde.Schema {
	if f.Kind == serde.KindMessage {
		return serde.Schema{Root: f.Type, Messages: s.Messages}
	}
	const name = "eddy.inspect.Element"
	w := serde.Message{Name: name, Wrapper: true, Fields: []serde.Field{{Number: 1, Name: "value", Kind: f.Kind,
		Type: f.Type, Bits: f.Bits, Codec: f.Codec}}}
	return serde.Schema{Root: name, Messages: append([]serde.Message{w}, s.Messages...)}
}

// decode decodes b with s, showing a wrapper's field 1 instead of the
// wrapper.
func decode(s serde.Schema, b []byte, unwrap bool) (any, error) {
	m, err := serde.DecodeDynamic(s, b)
	if err != nil {
		return nil, err
	}
	if unwrap {
		if len(m.Fields) > 0 && m.Fields[0].Number == 1 {
			return m.Fields[0].Value, nil
		}
		return nil, nil // an optional field 1, absent
	}
	return m, nil
}

func (ds *dumpState) decodeElem(b []byte) (any, error) {
	return decode(ds.elem, b, ds.elem.Root == "eddy.inspect.Element")
}

func (d *dumper) wantKey(key []byte) bool {
	return d.key == nil || string(*d.key) == string(key)
}

func (d *dumper) loadPart(p checkpoint.StatePart, info *state.PartInfo, kgFrom, kgTo int) error {
	// The part's states by index, mapped to the states dumped, and the
	// schemas of those this part stores differently.
	idx := make([]int, len(info.States))
	var partOwn map[int]*dumpState
	for i, s := range info.States {
		j, ok := d.byID[state.StateID(s.Name)]
		if !ok || d.states[j].name != s.Name {
			idx[i] = -1
			continue
		}
		if d.states[j].kind != s.Kind {
			return fmt.Errorf("state part %s of operator %q: state %q is a %s state here and a %s state in %s",
				p.Blob, d.op.Name, s.Name, s.Kind, d.states[j].kind, d.op.Parts[0].Blob)
		}
		idx[i] = j
		if !bytes.Equal(s.ValueSchema, d.stored[j]) {
			// A part carried over from an earlier run may hold an older
			// schema: its values are decoded with their own.
			vs, err := serde.ParseSchema(s.ValueSchema)
			if err != nil {
				return fmt.Errorf("state part %s of operator %q: value schema of state %q: %w", p.Blob, d.op.Name, s.Name, err)
			}
			own, err := newDumpState(s.Name, s.Kind, vs)
			if err != nil {
				return fmt.Errorf("state part %s of operator %q: %w", p.Blob, d.op.Name, err)
			}
			if partOwn == nil {
				partOwn = map[int]*dumpState{}
			}
			partOwn[i] = &own
		}
	}
	for _, g := range info.Groups {
		if g.KeyGroup < int(p.KeyGroupStart) || g.KeyGroup >= int(p.KeyGroupEnd) || g.KeyGroup < kgFrom || g.KeyGroup >= kgTo {
			continue // the part is authoritative for its listed range only
		}
		si := idx[g.State]
		if si < 0 {
			continue
		}
		ds := &d.states[si]
		if o := partOwn[g.State]; o != nil {
			ds = o
		}
		err := g.Entries(func(key, value []byte) error {
			if !d.wantKey(key) {
				return nil
			}
			v, err := decode(ds.schema, value, ds.wrapped)
			if err != nil {
				return fmt.Errorf("key %s: value: %v", Printable(key), err)
			}
			d.put(si, g.KeyGroup, key, v)
			return nil
		})
		if err != nil {
			return fmt.Errorf("state part %s of operator %q, state %q: %w", p.Blob, d.op.Name, ds.name, err)
		}
	}
	return nil
}

func modelKey(si int, key []byte) string {
	return string(binary.AppendUvarint(nil, uint64(si))) + string(key)
}

func (d *dumper) put(si, kg int, key []byte, v any) {
	k := modelKey(si, key)
	if e := d.model[k]; e != nil {
		e.value = v
		return
	}
	d.model[k] = &modelEntry{state: si, kg: kg, key: slices.Clone(key), value: v}
}

// apply replays one logged change into the model, as Backend.ApplyChange
// does into typed state.
func (d *dumper) apply(c *dstl.Change) error {
	si, ok := d.byID[c.State]
	if !ok || !d.wantKey(c.Key) {
		return nil
	}
	ds := &d.states[si]
	fail := func(err error) error {
		return fmt.Errorf("state %q key group %d key %s: %s change: %w", ds.name, c.KeyGroup, Printable(c.Key), c.Op, err)
	}
	k := modelKey(si, c.Key)
	switch c.Op {
	case dstl.OpPut:
		v, err := decode(ds.schema, c.Value, ds.wrapped)
		if err != nil {
			return fail(err)
		}
		d.put(si, int(c.KeyGroup), c.Key, v)
	case dstl.OpDelete:
		delete(d.model, k)
	case dstl.OpPutElem, dstl.OpDeleteElem:
		switch ds.kind {
		case "list":
			if c.Op == dstl.OpDeleteElem {
				return fail(errors.New("a list has no element deletes"))
			}
			i, n := binary.Uvarint(c.Sub)
			if n <= 0 || n != len(c.Sub) || i > 1<<28 {
				return fail(fmt.Errorf("bad list index %x", c.Sub))
			}
			v, err := ds.decodeElem(c.Value)
			if err != nil {
				return fail(err)
			}
			e := d.model[k]
			if e == nil {
				d.put(si, int(c.KeyGroup), c.Key, []any{})
				e = d.model[k]
			}
			list, _ := e.value.([]any)
			for uint64(len(list)) <= i {
				zero, err := ds.decodeElem(nil)
				if err != nil {
					return fail(err)
				}
				list = append(list, zero)
			}
			list[i] = v
			e.value = list
		case "map":
			mk, err := decode(ds.mapKey, c.Sub, true)
			if err != nil {
				return fail(fmt.Errorf("map key: %w", err))
			}
			e := d.model[k]
			if c.Op == dstl.OpDeleteElem {
				if e == nil {
					return nil
				}
				mp, _ := e.value.(serde.DynamicMap)
				mp = slices.DeleteFunc(mp, func(x serde.DynamicMapEntry) bool { return x.Key == mk })
				if len(mp) == 0 {
					delete(d.model, k)
				} else {
					e.value = mp
				}
				return nil
			}
			v, err := ds.decodeElem(c.Value)
			if err != nil {
				return fail(fmt.Errorf("map value: %w", err))
			}
			if e == nil {
				d.put(si, int(c.KeyGroup), c.Key, serde.DynamicMap{})
				e = d.model[k]
			}
			mp, _ := e.value.(serde.DynamicMap)
			if j := slices.IndexFunc(mp, func(x serde.DynamicMapEntry) bool { return x.Key == mk }); j >= 0 {
				mp[j].Value = v
			} else {
				mp = append(mp, serde.DynamicMapEntry{Key: mk, Value: v})
			}
			e.value = mp
		default:
			return fail(fmt.Errorf("an element change of a %s state", ds.kind))
		}
	default:
		return fail(errors.New("unknown operation"))
	}
	return nil
}

func (d *dumper) emit(emit func(Entry) error) error {
	entries := make([]*modelEntry, 0, len(d.model))
	for _, e := range d.model {
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.state != b.state {
			return a.state < b.state
		}
		if a.kg != b.kg {
			return a.kg < b.kg
		}
		return string(a.key) < string(b.key)
	})
	for _, e := range entries {
		key, err := d.decodeKey(e.key)
		if err != nil {
			return err
		}
		ds := &d.states[e.state]
		if err := emit(Entry{State: ds.name, Kind: ds.kind, KeyGroup: e.kg, Key: key, Value: e.value}); err != nil {
			return err
		}
	}
	return nil
}

// decodeKey turns key bytes into what Entry.Key shows: a string key as
// text, any other key decoded with the key schema. A key that does not
// decode (a key serde could not encode is stored as its fmt.Sprint form)
// is shown as text.
func (d *dumper) decodeKey(key []byte) (any, error) {
	if d.rawKeys {
		return Printable(key), nil
	}
	root := d.keySchema.Message(d.keySchema.Root)
	v, err := decode(d.keySchema, key, root != nil && root.Wrapper && len(root.Fields) == 1)
	if err != nil {
		return Printable(key), nil
	}
	return v, nil
}
