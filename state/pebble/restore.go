package pebble

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/internal/parallel"
)

// CorruptFileError reports a downloaded checkpoint file whose size or
// checksum is not what the checkpoint recorded: the checkpoint cannot be
// restored from (choose an older one).
type CorruptFileError struct {
	File   string // the file's name in the DB directory
	Object string // the object it was read from
	Reason string
}

func (e *CorruptFileError) Error() string {
	return fmt.Sprintf("pebble: checkpoint file %s (object %q) is corrupt: %s", e.File, e.Object, e.Reason)
}

// restorePlan is how a restore builds the key groups [start, end) from the
// parts of a checkpoint: it opens part base and cuts away every key group
// but keep, then copies the key groups of the copies from their parts.
type restorePlan struct {
	base         int // -1: no part has files; the DB starts empty
	keep0, keep1 int
	copies       []rangeCopy
}

type rangeCopy struct {
	part     int
	from, to int // key groups [from, to)
}

// planRestore chooses the part whose own key groups (Checkpoint.OwnStart)
// overlap [start, end) most as the base and the ranges to copy from the
// others. It fails if the parts' own key groups overlap or leave a key
// group of [start, end) out, or a part claims key groups its database did
// not hold. Parts without files cover their key groups but give nothing.
func planRestore(maxParallelism, start, end int, parts []Checkpoint) (restorePlan, error) {
	plan := restorePlan{base: -1}
	best := 0
	covered := 0
	for i, p := range parts {
		if int(p.MaxParallelism) != maxParallelism {
			return plan, fmt.Errorf("pebble: checkpoint part %d has %d key groups (max parallelism) but the job has %d", i, p.MaxParallelism, maxParallelism)
		}
		o0, o1 := p.own()
		if o0 >= o1 {
			return plan, fmt.Errorf("pebble: checkpoint part %d holds no key groups ([%d, %d))", i, o0, o1)
		}
		if len(p.Files) > 0 && (o0 < int(p.Start) || o1 > int(p.End)) {
			return plan, fmt.Errorf("pebble: checkpoint part %d is listed for key groups [%d, %d), but its database held [%d, %d)", i, o0, o1, p.Start, p.End)
		}
		for j := range i {
			if q0, q1 := parts[j].own(); o0 < q1 && q0 < o1 {
				return plan, fmt.Errorf("pebble: checkpoint parts %d [%d, %d) and %d [%d, %d) overlap", j, q0, q1, i, o0, o1)
			}
		}
		n := min(o1, end) - max(o0, start)
		if n <= 0 {
			continue
		}
		covered += n
		if n > best && len(p.Files) > 0 {
			best, plan.base = n, i
		}
	}
	if covered != end-start {
		return plan, fmt.Errorf("pebble: the checkpoint's parts cover %d of the key groups [%d, %d)", covered, start, end)
	}
	if plan.base >= 0 {
		o0, o1 := parts[plan.base].own()
		plan.keep0, plan.keep1 = max(o0, start), min(o1, end)
	}
	for i, p := range parts {
		if i == plan.base || len(p.Files) == 0 {
			continue
		}
		o0, o1 := p.own()
		if from, to := max(o0, start), min(o1, end); from < to {
			plan.copies = append(plan.copies, rangeCopy{part: i, from: from, to: to})
		}
	}
	return plan, nil
}

