package group

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eddyflow/eddy/blob"
)

// TopologyObject is the name of the topology record in a job's store.
const TopologyObject = "job/topology"

// Topology is what every process of a job must agree on before it joins
// the job's group: a process whose graph splits the input into other
// tasks, or keys its state into other key groups, or holds other state,
// would restore checkpoints it cannot read or write ones the others
// cannot.
type Topology struct {
	Job            string   // the job's name
	Tasks          int32    // tasks: partitions of the input topic
	MaxParallelism int32    // key groups of the keyed state
	Operators      []string // stable ids of the checkpointed operators, in graph order
	Schemas        []Schema // the checkpointed types, sorted by Name
}

// Schema is the fingerprint of one checkpointed type's schema.
type Schema struct {
	Name        string // where the type is held: "<operator>/<state>", say
	Fingerprint uint64 // serde's fingerprint of its schema
}

// ErrTopologyMismatch is matched (errors.Is) by CheckTopology's error when
// the job recorded another topology: the process must not join.
var ErrTopologyMismatch = errors.New("the job's recorded topology differs")

// TopologyError says how a process's topology differs from the one its
// job recorded.
type TopologyError struct {
	Field    string // "tasks", "max parallelism", "operators", "schema <name>", ...
	Recorded string // the recorded value
	Given    string // this process's value
}

// Error names the field and both values.
func (e *TopologyError) Error() string {
	return fmt.Sprintf("group: this process's topology differs from the one the job recorded in %s: %s is %s, recorded %s; a job's processes must run the same graph over the same input (to change it, start a new job, or stop every process and delete %s)",
		TopologyObject, e.Field, e.Given, e.Recorded, TopologyObject)
}

// Is makes a *TopologyError match ErrTopologyMismatch.
func (e *TopologyError) Is(target error) bool { return target == ErrTopologyMismatch }

// CheckTopology records t as the job's topology in store the first time it
// is called for the job (a conditional create of TopologyObject, so that of
// processes starting at once exactly one topology is recorded), and on
// every later call, or when another process recorded first, compares t
// with the recorded one: a difference is a *TopologyError naming the first
// field that differs, a damaged record an error naming the object. The
// store must create objects conditionally (blob.Creator).
func CheckTopology(ctx context.Context, store blob.Store, t Topology) error {
	if err := t.validate(); err != nil {
		return err
	}
	t.Schemas = slices.Clone(t.Schemas)
	slices.SortFunc(t.Schemas, func(a, b Schema) int { return strings.Compare(a.Name, b.Name) })
	data := appendTopology(nil, &t)
	h := blob.NewHedger(3, 0)
	// Equal bytes are an equal topology, so a create that finds the
	// object holding these bytes (this process's lost reply, or another
	// process of the same job) succeeds: there is nothing more to check.
	err := h.PutIfAbsent(ctx, store, TopologyObject, data, topologyAttempts)
	if err == nil {
		return nil
	}
	// Another topology, or a failure: the record, if there is one,
	// says which (a damaged one fails the create's read-back too).
	createErr := err
	var buf []byte
	got, err := h.GetInto(ctx, store, TopologyObject, &buf, topologyAttempts)
	var corrupt *blob.CorruptError
	switch {
	case errors.As(err, &corrupt):
		return fmt.Errorf("group: the topology record of job %q is damaged: %w; %s", t.Job, err, damagedAdvice)
	case errors.Is(err, blob.ErrNotFound) && !errors.Is(createErr, blob.ErrExists):
		return fmt.Errorf("group: record the topology of job %q as %s: %w", t.Job, TopologyObject, createErr)
	case err != nil:
		return fmt.Errorf("group: read the topology of job %q from %s: %w", t.Job, TopologyObject, err)
	}
	recorded, err := decodeTopology(got)
	if err != nil {
		return fmt.Errorf("group: the topology record of job %q is damaged: %w; %s", t.Job, err, damagedAdvice)
	}
	if d := diffTopology(&recorded, &t); d != nil {
		return d
	}
	return nil
}

const damagedAdvice = "restore it from a copy, or stop every process of the job and delete it to record the topology anew"

// topologyAttempts bounds the attempts of each request of CheckTopology.
const topologyAttempts = 3

// Bounds on a topology, so a damaged record cannot make a reader allocate
// without limit.
const (
	maxTopologyString = 1024
	maxTopologyList   = 1 << 16
)

