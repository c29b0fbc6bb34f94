package checkpoint

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/serde"
)

// ManifestVersion is the newest manifest format this package writes, and
// the newest it reads. Version 2 is version 1 plus LogPart.Uploads: log
// objects whose completion the writer deferred, which a restore completes
// before reading. A manifest is written as version 2 only when it lists
// such uploads, and as version 1 otherwise, so that a build from before
// version 2 reads every manifest it can restore correctly and refuses the
// others by their version ("format version 2"), rather than taking their
// not yet completed log objects for missing files.
const ManifestVersion = 2

// manifestVersion1 is the format of manifests without deferred uploads.
const manifestVersion1 = 1

// Manifest describes one complete checkpoint. It is stored as protobuf
// (serde); field numbers are never reused.
type Manifest struct {
	ID        uint64          `proto:"1"` // the checkpoint id; ids start at 1 and increase
	Job       string          `proto:"2"` // the job's name, for tools
	CreatedAt int64           `proto:"3"` // when the checkpoint was triggered, unix nanoseconds
	Sources   []SourceState   `proto:"4"`
	Operators []OperatorState `proto:"5"`
	Sinks     []SinkState     `proto:"6"`
	// Files lists every blob the checkpoint uses, including every
	// StatePart.Blob. Pruning keeps exactly the files retained manifests list.
	Files []string `proto:"7"`
	// Keep lists blobs that are not part of the checkpoint but must survive
	// its pruning, such as the parts of a materialization still being
	// written. They need not exist.
	Keep []string `proto:"8"`
	// Fingerprint describes what the job that wrote the checkpoint
	// declared it depends on: its checkpointed parts (ids, kinds, record
	// types) and the parameters it marked as its identity, one per line.
	// A resume by a job with another fingerprint is refused unless asked
	// for. "" in checkpoints of jobs from before fingerprints.
	Fingerprint string `proto:"9"`
	// Version is the manifest format. Complete writes ManifestVersion if
	// the manifest lists deferred log uploads and 1 otherwise, whatever
	// the field holds; DecodeManifest rejects versions it does not know.
	Version uint32 `proto:"15"`
}

// SourceState is the position of one source in a checkpoint.
type SourceState struct {
	Name   string       `proto:"1"`
	Splits []SplitState `proto:"2"`
}

// SplitState is the position of one split (partition, file, ...) of a source.
type SplitState struct {
	Split uint32 `proto:"1"`
	Pos   []byte `proto:"2"` // the source's own encoding of its position
	Done  bool   `proto:"3"` // the split was read to its end
}

// OperatorState is the keyed state of one operator in a checkpoint.
type OperatorState struct {
	Name           string      `proto:"1"`
	MaxParallelism uint32      `proto:"2"` // the number of key groups
	Parallelism    uint32      `proto:"3"` // the number of subtasks that wrote Parts
	Parts          []StatePart `proto:"4"`
	Schemas        []byte      `proto:"5"` // the runtime's record of the state's schemas; opaque here
	// Changelog lists, with the changelog state backend, the log ranges to
	// replay on top of Parts (the last materialization).
	Changelog []LogPart `proto:"6"`
	// Watermarks are, with the changelog state backend, each subtask's
	// event-time watermark at the checkpoint: Parts were materialized
	// earlier and carry older ones.
	Watermarks []Watermark `proto:"7"`
}

// Watermark is the event-time watermark, in Unix nanoseconds, of the
// subtask that owned the key groups [KeyGroupStart, KeyGroupEnd).
type Watermark struct {
	KeyGroupStart uint32 `proto:"1,name=key_group_start"`
	KeyGroupEnd   uint32 `proto:"2,name=key_group_end"`
	Nanos         int64  `proto:"3"`
}

