package inspect

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
)

// Details is what `eddy checkpoints show` prints about one checkpoint.
type Details struct {
	ID          uint64               `json:"id"`
	Time        time.Time            `json:"time,omitzero"`
	Job         string               `json:"job"`
	Fingerprint string               `json:"fingerprint,omitempty"`
	Size        int64                `json:"size"`
	Status      string               `json:"status"`
	Reason      string               `json:"reason,omitempty"`
	Sources     []SourceDetails      `json:"sources"`
	Operators   []OperatorDetails    `json:"operators"`
	Sinks       []SinkDetails        `json:"sinks"`
	Files       []string             `json:"files"`
	Manifest    *checkpoint.Manifest `json:"-"`
}

// SourceDetails is one source's position.
type SourceDetails struct {
	Name   string         `json:"name"`
	Splits []SplitDetails `json:"splits"`
}

// SplitDetails is one split's position, in the source's own encoding.
type SplitDetails struct {
	Split    uint32 `json:"split"`
	Position string `json:"position"` // hex
	Done     bool   `json:"done"`
}

// OperatorDetails is one keyed operator's state in a checkpoint.
type OperatorDetails struct {
	Name           string             `json:"name"`
	MaxParallelism uint32             `json:"max_parallelism"`
	Parallelism    uint32             `json:"parallelism"`
	Parts          []PartDetails      `json:"parts"`
	Changelog      []LogDetails       `json:"changelog,omitempty"`
	Watermarks     []WatermarkDetails `json:"watermarks,omitempty"`
	SchemasFrom    string             `json:"schemas_from,omitempty"` // the part the schemas were read from
	KeySchema      *serde.Schema      `json:"key_schema,omitempty"`
	States         []StateDetails     `json:"states,omitempty"`
	SchemaError    string             `json:"schema_error,omitempty"` // why the schemas could not be read
}

// PartDetails is a checkpoint.StatePart.
type PartDetails struct {
	Subtask       uint32 `json:"subtask"`
	KeyGroupStart uint32 `json:"key_group_start"`
	KeyGroupEnd   uint32 `json:"key_group_end"`
	Blob          string `json:"blob"`
	Size          int64  `json:"size"`
	CRC           uint32 `json:"crc32c,omitempty"`
	// Pebble lists the files of a Pebble checkpoint; Blob is then its
	// state header.
	Pebble *checkpoint.PebblePart `json:"pebble,omitempty"`
}

// LogDetails is a checkpoint.LogPart.
type LogDetails struct {
	Subtask       uint32   `json:"subtask"`
	KeyGroupStart uint32   `json:"key_group_start"`
	KeyGroupEnd   uint32   `json:"key_group_end"`
	Writer        string   `json:"writer"`
	After         uint64   `json:"after"`
	Upto          uint64   `json:"upto"`
	Objects       []string `json:"objects"`
	Size          int64    `json:"size"`
	CRCs          []uint32 `json:"crc32cs,omitempty"`
	// Uploads are the objects whose completion the writer deferred.
	Uploads []UploadDetails `json:"uploads,omitempty"`
}

// UploadDetails is a checkpoint.LogUpload.
type UploadDetails struct {
	Object string `json:"object"`
	ID     string `json:"id"`
	Parts  uint32 `json:"parts"`
	Size   int64  `json:"size"`
}

// WatermarkDetails is a checkpoint.Watermark.
type WatermarkDetails struct {
	KeyGroupStart uint32 `json:"key_group_start"`
	KeyGroupEnd   uint32 `json:"key_group_end"`
	Nanos         int64  `json:"nanos"`
}

// StateDetails is one state of an operator as its parts declare it.
type StateDetails struct {
	Name        string        `json:"name"`
	Kind        string        `json:"kind"`
	ValueSchema *serde.Schema `json:"value_schema,omitempty"`
}

// SinkDetails is one sink's pending transactions.
type SinkDetails struct {
	Name string   `json:"name"`
	Txns []string `json:"txns"` // printable text as is, anything else in hex
}

