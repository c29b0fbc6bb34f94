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
	dir string
}

func (s *jsonSink[T]) Name() string { return "file-jsonlines:" + s.dir }

// handle is a pre-committed transaction: base names in the sink's dir.
type handle struct {
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
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("file sink: recover: %w", err)
	}
	removed := false
	for _, e := range entries {
		name := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(name, pendingPrefix) && strings.HasSuffix(name, pendingSuffix) {
			if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("file sink: recover: abort %w", err)
			}
			removed = true
		}
	}
	if removed {
		return syncDir(s.dir)
	}
	return nil
}

func (s *jsonSink[T]) Commit(_ context.Context, txns [][]byte) error {
	renamed := false
	for _, txn := range txns {
		if len(txn) == 0 {
			continue
		}
		h, err := parseHandle(txn)
		if err != nil {
			return fmt.Errorf("file sink %s: commit: %w", s.dir, err)
		}
		pending, final := filepath.Join(s.dir, h.Pending), filepath.Join(s.dir, h.Final)
		err = os.Rename(pending, final)
		switch {
		case err == nil:
			renamed = true
		case errors.Is(err, fs.ErrNotExist):
			// Committed before (a retried Commit, or Recover after a commit
			// that completed): the final file must be there.
			if _, serr := os.Stat(final); serr != nil {
				return fmt.Errorf("file sink: commit: neither pending %s nor final %s exists: committed output is lost", pending, final)
			}
		default:
			return fmt.Errorf("file sink: commit: %w", err)
		}
	}
	if renamed {
		return syncDir(s.dir)
	}
	return nil
}

func parseHandle(txn []byte) (handle, error) {
	var h handle
	if err := json.Unmarshal(txn, &h); err != nil {
		return h, fmt.Errorf("bad transaction handle %q: %w", txn, err)
	}
	ok := func(name, prefix, suffix string) bool {
		return strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix) &&
			filepath.Base(name) == name && !strings.ContainsAny(name, `/\`)
	}
	if !ok(h.Pending, pendingPrefix, pendingSuffix) || !ok(h.Final, "part-", ".jsonl") {
		return h, fmt.Errorf("bad transaction handle %q: unexpected file names", txn)
	}
	return h, nil
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
	return &jsonWriter[T]{dir: s.dir, subtask: subtask, attempt: hex.EncodeToString(id[:]), epoch: 1}, nil
}

// jsonWriter writes one subtask's transactions. At most one pending file is
// open at a time: from the first Write after a PreCommit to the next
// PreCommit.
type jsonWriter[T any] struct {
	dir     string
	subtask int
	attempt string
	epoch   uint64 // last pre-committed checkpoint + 1: names the next pending file

	f    *os.File // the open pending file, nil between transactions
	name string   // its base name
	bw   *bufio.Writer
	enc  *json.Encoder
}

func (w *jsonWriter[T]) Write(rec *T) error {
	if w.f == nil {
		if err := w.open(); err != nil {
			return err
		}
	}
	if err := w.enc.Encode(rec); err != nil {
		return fmt.Errorf("file sink: write %s: %w", w.path(), err)
	}
	return nil
}

func (w *jsonWriter[T]) path() string { return filepath.Join(w.dir, w.name) }

func (w *jsonWriter[T]) open() error {
	w.name = fmt.Sprintf("%s%05d-%010d-%s%s", pendingPrefix, w.subtask, w.epoch, w.attempt, pendingSuffix)
	f, err := os.OpenFile(w.path(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	w.f = f
	if w.bw == nil {
		w.bw = bufio.NewWriterSize(f, 64<<10)
	} else {
		w.bw.Reset(f)
	}
	w.enc = json.NewEncoder(w.bw)
	w.enc.SetEscapeHTML(false)
	return nil
}

func (w *jsonWriter[T]) PreCommit(checkpointID uint64) ([]byte, error) {
	w.epoch = checkpointID + 1
	if w.f == nil {
		return nil, nil
	}
	f, path := w.f, w.path()
	w.f = nil
	err := w.bw.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// The pending file must survive a machine crash until Commit.
		err = syncDir(w.dir)
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("file sink: pre-commit %s: %w", path, err)
	}
	h := handle{
		Pending: w.name,
		Final:   fmt.Sprintf("part-%05d-%010d-%s.jsonl", w.subtask, checkpointID, w.attempt),
	}
	return json.Marshal(h)
}

func (w *jsonWriter[T]) Close() error {
	if w.f == nil {
		return nil
	}
	f, path := w.f, w.path()
	w.f = nil
	w.bw.Reset(nil)
	f.Close()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file sink: abort: %w", err)
	}
	return nil
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
func (s *jsonSink[T]) committedAfter(id uint64) ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, dirError(err)
	}
	var after []string
	for _, e := range entries {
		parts := strings.Split(strings.TrimSuffix(e.Name(), ".jsonl"), "-")
		if e.IsDir() || !strings.HasPrefix(e.Name(), "part-") || !strings.HasSuffix(e.Name(), ".jsonl") || len(parts) != 4 {
			continue
		}
		if c, err := strconv.ParseUint(parts[2], 10, 64); err == nil && c > id {
			after = append(after, e.Name())
		}
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
	for _, name := range after {
		if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file sink: rolling back: %w", err)
		}
	}
	if len(after) > 0 {
		return syncDir(s.dir)
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