// LogPart is a range of one durable short-term log writer's changes to
// replay for the key groups [KeyGroupStart, KeyGroupEnd): those with
// sequence numbers in (After, Upto], found in Objects.
type LogPart struct {
	Subtask       uint32   `proto:"1"`
	KeyGroupStart uint32   `proto:"2,name=key_group_start"`
	KeyGroupEnd   uint32   `proto:"3,name=key_group_end"`
	Writer        string   `proto:"4"`
	After         uint64   `proto:"5"`
	Upto          uint64   `proto:"6"`
	Objects       []string `proto:"7"`
	Size          int64    `proto:"8"`
	// CRCs are the checksums of Objects, one each, as the durable
	// short-term log records them (dstl.Handle.CRCs), or empty in
	// manifests written before they were recorded.
	CRCs []uint32 `proto:"9,fixed"`
	// Uploads lists the objects of Objects whose completion the writer
	// deferred (dstl.Handle.Uploads): their parts are durable, but the
	// store shows them only once completed. Latest completes the uploads
	// of the checkpoint it returns. Empty in manifests from before
	// completions were deferred.
	Uploads []LogUpload `proto:"10"`
}

// LogUpload is the upload of a log object built from parts that may not
// be complete: what completing it needs (blob.Parter.CompleteParts).
type LogUpload struct {
	Object string `proto:"1"`
	ID     string `proto:"2"` // the store's id of the upload
	Parts  uint32 `proto:"3"` // parts 1..Parts make the object
	Size   int64  `proto:"4"` // the object's bytes, its trailer included
}

// uploads returns the uploads m's log parts record, by object.
func (m *Manifest) uploads() map[string]LogUpload {
	var out map[string]LogUpload
	for _, op := range m.Operators {
		for _, l := range op.Changelog {
			for _, u := range l.Uploads {
				if out == nil {
					out = map[string]LogUpload{}
				}
				out[u.Object] = u
			}
		}
	}
	return out
}

// StatePart is the state of the key groups [KeyGroupStart, KeyGroupEnd) as
// written by one subtask.
type StatePart struct {
	Subtask       uint32 `proto:"1"`
	KeyGroupStart uint32 `proto:"2"`
	KeyGroupEnd   uint32 `proto:"3"` // exclusive
	Blob          string `proto:"4"` // the blob holding the part; "" for a part without state
	Size          int64  `proto:"5"` // the blob's payload size in bytes
	// CRC is the CRC-32C (Castagnoli) of the payload, 0 if not recorded:
	// a restore compares the part it reads against it, so a blob replaced
	// by another valid one (an older file of the same name) is caught.
	CRC uint32 `proto:"6,fixed"`
	// Pebble is set for the part of a subtask whose state lived in a
	// Pebble database (state/pebble): the database's checkpoint files. Blob
	// then holds only the state's header (key and value schemas,
	// watermark), which a heap snapshot reader refuses by its magic. Nil for
	// a heap snapshot and in manifests from before the Pebble backend.
	Pebble *PebblePart `proto:"7"`
}

// PebblePart lists the files of one Pebble database's checkpoint, which a
// restore downloads into a local directory and opens. The SST objects are
// shared: a later checkpoint of the database lists the objects of the SSTs
// it still holds instead of uploading them again, so an object stays as
// long as any retained manifest lists it in Files.
//
// With the changelog state backend a subtask lists the part of its last
// materialization, and, until its first one after a restore, the parts it
// was restored from, for its own key groups only: the StatePart's key
// groups are then those the part is restored for, and KeyGroupStart and
// KeyGroupEnd here the key groups the database held when it was
// checkpointed, which a restore cuts the others from.
type PebblePart struct {
	Files []PebbleFile `proto:"1"`
	// KeyGroupStart and KeyGroupEnd are the key groups [start, end) the
	// database held; both 0 (manifests from before the changelog on
	// Pebble): the StatePart's.
	KeyGroupStart uint32 `proto:"2,name=key_group_start"`
	KeyGroupEnd   uint32 `proto:"3,name=key_group_end"`
}

// DBKeyGroups returns the key groups [start, end) the database of part p
// held: pp's own if set, else p's.
func (p StatePart) DBKeyGroups() (start, end uint32) {
	if pp := p.Pebble; pp != nil && pp.KeyGroupEnd > 0 {
		return pp.KeyGroupStart, pp.KeyGroupEnd
	}
	return p.KeyGroupStart, p.KeyGroupEnd
}

