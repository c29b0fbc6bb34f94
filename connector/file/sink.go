package file

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/eddyflow/eddy/connector"
)

// JSONLines returns an exactly-once sink that writes records as JSON lines
// (encoding/json) into files in dir.
//
// Each writer writes its transaction into a hidden pending file,
// ".part-<subtask>-<epoch>-<attempt>.jsonl.pending", where attempt is random
// per writer. PreCommit flushes, fsyncs and closes it; Commit renames it to
// "part-<subtask>-<checkpoint>-<attempt>.jsonl" (subtask and checkpoint
// zero-padded, so names sort by subtask, then checkpoint). Recover commits the
// restored checkpoint's transactions and deletes every other pending file in
// dir. So dir/*.jsonl holds exactly the committed output.
//
// dir belongs to the sink: two sinks, or two jobs, must not share it, since
// Recover deletes every pending file it finds there. The sink's Name, its
// identity in checkpoints, is "file-jsonlines:" and dir's
// connector.CanonicalPath, so a job resumed with another spelling of the
// same directory commits what its checkpoint pre-committed.
func JSONLines[T any](dir string) connector.Sink[T] {
	return &jsonSink[T]{dir: canonical(dir)}
}

// PartitionedJSONLines is JSONLines with each record in the subdirectory
// of dir that partition names for it, Hive-style: for example
// "dt=2015-07-15/hour=00". A partition is a relative path of one or more
// non-empty segments without "." or ".."; a record whose partition is not
// fails the job, naming it. Each transaction writes one file per
// partition it touches, committed together by the checkpoint, so every
// partition holds exactly the committed output. Its Name is
// "file-jsonlines-partitioned:" and dir's connector.CanonicalPath.
func PartitionedJSONLines[T any](dir string, partition func(*T) string) connector.Sink[T] {
	return &jsonSink[T]{dir: canonical(dir), partition: partition}
}

// validPartition checks a partition path.
func validPartition(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || strings.ContainsRune(p, 0) {
		return fmt.Errorf("partition %q is not a relative path", p)
	}
	for _, seg := range strings.Split(p, "/") {
		switch {
		case seg == "" || seg == "." || seg == "..":
			return fmt.Errorf("partition %q has an empty, \".\" or \"..\" segment", p)
		case strings.HasPrefix(seg, pendingPrefix):
			return fmt.Errorf("partition %q has a segment starting %q, which names pending files", p, pendingPrefix)
		}
	}
	return nil
}

// canonical is p's connector.CanonicalPath, or p cleaned if the working
// directory is unknown (then opening p fails with the reason).
func canonical(p string) string {
	c, err := connector.CanonicalPath(p)
	if err != nil {
		return filepath.Clean(p)
	}
	return c
}

const (
	pendingPrefix = ".part-"
	pendingSuffix = ".jsonl.pending"
)

type jsonSink[T any] struct {
	dir       string
	partition func(*T) string // nil: one directory
}

func (s *jsonSink[T]) Name() string {
	if s.partition != nil {
		return "file-jsonlines-partitioned:" + s.dir
	}
	return "file-jsonlines:" + s.dir
}

// handle is a pre-committed file: base names in the sink's dir, or in its
// partition Dir. A transaction is one handle (a JSON object) or, from a
// partitioned sink, a JSON array of them.
type handle struct {
	Dir     string `json:"dir,omitempty"`
	Pending string `json:"pending"`
	Final   string `json:"final"`
}

