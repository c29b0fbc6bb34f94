package inspect

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
	"github.com/eddyflow/eddy/state/pebble"
)

// Problem is one thing wrong with a checkpoint: the object and what.
type Problem struct {
	File string `json:"file"`
	What string `json:"what"`
}

func (p Problem) String() string { return p.File + ": " + p.What }

// Report is the result of Verify.
type Report struct {
	ID         uint64 `json:"id"`
	Files      int    `json:"files"`       // objects read
	Bytes      int64  `json:"bytes"`       // their payload bytes
	Parts      int    `json:"parts"`       // state parts decoded
	Entries    int64  `json:"entries"`     // state entries framed
	LogObjects int    `json:"log_objects"` // log objects decoded
	Changes    int64  `json:"changes"`     // logged changes decoded
	// Uploads are the log objects not (yet) visible whose upload the
	// manifest records: their parts are durable and a restore completes
	// them, so they are no problem (their bytes are checked on restore).
	Uploads  int       `json:"uploads,omitempty"`
	Problems []Problem `json:"problems"`
}

// Verify reads every object checkpoint id lists and checks it: the
// manifest decodes and names its own id; every file exists and its blob
// trailer (length, CRC-32C) holds; every state part's payload has the size
// and CRC the manifest records, its header decodes with max parallelism of
// the operator, its key and value schemas decode, every entry is framed
// and lies in its key group, and each value decodes with its schema; every
// log object decodes (its own checksum holds) and has the checksum the
// manifest records. It reports every problem, naming the file, and returns
// an error only when the store itself cannot be read. progress, if not nil,
// is called after each object.
func Verify(ctx context.Context, store blob.Store, id uint64, progress func(done, total int)) (*Report, error) {
	r := &Report{ID: id, Problems: []Problem{}}
	st := checkpoint.NewStorage(store, 0)
	name := st.ManifestName(id)
	data, err := store.Get(ctx, name)
	r.Files++
	if err != nil {
		if isDamage(err) {
			r.problem(name, err)
			return r, nil
		}
		return nil, err
	}
	r.Bytes += int64(len(data))
	m, err := checkpoint.DecodeManifest(data)
	if err != nil {
		r.problem(name, err)
		return r, nil
	}
	if m.ID != id {
		r.Problems = append(r.Problems, Problem{name, fmt.Sprintf("describes checkpoint %d, not %d", m.ID, id)})
	}

	// What each file is, so each is read once and checked for what it is.
	parts := map[string][]partRef{}
	logs := map[string][]logRef{}
	pebbleFiles := map[string][]pebbleRef{}
	uploads := map[string]bool{} // log objects with a recorded upload
	for _, op := range m.Operators {
		for i, p := range op.Parts {
			if p.Blob != "" {
				parts[p.Blob] = append(parts[p.Blob], partRef{op: op.Name, maxPar: op.MaxParallelism, index: i, part: p})
			}
			if p.Pebble != nil {
				for _, f := range p.Pebble.Files {
					pebbleFiles[f.Object] = append(pebbleFiles[f.Object], pebbleRef{op: op.Name, index: i, file: f})
				}
			}
		}
		for i, l := range op.Changelog {
			for _, u := range l.Uploads {
				uploads[u.Object] = true
			}
			for j, o := range l.Objects {
				ref := logRef{op: op.Name, index: i, writer: l.Writer}
				if len(l.CRCs) == len(l.Objects) {
					ref.crc, ref.hasCRC = l.CRCs[j], true
				}
				logs[o] = append(logs[o], ref)
			}
		}
	}
	files := slices.Clone(m.Files)
	for f := range parts {
		if !slices.Contains(files, f) {
			files = append(files, f) // DecodeManifest refuses this; kept for safety
		}
	}
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, err := store.Get(ctx, f)
		r.Files++
		switch {
		case err == nil:
			r.Bytes += int64(len(data))
			for _, ref := range parts[f] {
				r.checkPart(f, data, ref)
			}
			if refs := logs[f]; len(refs) > 0 {
				r.checkLog(f, data, refs)
			}
			for _, ref := range pebbleFiles[f] {
				r.checkPebbleFile(f, data, ref)
			}
		case errors.Is(err, blob.ErrNotFound) && uploads[f]:
			r.Uploads++
		case isDamage(err):
			r.problem(f, err)
		default:
			return nil, err
		}
		if progress != nil {
			progress(i+1, len(files))
		}
	}
	return r, nil
}

type partRef struct {
	op     string
	maxPar uint32
	index  int
	part   checkpoint.StatePart
}

type pebbleRef struct {
	op    string
	index int // of the part
	file  checkpoint.PebbleFile
}