// PebbleFile is one file of a Pebble checkpoint: its name in the database
// directory, the blob holding its bytes, and their size and CRC-32C
// (Castagnoli), which a restore verifies.
//
// InBundle marks a file whose object bundles several small files of one
// checkpoint; its bytes are at Offset in the object.
type PebbleFile struct {
	Name     string `proto:"1"`
	Object   string `proto:"2"`
	Size     int64  `proto:"3"`
	CRC32C   uint32 `proto:"4,fixed,name=crc32c"`
	InBundle bool   `proto:"5,name=in_bundle"`
	Offset   int64  `proto:"6"`
}

// SinkState is what one sink pre-committed in a checkpoint.
type SinkState struct {
	Name string   `proto:"1"`
	Txns [][]byte `proto:"2"` // transactions to commit on restore, in the sink's encoding
}

var manifestCodec = sync.OnceValues(serde.For[Manifest])

// invalidError marks an error about a manifest's content, as opposed to an
// error reading it: such a manifest is skipped, not retried.
type invalidError struct{ err error }

func (e invalidError) Error() string { return e.err.Error() }
func (e invalidError) Unwrap() error { return e.err }

func invalidf(format string, args ...any) error {
	return invalidError{fmt.Errorf(format, args...)}
}

// DecodeManifest decodes and checks the payload of a manifest blob. It
// rejects bytes that are not a manifest of ManifestVersion or whose content
// is inconsistent (see Complete), and never panics.
func DecodeManifest(data []byte) (*Manifest, error) {
	m, err := decodeManifest(data)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: decode manifest: %w", err)
	}
	return m, nil
}

// decodeManifest is DecodeManifest with errors that do not say what failed,
// for callers that say it in their own words.
func decodeManifest(data []byte) (*Manifest, error) {
	codec, err := manifestCodec()
	if err != nil {
		return nil, fmt.Errorf("manifest codec: %w", err)
	}
	m := new(Manifest)
	if err := codec.Decode(data, m); err != nil {
		return nil, invalidError{err}
	}
	switch m.Version {
	case manifestVersion1, ManifestVersion:
		// A version 1 manifest with uploads was written by a build that
		// deferred completions before version 2 existed: read as 2.
	case 0:
		return nil, invalidf("no format version; not a manifest")
	default:
		return nil, invalidf("format version %d; this build reads versions 1 to %d", m.Version, ManifestVersion)
	}
	if err := m.validate(); err != nil {
		return nil, invalidError{err}
	}
	return m, nil
}

// versionOf is the format m is written in: ManifestVersion if it lists
// deferred log uploads, version 1 otherwise.
func versionOf(m *Manifest) uint32 {
	if len(m.uploads()) > 0 {
		return ManifestVersion
	}
	return manifestVersion1
}

// encodeManifest returns the payload of m's manifest blob.
func encodeManifest(m *Manifest) ([]byte, error) {
	codec, err := manifestCodec()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: manifest codec: %w", err)
	}
	c := *m
	c.Version = versionOf(m)
	return codec.Append(nil, &c)
}