func (s *jsonSink[T]) Recover(ctx context.Context, committed [][]byte) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return dirError(err)
	}
	if err := s.Commit(ctx, committed); err != nil {
		return err
	}
	// Every pending file not committed above is aborted: in dir, and in
	// its partitions when partitioned.
	removed := map[string]bool{}
	err := s.walk(func(dir string, e fs.DirEntry) error {
		name := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(name, pendingPrefix) && strings.HasSuffix(name, pendingSuffix) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("file sink: recover: abort %w", err)
			}
			removed[dir] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	for dir := range removed {
		if err := syncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

// walk calls fn for every entry of the sink's directory and, when
// partitioned, of every directory below it.
func (s *jsonSink[T]) walk(fn func(dir string, e fs.DirEntry) error) error {
	if s.partition == nil {
		entries, err := os.ReadDir(s.dir)
		if err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
		for _, e := range entries {
			if err := fn(s.dir, e); err != nil {
				return err
			}
		}
		return nil
	}
	return filepath.WalkDir(s.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
		if path == s.dir {
			return nil
		}
		return fn(filepath.Dir(path), e)
	})
}

func (s *jsonSink[T]) Commit(_ context.Context, txns [][]byte) error {
	renamed := map[string]bool{}
	for _, txn := range txns {
		if len(txn) == 0 {
			continue
		}
		hs, err := parseHandles(txn)
		if err != nil {
			return fmt.Errorf("file sink %s: commit: %w", s.dir, err)
		}
		for _, h := range hs {
			dir := filepath.Join(s.dir, filepath.FromSlash(h.Dir))
			pending, final := filepath.Join(dir, h.Pending), filepath.Join(dir, h.Final)
			err = os.Rename(pending, final)
			switch {
			case err == nil:
				renamed[dir] = true
			case errors.Is(err, fs.ErrNotExist):
				// Committed before (a retried Commit, or Recover after a
				// commit that completed): the final file must be there.
				if _, serr := os.Stat(final); serr != nil {
					return fmt.Errorf("file sink: commit: neither pending %s nor final %s exists: committed output is lost", pending, final)
				}
			default:
				return fmt.Errorf("file sink: commit: %w", err)
			}
		}
	}
	for dir := range renamed {
		if err := syncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

// parseHandles reads a transaction: one handle, or an array of them.
func parseHandles(txn []byte) ([]handle, error) {
	var hs []handle
	if len(txn) > 0 && txn[0] == '[' {
		if err := json.Unmarshal(txn, &hs); err != nil {
			return nil, fmt.Errorf("bad transaction handle %q: %w", txn, err)
		}
	} else {
		var h handle
		if err := json.Unmarshal(txn, &h); err != nil {
			return nil, fmt.Errorf("bad transaction handle %q: %w", txn, err)
		}
		hs = []handle{h}
	}
	ok := func(name, prefix, suffix string) bool {
		return strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix) &&
			filepath.Base(name) == name && !strings.ContainsAny(name, `/\`)
	}
	for _, h := range hs {
		if !ok(h.Pending, pendingPrefix, pendingSuffix) || !ok(h.Final, "part-", ".jsonl") {
			return nil, fmt.Errorf("bad transaction handle %q: unexpected file names", txn)
		}
		if h.Dir != "" {
			if err := validPartition(h.Dir); err != nil {
				return nil, fmt.Errorf("bad transaction handle %q: %w", txn, err)
			}
		}
	}
	return hs, nil
}

func (s *jsonSink[T]) OpenWriter(_ context.Context, subtask, parallelism int) (connector.SinkWriter[T], error) {
	if subtask < 0 || subtask >= parallelism {
		return nil, fmt.Errorf("file sink %s: subtask %d of %d", s.dir, subtask, parallelism)
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("file sink: attempt id: %w", err)
	}
	return &jsonWriter[T]{dir: s.dir, partition: s.partition, subtask: subtask, attempt: hex.EncodeToString(id[:]), epoch: 1,
		open: map[string]*pendingFile{}}, nil
}

// jsonWriter writes one subtask's transactions. A transaction has at most
// one pending file per partition (one in all without partitions), open
// from its first Write after a PreCommit to the next PreCommit.
type jsonWriter[T any] struct {
	dir       string
	partition func(*T) string
	subtask   int
	attempt   string
	epoch     uint64 // last pre-committed checkpoint + 1: names the next pending files

	open  map[string]*pendingFile // by partition ("" without)
	order []string                // partitions in the order their files opened
	last  *pendingFile            // the file of the last record's partition
	lastP string
	spare *bufio.Writer // a buffer of a closed file, for the next
	made  map[string]bool
}

// pendingFile is an open pending file of the current transaction.
type pendingFile struct {
	dir  string // its directory
	part string // its partition, "" without
	name string // its base name
	f    *os.File
	bw   *bufio.Writer
	enc  *json.Encoder
}

func (p *pendingFile) path() string { return filepath.Join(p.dir, p.name) }

func (w *jsonWriter[T]) Write(rec *T) error {
	part := ""
	if w.partition != nil {
		part = w.partition(rec)
	}
	pf := w.last
	if pf == nil || part != w.lastP {
		var err error
		if pf, err = w.file(part); err != nil {
			return err
		}
		w.last, w.lastP = pf, part
	}
	if err := pf.enc.Encode(rec); err != nil {
		return fmt.Errorf("file sink: write %s: %w", pf.path(), err)
	}
	return nil
}

// file returns the transaction's pending file of partition part, opening
// it (and creating the partition's directory) if need be.
func (w *jsonWriter[T]) file(part string) (*pendingFile, error) {
	if pf, ok := w.open[part]; ok {
		return pf, nil
	}
	dir := w.dir
	if w.partition != nil {
		if err := validPartition(part); err != nil {
			return nil, connector.Permanent(fmt.Errorf("file sink %s: %w", w.dir, err))
		}
		dir = filepath.Join(w.dir, filepath.FromSlash(part))
		if !w.made[dir] {
			if err := w.mkdir(dir); err != nil {
				return nil, err
			}
		}
	}
	pf := &pendingFile{dir: dir, part: part,
		name: fmt.Sprintf("%s%05d-%010d-%s%s", pendingPrefix, w.subtask, w.epoch, w.attempt, pendingSuffix)}
	f, err := os.OpenFile(pf.path(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	pf.f = f
	if w.spare != nil {
		pf.bw, w.spare = w.spare, nil
		pf.bw.Reset(f)
	} else {
		pf.bw = bufio.NewWriterSize(f, 64<<10)
	}
	pf.enc = json.NewEncoder(pf.bw)
	pf.enc.SetEscapeHTML(false)
	w.open[part] = pf
	w.order = append(w.order, part)
	return pf, nil
}

// mkdir creates a partition directory and makes its entry, and those of
// the directories above it that it created, durable.
func (w *jsonWriter[T]) mkdir(dir string) error {
	var created []string
	for d := dir; d != w.dir && len(d) > len(w.dir); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		created = append(created, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return dirError(err)
	}
	for _, d := range created {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	if w.made == nil {
		w.made = map[string]bool{}
	}
	w.made[dir] = true
	return nil
}

func (w *jsonWriter[T]) PreCommit(checkpointID uint64) ([]byte, error) {
	w.epoch = checkpointID + 1
	if len(w.order) == 0 {
		return nil, nil
	}
	files := w.order
	w.order, w.last = nil, nil
	var err error
	synced := map[string]bool{}
	hs := make([]handle, len(files))
	for i, part := range files {
		pf := w.open[part]
		delete(w.open, part)
		hs[i] = handle{Dir: part, Pending: pf.name, Final: fmt.Sprintf("part-%05d-%010d-%s.jsonl", w.subtask, checkpointID, w.attempt)}
		if err == nil {
			err = pf.bw.Flush()
		}
		if err == nil {
			err = pf.f.Sync()
		}
		if cerr := pf.f.Close(); err == nil {
			err = cerr
		}
		if err == nil && !synced[pf.dir] {
			// The pending file must survive a machine crash until Commit.
			err = syncDir(pf.dir)
			synced[pf.dir] = true
		}
		pf.bw.Reset(nil)
		w.spare = pf.bw
		if err != nil {
			err = fmt.Errorf("file sink: pre-commit %s: %w", pf.path(), err)
		}
	}
	if err != nil {
		for _, h := range hs {
			os.Remove(filepath.Join(w.dir, filepath.FromSlash(h.Dir), h.Pending))
		}
		return nil, err
	}
	if w.partition == nil {
		return json.Marshal(hs[0])
	}
	return json.Marshal(hs)
}

func (w *jsonWriter[T]) Close() error {
	var err error
	for _, part := range w.order {
		pf := w.open[part]
		delete(w.open, part)
		pf.bw.Reset(nil)
		pf.f.Close()
		if rerr := os.Remove(pf.path()); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = fmt.Errorf("file sink: abort: %w", rerr)
		}
	}
	w.order, w.last = nil, nil
	return err
}

// syncDir makes renames and new files in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("file sink: sync dir: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("file sink: sync dir %s: %w", dir, err)
	}
	return nil
}

var _ connector.RollbackSink = (*jsonSink[int])(nil)

// committedAfter lists the committed files of checkpoints after id: their
// names are part-<subtask>-<checkpoint>-<attempt>.jsonl.
// names are part-<subtask>-<checkpoint>-<attempt>.jsonl, paths relative
// to the sink's directory.
func (s *jsonSink[T]) committedAfter(id uint64) ([]string, error) {
	if _, err := os.Stat(s.dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var after []string
	err := s.walk(func(dir string, e fs.DirEntry) error {
		parts := strings.Split(strings.TrimSuffix(e.Name(), ".jsonl"), "-")
		if e.IsDir() || !strings.HasPrefix(e.Name(), "part-") || !strings.HasSuffix(e.Name(), ".jsonl") || len(parts) != 4 {
			return nil
		}
		if c, err := strconv.ParseUint(parts[2], 10, 64); err == nil && c > id {
			rel, err := filepath.Rel(s.dir, filepath.Join(dir, e.Name()))
			if err != nil {
				return err
			}
			after = append(after, rel)
		}
		return nil
	})
	if err != nil {
		return nil, dirError(err)
	}
	return after, nil
}

// CommittedAfter describes the committed files of checkpoints after id.
func (s *jsonSink[T]) CommittedAfter(_ context.Context, id uint64) (string, error) {
	after, err := s.committedAfter(id)
	if err != nil || len(after) == 0 {
		return "", err
	}
	return fmt.Sprintf("%d committed files in %s, first %s", len(after), s.dir, after[0]), nil
}

// RollBack deletes the committed files of checkpoints after id.
func (s *jsonSink[T]) RollBack(_ context.Context, id uint64) error {
	after, err := s.committedAfter(id)
	if err != nil {
		return err
	}
	dirs := map[string]bool{}
	for _, name := range after {
		path := filepath.Join(s.dir, name)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file sink: rolling back: %w", err)
		}
		dirs[filepath.Dir(path)] = true
	}
	for dir := range dirs {
		if err := syncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

// dirError is err from using the sink's directory; a file where the
// directory should be is permanent: no retry fixes it.
func dirError(err error) error {
	err = fmt.Errorf("file sink: %w", err)
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EEXIST) {
		return connector.Permanent(err)
	}
	return err
}