// Show gathers the details of checkpoint m, reading the schemas of each
// operator from its first part. A part that cannot be read does not fail
// Show: the operator's SchemaError says why (verify tells all).
func Show(ctx context.Context, store blob.Store, m *checkpoint.Manifest, quarantine string) *Details {
	d := &Details{ID: m.ID, Job: m.Job, Fingerprint: m.Fingerprint, Size: manifestSize(m), Status: StatusComplete,
		Files: m.Files, Manifest: m}
	if m.CreatedAt != 0 {
		d.Time = time.Unix(0, m.CreatedAt).UTC()
	}
	if quarantine != "" {
		d.Status, d.Reason = StatusQuarantined, quarantine
	}
	for _, s := range m.Sources {
		sd := SourceDetails{Name: s.Name}
		for _, sp := range s.Splits {
			sd.Splits = append(sd.Splits, SplitDetails{Split: sp.Split, Position: fmt.Sprintf("%x", sp.Pos), Done: sp.Done})
		}
		d.Sources = append(d.Sources, sd)
	}
	for _, op := range m.Operators {
		od := OperatorDetails{Name: op.Name, MaxParallelism: op.MaxParallelism, Parallelism: op.Parallelism}
		for _, p := range op.Parts {
			od.Parts = append(od.Parts, PartDetails(p))
		}
		for _, l := range op.Changelog {
			ld := LogDetails{Subtask: l.Subtask, KeyGroupStart: l.KeyGroupStart, KeyGroupEnd: l.KeyGroupEnd, Writer: l.Writer,
				After: l.After, Upto: l.Upto, Objects: l.Objects, Size: l.Size, CRCs: l.CRCs}
			for _, u := range l.Uploads {
				ld.Uploads = append(ld.Uploads, UploadDetails(u))
			}
			od.Changelog = append(od.Changelog, ld)
		}
		for _, w := range op.Watermarks {
			od.Watermarks = append(od.Watermarks, WatermarkDetails(w))
		}
		readSchemas(ctx, store, op, &od)
		d.Operators = append(d.Operators, od)
	}
	for _, s := range m.Sinks {
		sd := SinkDetails{Name: s.Name}
		for _, t := range s.Txns {
			sd.Txns = append(sd.Txns, Printable(t))
		}
		d.Sinks = append(d.Sinks, sd)
	}
	return d
}

func readSchemas(ctx context.Context, store blob.Store, op checkpoint.OperatorState, od *OperatorDetails) {
	for _, p := range op.Parts {
		if p.Blob == "" {
			continue
		}
		od.SchemasFrom = p.Blob
		data, err := store.Get(ctx, p.Blob)
		if err != nil {
			od.SchemaError = err.Error()
			return
		}
		info, err := state.ReadPart(data)
		if err != nil {
			od.SchemaError = fmt.Sprintf("%s: %v", p.Blob, err)
			return
		}
		ks, err := serde.ParseSchema(info.KeySchema)
		if err != nil {
			od.SchemaError = fmt.Sprintf("%s: key schema: %v", p.Blob, err)
		} else {
			od.KeySchema = &ks
		}
		for _, s := range info.States {
			sd := StateDetails{Name: s.Name, Kind: s.Kind}
			vs, err := serde.ParseSchema(s.ValueSchema)
			if err != nil {
				od.SchemaError = fmt.Sprintf("%s: value schema of state %q: %v", p.Blob, s.Name, err)
			} else {
				sd.ValueSchema = &vs
			}
			od.States = append(od.States, sd)
		}
		return
	}
}

// Printable returns b as text if it is printable UTF-8, else as hex.
func Printable(b []byte) string {
	if utf8.Valid(b) {
		ok := true
		for _, r := range string(b) {
			if r < 0x20 && r != '\t' || r == 0x7f {
				ok = false
				break
			}
		}
		if ok {
			return string(b)
		}
	}
	return fmt.Sprintf("0x%x", b)
}