// validate checks what restore relies on: a positive id, valid and unique
// names, key-group ranges inside the operator's key groups, and state blobs
// that Files lists.
func (m *Manifest) validate() error {
	if m.ID == 0 {
		return errors.New("checkpoint id 0; ids start at 1")
	}
	for i, f := range m.Keep {
		if err := blob.ValidateName(f); err != nil {
			return fmt.Errorf("checkpoint %d: Keep[%d]: %w", m.ID, i, err)
		}
	}
	files := make(map[string]bool, len(m.Files))
	for i, f := range m.Files {
		if err := blob.ValidateName(f); err != nil {
			return fmt.Errorf("checkpoint %d: Files[%d]: %w", m.ID, i, err)
		}
		files[f] = true
	}
	seen := map[string]bool{}
	unique := func(kind, name string) error {
		if name == "" {
			return fmt.Errorf("checkpoint %d: %s with an empty name", m.ID, kind)
		}
		if seen[kind+"\x00"+name] {
			return fmt.Errorf("checkpoint %d: two %ss named %q", m.ID, kind, name)
		}
		seen[kind+"\x00"+name] = true
		return nil
	}
	for _, s := range m.Sources {
		if err := unique("source", s.Name); err != nil {
			return err
		}
		splits := make(map[uint32]bool, len(s.Splits))
		for _, sp := range s.Splits {
			if splits[sp.Split] {
				return fmt.Errorf("checkpoint %d: source %q lists split %d twice", m.ID, s.Name, sp.Split)
			}
			splits[sp.Split] = true
		}
	}
	for _, s := range m.Sinks {
		if err := unique("sink", s.Name); err != nil {
			return err
		}
	}
	for _, op := range m.Operators {
		if err := unique("operator", op.Name); err != nil {
			return err
		}
		for i, p := range op.Parts {
			where := fmt.Sprintf("checkpoint %d: operator %q part %d", m.ID, op.Name, i)
			switch {
			case p.KeyGroupStart > p.KeyGroupEnd:
				return fmt.Errorf("%s: key groups [%d, %d) run backwards", where, p.KeyGroupStart, p.KeyGroupEnd)
			case op.MaxParallelism > 0 && p.KeyGroupEnd > op.MaxParallelism:
				return fmt.Errorf("%s: key groups [%d, %d) exceed the operator's %d key groups", where, p.KeyGroupStart, p.KeyGroupEnd, op.MaxParallelism)
			case op.Parallelism > 0 && p.Subtask >= op.Parallelism:
				return fmt.Errorf("%s: subtask %d of an operator with parallelism %d", where, p.Subtask, op.Parallelism)
			case p.Size < 0:
				return fmt.Errorf("%s: negative size %d", where, p.Size)
			case p.Blob != "" && !files[p.Blob]:
				return fmt.Errorf("%s: blob %q is not listed in Files", where, p.Blob)
			case p.Pebble != nil && p.Blob == "":
				return fmt.Errorf("%s: Pebble files without a state header blob", where)
			}
			if p.Pebble != nil {
				if db0, db1 := p.DBKeyGroups(); db0 > p.KeyGroupStart || db1 < p.KeyGroupEnd || op.MaxParallelism > 0 && db1 > op.MaxParallelism {
					return fmt.Errorf("%s: a Pebble database of key groups [%d, %d) cannot hold the part's [%d, %d) (of %d)", where, db0, db1, p.KeyGroupStart, p.KeyGroupEnd, op.MaxParallelism)
				}
				for j, f := range p.Pebble.Files {
					switch {
					case f.Name == "" || strings.ContainsAny(f.Name, "/\\") || f.Name == "." || f.Name == "..":
						return fmt.Errorf("%s: Pebble file %d: %q is not a file name", where, j, f.Name)
					case f.Size < 0:
						return fmt.Errorf("%s: Pebble file %s: negative size %d", where, f.Name, f.Size)
					case f.Offset < 0 || f.Offset > 0 && !f.InBundle:
						return fmt.Errorf("%s: Pebble file %s: offset %d in an object it does not share", where, f.Name, f.Offset)
					case !files[f.Object]:
						return fmt.Errorf("%s: Pebble file %s: object %q is not listed in Files", where, f.Name, f.Object)
					}
				}
			}
		}
		for i, l := range op.Changelog {
			where := fmt.Sprintf("checkpoint %d: operator %q log part %d", m.ID, op.Name, i)
			switch {
			case l.KeyGroupStart > l.KeyGroupEnd:
				return fmt.Errorf("%s: key groups [%d, %d) run backwards", where, l.KeyGroupStart, l.KeyGroupEnd)
			case op.MaxParallelism > 0 && l.KeyGroupEnd > op.MaxParallelism:
				return fmt.Errorf("%s: key groups [%d, %d) exceed the operator's %d key groups", where, l.KeyGroupStart, l.KeyGroupEnd, op.MaxParallelism)
			case l.Upto < l.After:
				return fmt.Errorf("%s: sequence range (%d, %d] runs backwards", where, l.After, l.Upto)
			case len(l.CRCs) != 0 && len(l.CRCs) != len(l.Objects):
				return fmt.Errorf("%s: %d checksums for %d log objects", where, len(l.CRCs), len(l.Objects))
			}
			for _, o := range l.Objects {
				if !files[o] {
					return fmt.Errorf("%s: log object %q is not listed in Files", where, o)
				}
			}
			for _, u := range l.Uploads {
				if err := blob.CheckUpload("log object", u.Object, u.ID, u.Parts, u.Size, l.Objects); err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
			}
		}
	}
	return nil
}
