package pebble

import (
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/internal/parallel"
)

// Checkpoint is a checkpoint of one DB in blob storage, as the job's
// manifest lists it: the key groups it holds and its files. Restore reads
// it back; Unreferenced computes what retention may delete from the
// checkpoints it keeps.
type Checkpoint struct {
	MaxParallelism uint32 `proto:"1,name=max_parallelism"`
	Start          uint32 `proto:"2"` // key groups [Start, End)
	End            uint32 `proto:"3"`
	Files          []File `proto:"4"`
	// OwnStart and OwnEnd, when OwnEnd is not 0, narrow the key groups a
	// restore takes from this checkpoint to [OwnStart, OwnEnd), within
	// [Start, End): with the changelog state backend, a subtask restored
	// at another parallelism lists the checkpoints it was restored from,
	// whole, for its own key groups only. A checkpoint without files
	// (Files empty) stands for key groups that start empty, whose state
	// the caller loads otherwise (a heap snapshot part).
	OwnStart uint32 `proto:"5,name=own_start"`
	OwnEnd   uint32 `proto:"6,name=own_end"`
}

// own returns the key groups a restore takes from c.
func (c Checkpoint) own() (start, end int) {
	if c.OwnEnd > 0 {
		return int(c.OwnStart), int(c.OwnEnd)
	}
	return int(c.Start), int(c.End)
}

// File is one file of a checkpoint: the name it has in a DB directory, the
// object holding its bytes, and their size and CRC-32C (Castagnoli), which
// a restore verifies. An SST's object is shared by every checkpoint that
// holds the file; the other files (MANIFEST, OPTIONS, markers) are small
// and uploaded with each checkpoint, all in one object, a bundle
// (InBundle), at Offset: one request per checkpoint and DB rather than one
// per file.
type File struct {
	Name     string `proto:"1"`
	Object   string `proto:"2"`
	Size     int64  `proto:"3"`
	CRC32C   uint32 `proto:"4,fixed,name=crc32c"`
	InBundle bool   `proto:"5,name=in_bundle"`
	Offset   int64  `proto:"6"`
}

// Contents returns f's bytes from the payload of its object, verified
// against f's size and CRC-32C; the error says what does not match. A file
// alone in its object must be all of it; a bundled one lies at its Offset.
func (f File) Contents(object []byte) ([]byte, error) {
	if !f.InBundle {
		if int64(len(object)) != f.Size {
			return nil, fmt.Errorf("%d bytes, the checkpoint recorded %d", len(object), f.Size)
		}
	} else if f.Offset < 0 || f.Size < 0 || f.Offset > int64(len(object)) || f.Size > int64(len(object))-f.Offset {
		return nil, fmt.Errorf("bytes [%d, %d) of a %d-byte bundle", f.Offset, f.Offset+f.Size, len(object))
	}
	data := object[f.Offset : f.Offset+f.Size]
	if c := crc32.Checksum(data, castagnoli); c != f.CRC32C {
		return nil, fmt.Errorf("CRC-32C %08x, the checkpoint recorded %08x", c, f.CRC32C)
	}
	return data, nil
}

// transfers is how many files a checkpoint uploads, or a restore
// downloads, at once: an object store's latency, not its bandwidth, bounds
// one request at a time.
const transfers = 4

// CheckpointOptions says where a checkpoint goes.
type CheckpointOptions struct {
	// Prefix is the object name prefix of the DB's files, the same for
	// every checkpoint of one DB (say "state/<operator>/<subtask>").
	Prefix string
	// Run is a token unique to this run of the job (an attempt). SSTs are
	// named <Prefix>/sst/<Run>-<file>, so a run restored from an older
	// checkpoint, whose DB re-creates a file number, never overwrites an
	// object an older checkpoint still lists.
	Run string
	// ID is the checkpoint's id; the small files go under <Prefix>/<ID>/.
	ID uint64
	// Prev is the last completed checkpoint of this DB, or the one it was
	// restored from (DB.Restored): SSTs it lists are not uploaded again.
	// Nil uploads every file.
	Prev *Checkpoint
	// Background paces the upload by the pool's BackgroundUploadRate: a
	// checkpoint nothing waits for (a materialization of the changelog
	// state backend), which may take longer so as to leave the disk to
	// the job.
	Background bool
}

// CheckpointStats says what a checkpoint uploaded and what it reused.
type CheckpointStats struct {
	UploadedFiles, ReusedFiles int
	UploadedBytes, ReusedBytes int64
}

// LocalCheckpoint is a checkpoint of a DB on local disk (hard links to its
// files), taken between two batches of records and uploaded in the
// background.
type LocalCheckpoint struct {
	db    *DB
	dir   string
	names []string
}