// Restore builds the DB of the key groups [start, end) in dir from the
// parts of a checkpoint (one per subtask of the parallelism it was taken
// at) and opens it. With the same key groups it downloads the one part and
// opens it. Otherwise it downloads the part overlapping most, cuts away its
// foreign key groups with range deletions, and copies the key groups of the
// other overlapping parts from them. A part narrowed to some of its key
// groups (Checkpoint.OwnStart) gives only those. Whatever dir held is
// replaced.
//
// Every downloaded file is checked against the size and CRC-32C the
// checkpoint recorded; a mismatch fails with a *CorruptFileError.
func (p *Pool) Restore(ctx context.Context, store blob.Store, dir string, maxParallelism, start, end int, parts []Checkpoint) (*DB, error) {
	plan, err := planRestore(maxParallelism, start, end, parts)
	if err != nil {
		return nil, err
	}
	if plan.base < 0 {
		if err := os.RemoveAll(dir); err != nil {
			return nil, &DirError{Dir: dir, Op: "clear", Err: err}
		}
		return p.Open(dir, maxParallelism, start, end)
	}
	local := p.localCopies()
	st, err := download(ctx, store, dir, parts[plan.base].Files, local)
	if err != nil {
		return nil, err
	}
	d, err := p.open(dir, maxParallelism, start, end, true)
	if err != nil {
		return nil, err
	}
	d.restoreStats = st
	base := parts[plan.base]
	d.restored = &base
	if err := d.cut(int(base.Start), int(base.End), plan.keep0, plan.keep1); err != nil {
		d.Close()
		return nil, err
	}
	for _, c := range plan.copies {
		if err := d.copyFrom(ctx, store, parts[c.part], c.from, c.to, local); err != nil {
			d.Close()
			return nil, err
		}
	}
	if err := d.Flush(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Restored returns the checkpoint part the DB was restored from (its base),
// to pass as CheckpointOptions.Prev of its first checkpoint, or nil.
func (d *DB) Restored() *Checkpoint { return d.restored }

// cut deletes the key groups of [have0, have1) outside [keep0, keep1).
func (d *DB) cut(have0, have1, keep0, keep1 int) error {
	if have0 < keep0 {
		if _, err := d.write("delete foreign key groups", func() error {
			return d.db.DeleteRange(groupBound(have0), groupBound(keep0), pebble.NoSync)
		}); err != nil {
			return err
		}
	}
	if have1 > keep1 {
		if _, err := d.write("delete foreign key groups", func() error {
			return d.db.DeleteRange(groupBound(keep1), groupBound(have1), pebble.NoSync)
		}); err != nil {
			return err
		}
	}
	return nil
}

// copyBatch is how many bytes of records a copy commits at once.
const copyBatch = 4 << 20

// copyFrom copies the key groups [from, to) of part into the DB.
func (d *DB) copyFrom(ctx context.Context, store blob.Store, part Checkpoint, from, to int, local *localCopies) (rerr error) {
	tmp := fmt.Sprintf("%s.part-%d-%d", d.dir, part.Start, part.End)
	defer os.RemoveAll(tmp)
	st, err := download(ctx, store, tmp, part.Files, local)
	d.restoreStats.add(st)
	if err != nil {
		return err
	}
	// A read-only DB runs no flush or compaction: a failure of it can
	// only be fatal, and fails the copy at its end.
	var (
		mu      sync.Mutex
		failure error
	)
	o := d.pool.options(func(err error) {
		mu.Lock()
		failure = cmp.Or(failure, err)
		mu.Unlock()
	})
	o.ReadOnly, o.ErrorIfNotExists = true, true
	src, err := pebble.Open(tmp, o)
	if err != nil {
		return &DirError{Dir: tmp, Op: "open checkpoint part", Err: err}
	}
	defer src.Close()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		if failure != nil && rerr == nil {
			rerr = &DirError{Dir: tmp, Op: "read checkpoint part", Err: failure}
		}
	}()
	it, err := src.NewIter(&pebble.IterOptions{LowerBound: groupBound(from), UpperBound: groupBound(to)})
	if err != nil {
		return &DirError{Dir: tmp, Op: "read", Err: err}
	}
	defer it.Close()
	b := d.db.NewBatch()
	held := false // the writer still holds b (see DB.write)
	defer func() {
		if !held {
			b.Close()
		}
	}()
	apply := func() error {
		done, err := d.write("write", func() error { return d.db.Apply(b, pebble.NoSync) })
		held = !done
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return &DirError{Dir: tmp, Op: "read", Err: err}
		}
		if err := b.Set(it.Key(), v, nil); err != nil {
			return d.wrap("write", err)
		}
		if b.Len() >= copyBatch {
			if err := apply(); err != nil {
				return err
			}
			b.Reset()
		}
	}
	if err := it.Error(); err != nil {
		return &DirError{Dir: tmp, Op: "read", Err: err}
	}
	return apply()
}

// download replaces dir with the files of a checkpoint, verifying each,
// taking those it finds in local from there, and fetching the others
// transfers at a time (a bundle of small files once).
func download(ctx context.Context, store blob.Store, dir string, files []File, local *localCopies) (RestoreStats, error) {
	var st RestoreStats
	if err := os.RemoveAll(dir); err != nil {
		return st, &DirError{Dir: dir, Op: "clear", Err: err}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return st, &DirError{Dir: dir, Op: "create", Err: err}
	}
	byObject := map[string][]File{} // the files to fetch, by object
	var objects []string
	for _, f := range files {
		if f.Name == "" || f.Name != filepath.Base(f.Name) || f.Name == "." || f.Name == ".." {
			return st, &CorruptFileError{File: f.Name, Object: f.Object, Reason: "not a file name"}
		}
		if local.take(f, filepath.Join(dir, f.Name)) {
			st.LocalFiles++
			st.LocalBytes += f.Size
			continue
		}
		if _, ok := byObject[f.Object]; !ok {
			objects = append(objects, f.Object)
		}
		byObject[f.Object] = append(byObject[f.Object], f)
	}
	var mu sync.Mutex
	err := parallel.ForEach(ctx, len(objects), transfers, func(ctx context.Context, i int) error {
		object := objects[i]
		var buf []byte
		data, err := blob.GetInto(ctx, store, object, &buf)
		if err != nil {
			var ce *blob.CorruptError
			if errors.As(err, &ce) {
				return &CorruptFileError{File: byObject[object][0].Name, Object: object, Reason: err.Error()}
			}
			return fmt.Errorf("pebble: download of checkpoint file %s: %w", byObject[object][0].Name, err)
		}
		for _, f := range byObject[object] {
			contents, err := f.Contents(data)
			if err != nil {
				return &CorruptFileError{File: f.Name, Object: f.Object, Reason: err.Error()}
			}
			if err := writeRestored(filepath.Join(dir, f.Name), contents); err != nil {
				return &DirError{Dir: dir, Op: "write " + f.Name, Err: err}
			}
			mu.Lock()
			st.DownloadedFiles++
			st.DownloadedBytes += f.Size
			mu.Unlock()
		}
		return nil
	})
	return st, err
}

// writeRestored writes a restored file, as os.WriteFile does, and starts
// its writeback at once (startWriteback), so that the restore's writes
// reach the disk while it runs rather than after it.
func writeRestored(path string, contents []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(contents)
	if err == nil {
		startWriteback(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