// validate reports what makes t unfit to record.
func (t *Topology) validate() error {
	if err := ValidateJob(t.Job); err != nil {
		return err
	}
	switch {
	case t.Tasks <= 0:
		return fmt.Errorf("group: topology of job %q: %d tasks; a job has at least one", t.Job, t.Tasks)
	case t.MaxParallelism <= 0:
		return fmt.Errorf("group: topology of job %q: max parallelism %d; it must be positive", t.Job, t.MaxParallelism)
	case len(t.Operators) > maxTopologyList || len(t.Schemas) > maxTopologyList:
		return fmt.Errorf("group: topology of job %q: %d operators and %d schemas; at most %d of each", t.Job, len(t.Operators), len(t.Schemas), maxTopologyList)
	}
	for _, op := range t.Operators {
		if op == "" || len(op) > maxTopologyString {
			return fmt.Errorf("group: topology of job %q: operator id %.40q: empty or longer than %d bytes", t.Job, op, maxTopologyString)
		}
	}
	seen := make(map[string]bool, len(t.Schemas))
	for _, s := range t.Schemas {
		if s.Name == "" || len(s.Name) > maxTopologyString {
			return fmt.Errorf("group: topology of job %q: schema name %.40q: empty or longer than %d bytes", t.Job, s.Name, maxTopologyString)
		}
		if seen[s.Name] {
			return fmt.Errorf("group: topology of job %q: schema %q twice", t.Job, s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// topologyMagic starts a topology record: "ETO" (Eddy topology) and the
// format version.
const topologyMagic = "ETO\x01"

// appendTopology appends the encoding of t to dst: the magic, then the job
// (a uvarint length and its bytes), tasks and max parallelism as uvarints,
// the operators (a uvarint count, then each as a string) and the schemas
// (a uvarint count, then each as its name and its fingerprint as 8 bytes
// little-endian). The store's trailer checksums the object.
func appendTopology(dst []byte, t *Topology) []byte {
	dst = append(dst, topologyMagic...)
	dst = appendString(dst, t.Job)
	dst = binary.AppendUvarint(dst, uint64(t.Tasks))
	dst = binary.AppendUvarint(dst, uint64(t.MaxParallelism))
	dst = binary.AppendUvarint(dst, uint64(len(t.Operators)))
	for _, op := range t.Operators {
		dst = appendString(dst, op)
	}
	dst = binary.AppendUvarint(dst, uint64(len(t.Schemas)))
	for _, s := range t.Schemas {
		dst = appendString(dst, s.Name)
		dst = binary.LittleEndian.AppendUint64(dst, s.Fingerprint)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// TopologyDecodeError says what is wrong with the bytes of a topology
// record.
type TopologyDecodeError struct {
	Offset int // where in the payload the problem is
	Reason string
}

// Error names the object, the offset and what is wrong.
func (e *TopologyDecodeError) Error() string {
	return fmt.Sprintf("group: %s is corrupt at byte %d: %s", TopologyObject, e.Offset, e.Reason)
}

// decodeTopology decodes a topology record. Every inconsistency (bad
// magic, a truncated or overlong field, a count beyond the bounds, a value
// that validate refuses, unsorted or repeated schemas, trailing bytes) is
// a *TopologyDecodeError; it never panics.
func decodeTopology(data []byte) (Topology, error) {
	d := tdecoder{b: data}
	var t Topology
	if !bytes.HasPrefix(data, []byte(topologyMagic)) {
		return t, d.fail("not a topology record (magic %q, want %q)", data[:min(len(data), len(topologyMagic))], topologyMagic)
	}
	d.off = len(topologyMagic)
	var ok bool
	if t.Job, ok = d.string(); !ok {
		return t, d.fail("truncated or overlong job")
	}
	tasks, ok := d.uvarint()
	if !ok || tasks > 1<<31-1 {
		return t, d.fail("truncated or overlong task count")
	}
	maxp, ok := d.uvarint()
	if !ok || maxp > 1<<31-1 {
		return t, d.fail("truncated or overlong max parallelism")
	}
	t.Tasks, t.MaxParallelism = int32(tasks), int32(maxp)
	n, ok := d.uvarint()
	if !ok || n > maxTopologyList {
		return t, d.fail("truncated operator count, or more than %d", maxTopologyList)
	}
	for i := range n {
		op, ok := d.string()
		if !ok {
			return t, d.fail("truncated or overlong operator %d", i)
		}
		t.Operators = append(t.Operators, op)
	}
	if n, ok = d.uvarint(); !ok || n > maxTopologyList {
		return t, d.fail("truncated schema count, or more than %d", maxTopologyList)
	}
	for i := range n {
		name, ok := d.string()
		if !ok || len(d.b)-d.off < 8 {
			return t, d.fail("truncated or overlong schema %d", i)
		}
		fp := binary.LittleEndian.Uint64(d.b[d.off:])
		d.off += 8
		if k := len(t.Schemas); k > 0 && t.Schemas[k-1].Name >= name {
			return t, d.fail("schema %q after %q: not sorted, or repeated", name, t.Schemas[k-1].Name)
		}
		t.Schemas = append(t.Schemas, Schema{Name: name, Fingerprint: fp})
	}
	if d.off != len(data) {
		return t, d.fail("%d bytes after the schemas", len(data)-d.off)
	}
	if err := t.validate(); err != nil {
		d.off = 0
		return t, d.fail("%v", err)
	}
	return t, nil
}

// tdecoder reads the fields of a topology record.
type tdecoder struct {
	b   []byte
	off int
}

func (d *tdecoder) fail(format string, args ...any) error {
	return &TopologyDecodeError{Offset: d.off, Reason: fmt.Sprintf(format, args...)}
}

func (d *tdecoder) uvarint() (uint64, bool) {
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		return 0, false
	}
	d.off += n
	return v, true
}

func (d *tdecoder) string() (string, bool) {
	n, ok := d.uvarint()
	if !ok || n > maxTopologyString || n > uint64(len(d.b)-d.off) {
		return "", false
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s, true
}

// diffTopology returns a *TopologyError for the first field in which given
// differs from recorded, or nil. Schemas of both are sorted by name.
func diffTopology(recorded, given *Topology) *TopologyError {
	switch {
	case recorded.Job != given.Job:
		return &TopologyError{Field: "job", Recorded: fmt.Sprintf("%q", recorded.Job), Given: fmt.Sprintf("%q", given.Job)}
	case recorded.Tasks != given.Tasks:
		return &TopologyError{Field: "tasks (partitions of the input)", Recorded: fmt.Sprint(recorded.Tasks), Given: fmt.Sprint(given.Tasks)}
	case recorded.MaxParallelism != given.MaxParallelism:
		return &TopologyError{Field: "max parallelism", Recorded: fmt.Sprint(recorded.MaxParallelism), Given: fmt.Sprint(given.MaxParallelism)}
	}
	for i := range max(len(recorded.Operators), len(given.Operators)) {
		r, g := "none", "none"
		if i < len(recorded.Operators) {
			r = fmt.Sprintf("%q", recorded.Operators[i])
		}
		if i < len(given.Operators) {
			g = fmt.Sprintf("%q", given.Operators[i])
		}
		if r != g {
			return &TopologyError{Field: fmt.Sprintf("operator %d", i+1), Recorded: r, Given: g}
		}
	}
	rs := make(map[string]uint64, len(recorded.Schemas))
	for _, s := range recorded.Schemas {
		rs[s.Name] = s.Fingerprint
	}
	gs := make(map[string]bool, len(given.Schemas))
	for _, s := range given.Schemas {
		gs[s.Name] = true
		fp, ok := rs[s.Name]
		switch {
		case !ok:
			return &TopologyError{Field: fmt.Sprintf("schema %q", s.Name), Recorded: "absent", Given: fmt.Sprintf("fingerprint %016x", s.Fingerprint)}
		case fp != s.Fingerprint:
			return &TopologyError{Field: fmt.Sprintf("schema %q", s.Name), Recorded: fmt.Sprintf("fingerprint %016x", fp), Given: fmt.Sprintf("fingerprint %016x", s.Fingerprint)}
		}
	}
	for _, s := range recorded.Schemas {
		if !gs[s.Name] {
			return &TopologyError{Field: fmt.Sprintf("schema %q", s.Name), Recorded: fmt.Sprintf("fingerprint %016x", s.Fingerprint), Given: "absent"}
		}
	}
	return nil
}