// checkPebbleFile checks one file of a Pebble checkpoint against the size
// and CRC-32C its part records, as a restore does.
func (r *Report) checkPebbleFile(file string, data []byte, ref pebbleRef) {
	where := fmt.Sprintf("Pebble file %s of state part %d of operator %q", ref.file.Name, ref.index, ref.op)
	if _, err := pebble.File(ref.file).Contents(data); err != nil {
		r.Problems = append(r.Problems, Problem{file, fmt.Sprintf("%s: %v", where, err)})
	}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type logRef struct {
	op     string
	index  int
	writer string
	crc    uint32
	hasCRC bool
}

func isDamage(err error) bool {
	var ce *blob.CorruptError
	return errors.As(err, &ce) || errors.Is(err, blob.ErrNotFound)
}

func (r *Report) problem(file string, err error) {
	what := err.Error()
	var ce *blob.CorruptError
	switch {
	case errors.As(err, &ce):
		what = "corrupt: " + ce.Reason
	case errors.Is(err, blob.ErrNotFound):
		what = "missing (listed by the manifest, not in the store)"
	}
	r.Problems = append(r.Problems, Problem{file, what})
}

func (r *Report) checkPart(file string, data []byte, ref partRef) {
	where := fmt.Sprintf("state part %d of operator %q", ref.index, ref.op)
	bad := func(format string, args ...any) {
		r.Problems = append(r.Problems, Problem{file, where + ": " + fmt.Sprintf(format, args...)})
	}
	if ref.part.Size != int64(len(data)) {
		bad("%d bytes, the manifest records %d", len(data), ref.part.Size)
	}
	if ref.part.CRC != 0 {
		if got := blob.Checksum(data); got != ref.part.CRC {
			bad("crc32c %08x, the manifest records %08x (another object under this name)", got, ref.part.CRC)
		}
	}
	info, err := state.ReadPart(data)
	if err != nil {
		bad("%v", err)
		return
	}
	r.Parts++
	if ref.maxPar != 0 && info.MaxParallelism != int(ref.maxPar) {
		bad("%d key groups, the operator has %d", info.MaxParallelism, ref.maxPar)
	}
	if _, err := serde.ParseSchema(info.KeySchema); err != nil {
		bad("key schema: %v", err)
	}
	schemas := make([]*serde.Schema, len(info.States))
	for i, s := range info.States {
		vs, err := serde.ParseSchema(s.ValueSchema)
		if err != nil {
			bad("value schema of state %q: %v", s.Name, err)
			continue
		}
		switch s.Kind {
		case "value", "reducing", "list", "map":
		default:
			bad("state %q has unknown kind %q", s.Name, s.Kind)
			continue
		}
		schemas[i] = &vs
	}
	for _, g := range info.Groups {
		if info.MaxParallelism > 0 && g.KeyGroup >= info.MaxParallelism {
			bad("key group %d of %d", g.KeyGroup, info.MaxParallelism)
			continue
		}
		s := info.States[g.State]
		n := 0
		err := g.Entries(func(key, value []byte) error {
			n++
			if info.MaxParallelism > 0 {
				if kg := state.KeyGroupFor(key, info.MaxParallelism); kg != g.KeyGroup {
					return fmt.Errorf("key group %d: entry %d: key %q belongs to key group %d", g.KeyGroup, n-1, Printable(key), kg)
				}
			}
			if vs := schemas[g.State]; vs != nil {
				if _, err := serde.DecodeDynamic(*vs, value); err != nil {
					return fmt.Errorf("key group %d: entry %d (key %q): value: %v", g.KeyGroup, n-1, Printable(key), err)
				}
			}
			return nil
		})
		r.Entries += int64(n)
		if err != nil {
			bad("state %q: %v", s.Name, err)
		}
	}
}

func (r *Report) checkLog(file string, data []byte, refs []logRef) {
	obj, err := dstl.DecodeObject(data)
	if err != nil {
		r.Problems = append(r.Problems, Problem{file, "log object: " + err.Error()})
		return
	}
	r.LogObjects++
	crc := binary.LittleEndian.Uint32(data[16:20]) // the header's checksum; DecodeObject checked the length
	writers := map[string]bool{}
	for _, s := range obj.Sections {
		writers[s.Writer] = true
		r.Changes += int64(len(s.Changes))
	}
	for _, ref := range refs {
		where := fmt.Sprintf("log object of operator %q log part %d (writer %s)", ref.op, ref.index, ref.writer)
		if ref.hasCRC && crc != ref.crc {
			r.Problems = append(r.Problems, Problem{file, fmt.Sprintf("%s: checksum %08x, the manifest records %08x (another object under this name)", where, crc, ref.crc)})
		}
		if !writers[ref.writer] {
			r.Problems = append(r.Problems, Problem{file, where + ": holds no changes of the writer"})
		}
	}
}