// immutable reports whether a checkpoint file never changes once written:
// an SST or a blob (value) file. Its object is shared between checkpoints.
func immutable(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// TakeCheckpoint commits pending writes, flushes the memtables and takes a
// Pebble checkpoint of the DB into a directory next to it. It is the part
// of a checkpoint that must happen between two batches of records; Upload
// may then run on another goroutine while the DB takes writes.
func (d *DB) TakeCheckpoint(id uint64) (*LocalCheckpoint, error) {
	if err := d.Flush(); err != nil {
		return nil, err
	}
	return d.checkpointTo(id)
}

// TakeCheckpointAsync is TakeCheckpoint in two halves. It commits the
// pending writes and starts a flush of the memtables, which is what must
// happen between two batches of records; the function it returns, which
// may run on another goroutine while the DB takes writes, waits for the
// flush and takes the checkpoint. The checkpoint holds every write
// committed before TakeCheckpointAsync, and may hold later ones: a
// snapshot that a log of the writes since makes exact, as the changelog
// state backend's materializations are (replaying a set or a delete that
// the snapshot already holds changes nothing).
func (d *DB) TakeCheckpointAsync(id uint64) (func() (*LocalCheckpoint, error), error) {
	if err := d.Commit(); err != nil {
		return nil, err
	}
	if err := d.checkDir(); err != nil {
		return nil, err
	}
	done, err := d.asyncFlush()
	if err != nil {
		return nil, err
	}
	return func() (*LocalCheckpoint, error) {
		select {
		case <-done:
		case <-d.failed:
		}
		if err := d.Err(); err != nil {
			return nil, err
		}
		return d.checkpointTo(id)
	}, nil
}

// checkpointTo hard-links the DB's files into a directory next to it.
func (d *DB) checkpointTo(id uint64) (*LocalCheckpoint, error) {
	dir := fmt.Sprintf("%s.checkpoint-%d", d.dir, id)
	if err := os.RemoveAll(dir); err != nil { // left by a crash
		return nil, &DirError{Dir: dir, Op: "remove an old checkpoint", Err: err}
	}
	if err := d.db.Checkpoint(dir); err != nil {
		// Release what the failed checkpoint holds (on a full disk: the
		// space of its files), rather than at the next attempt.
		d.fs.closeUnder(dir)
		_ = os.RemoveAll(dir)
		return nil, d.wrap("checkpoint", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, &DirError{Dir: dir, Op: "list checkpoint", Err: err}
	}
	lc := &LocalCheckpoint{db: d, dir: dir}
	for _, e := range ents {
		if e.Type().IsRegular() {
			lc.names = append(lc.names, e.Name())
		}
	}
	return lc, nil
}

// Upload uploads the files of the checkpoint that opts.Prev does not
// already hold and returns the checkpoint for the manifest: the new SSTs,
// transfers at a time, and the small files as one bundle.
func (lc *LocalCheckpoint) Upload(ctx context.Context, store blob.Store, opts CheckpointOptions) (Checkpoint, CheckpointStats, error) {
	d := lc.db
	c := Checkpoint{MaxParallelism: uint32(d.maxPar), Start: uint32(d.start), End: uint32(d.end), Files: make([]File, len(lc.names))}
	var st CheckpointStats
	prev := map[string]File{}
	if opts.Prev != nil {
		for _, f := range opts.Prev.Files {
			if immutable(f.Name) {
				prev[f.Name] = f
			}
		}
	}
	var upload []int  // indexes of the SSTs to upload
	var sizes []int64 // and their sizes
	var bundle []byte
	bundleName := objectName(opts, bundleFile)
	for i, name := range lc.names {
		path := filepath.Join(lc.dir, name)
		if !immutable(name) {
			data, err := os.ReadFile(path)
			if err != nil {
				return Checkpoint{}, st, &DirError{Dir: lc.dir, Op: "read " + name, Err: err}
			}
			c.Files[i] = File{Name: name, Object: bundleName, Size: int64(len(data)), CRC32C: crc32.Checksum(data, castagnoli),
				InBundle: true, Offset: int64(len(bundle))}
			bundle = append(bundle, data...)
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			return Checkpoint{}, st, &DirError{Dir: lc.dir, Op: "stat " + name, Err: err}
		}
		if f, ok := prev[name]; ok && f.Size == fi.Size() {
			c.Files[i] = f
			st.ReusedFiles++
			st.ReusedBytes += f.Size
			continue
		}
		upload = append(upload, i)
		sizes = append(sizes, fi.Size())
	}
	err := parallel.ForEach(ctx, len(upload), transfers, func(ctx context.Context, k int) error {
		i := upload[k]
		name := lc.names[i]
		path := filepath.Join(lc.dir, name)
		if opts.Background {
			if err := d.pool.uploads.wait(ctx, sizes[k]); err != nil {
				return err
			}
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return &DirError{Dir: lc.dir, Op: "read " + name, Err: err}
		}
		f := File{Name: name, Object: objectName(opts, name), Size: int64(len(data)), CRC32C: crc32.Checksum(data, castagnoli)}
		if err := store.Put(ctx, f.Object, data); err != nil {
			return fmt.Errorf("pebble: upload of %s as %s: %w", path, f.Object, err)
		}
		c.Files[i] = f
		return nil
	})
	if err != nil {
		return Checkpoint{}, st, err
	}
	for _, i := range upload {
		st.UploadedFiles++
		st.UploadedBytes += c.Files[i].Size
	}
	if len(bundle) > 0 {
		if err := store.Put(ctx, bundleName, bundle); err != nil {
			return Checkpoint{}, st, fmt.Errorf("pebble: upload of the small files of %s as %s: %w", lc.dir, bundleName, err)
		}
		st.UploadedFiles++
		st.UploadedBytes += int64(len(bundle))
	}
	return c, st, nil
}

// bundleFile names the object of a checkpoint's small files (no DB file
// is named so).
const bundleFile = "files.bundle"

// objectName is the object a file of a checkpoint is uploaded to.
func objectName(opts CheckpointOptions, name string) string {
	if immutable(name) {
		return fmt.Sprintf("%s/sst/%s-%s", opts.Prefix, opts.Run, name)
	}
	return fmt.Sprintf("%s/%d/%s", opts.Prefix, opts.ID, name)
}

// Objects returns the objects that Upload with opts may write, sorted:
// one per file that opts.Prev does not hold. Some may never be written
// (an SST of the same name and size is reused); a caller that must keep
// an upload's objects from being deleted before they are referenced keeps
// all of them.
func (lc *LocalCheckpoint) Objects(opts CheckpointOptions) []string {
	prev := map[string]int64{}
	if opts.Prev != nil {
		for _, f := range opts.Prev.Files {
			if immutable(f.Name) {
				prev[f.Name] = f.Size
			}
		}
	}
	var out []string
	for _, name := range lc.names {
		if !immutable(name) {
			if b := objectName(opts, bundleFile); !slices.Contains(out, b) {
				out = append(out, b)
			}
			continue
		}
		if size, ok := prev[name]; ok {
			// As Upload decides: the same name and size is the same file.
			if fi, err := os.Stat(filepath.Join(lc.dir, name)); err == nil && fi.Size() == size {
				continue
			}
		}
		out = append(out, objectName(opts, name))
	}
	slices.Sort(out)
	return out
}

// Remove deletes the local checkpoint (its hard links).
func (lc *LocalCheckpoint) Remove() error {
	if err := os.RemoveAll(lc.dir); err != nil {
		return &DirError{Dir: lc.dir, Op: "remove checkpoint", Err: err}
	}
	return nil
}

// Checkpoint is TakeCheckpoint, Upload and Remove in one.
func (d *DB) Checkpoint(ctx context.Context, store blob.Store, opts CheckpointOptions) (Checkpoint, CheckpointStats, error) {
	lc, err := d.TakeCheckpoint(opts.ID)
	if err != nil {
		return Checkpoint{}, CheckpointStats{}, err
	}
	c, st, err := lc.Upload(ctx, store, opts)
	if rerr := lc.Remove(); err == nil && rerr != nil {
		err = rerr
	}
	return c, st, err
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Unreferenced returns the objects that the dropped checkpoints list and
// no retained checkpoint does, sorted and each once: what retention may
// delete once the dropped checkpoints' manifests are gone.
func Unreferenced(dropped, retained []Checkpoint) []string {
	keep := map[string]bool{}
	for _, c := range retained {
		for _, f := range c.Files {
			keep[f.Object] = true
		}
	}
	var out []string
	for _, c := range dropped {
		for _, f := range c.Files {
			if !keep[f.Object] {
				keep[f.Object] = true // once
				out = append(out, f.Object)
			}
		}
	}
	slices.Sort(out)
	return out
}

// pacer spreads transfers over time at a rate (BackgroundUploadRate): each waits
// until the transfers before it have had their time at the rate.
type pacer struct {
	rate float64 // bytes per second
	mu   sync.Mutex
	next time.Time // when the next transfer may start
}

// wait reserves n bytes of the rate and returns when the transfer may
// start; a nil pacer does not wait.
func (p *pacer) wait(ctx context.Context, n int64) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	start := p.next
	if now := time.Now(); start.Before(now) {
		start = now
	}
	p.next = start.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	p.mu.Unlock()
	if d := time.Until(start); d > 0 {
		return blob.Sleep(ctx, d)
	}
	return ctx.Err()
}
