package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/eddyflow/eddy/connector"
)

// JSONLinesSource returns a bounded source that reads JSON lines
// (encoding/json) from files. paths are file names or filepath.Glob patterns;
// they are expanded once, here, and the sorted, de-duplicated files are the
// splits, so the set of files must not change between runs of a job. A
// pattern that matches nothing stays as it is, so that opening it reports the
// missing file. Blank lines are skipped; a line that is not valid JSON for T
// fails the read with the file name and line number. A split's Position is
// the byte offset after the last line returned, as a uvarint. The source's
// Name, its identity in checkpoints, is "file-jsonlines-source:" followed by
// the files' connector.CanonicalPath, comma-separated: spelling the same
// files another way resumes from the same positions.
func JSONLinesSource[T any](paths ...string) connector.Source[T] {
	return JSONLinesSourceWith[T](SourceOptions{}, paths...)
}

// SourceOptions are the choices of JSONLinesSourceWith.
type SourceOptions struct {
	// DisallowUnknownFields fails the read at a line with a field T does
	// not have (encoding/json's Decoder.DisallowUnknownFields).
	DisallowUnknownFields bool
	// ReplaceInvalidUTF8 accepts lines that are not valid UTF-8, with
	// encoding/json's replacement of each bad byte by U+FFFD; by default
	// such a line fails the read.
	ReplaceInvalidUTF8 bool
}

// JSONLinesSourceWith is JSONLinesSource with options. A line that is not
// a JSON object (null, a number, an array) fails the read when T is a
// struct or a map, whatever the options; every failure names the file, the
// line and its byte offset, and is permanent (connector.Permanent): reading
// the same bytes again cannot succeed.
func JSONLinesSourceWith[T any](o SourceOptions, paths ...string) connector.Source[T] {
	var files []string
	for _, p := range paths {
		m, err := filepath.Glob(p)
		if err != nil || len(m) == 0 {
			m = []string{p}
		}
		for _, f := range m {
			files = append(files, canonical(f))
		}
	}
	slices.Sort(files)
	files = slices.Compact(files)
	k := reflect.TypeFor[T]().Kind()
	return &jsonSource[T]{name: "file-jsonlines-source:" + strings.Join(files, ","), files: files, opts: o,
		object: k == reflect.Struct || k == reflect.Map}
}

type jsonSource[T any] struct {
	name   string
	files  []string
	opts   SourceOptions
	object bool // T is a struct or a map: a line must be a JSON object
}

func (s *jsonSource[T]) Name() string { return s.name }

func (s *jsonSource[T]) Splits() int { return len(s.files) }

func (s *jsonSource[T]) OpenSplit(_ context.Context, split int, pos []byte) (connector.SplitReader[T], error) {
	if split < 0 || split >= len(s.files) {
		return nil, fmt.Errorf("file source: split %d out of range [0, %d)", split, len(s.files))
	}
	path := s.files[split]
	var off int64
	if pos != nil {
		v, n := binary.Uvarint(pos)
		if n <= 0 || n != len(pos) || v > 1<<62 {
			return nil, fmt.Errorf("file source: %s: invalid position %x", path, pos)
		}
		off = int64(v)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("file source: %w", err)
	}
	r := &jsonReader[T]{path: path, f: f, off: off, opts: s.opts, object: s.object}
	if err := r.seek(); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

type jsonReader[T any] struct {
	path   string
	f      *os.File
	br     *bufio.Reader
	off    int64 // offset after the last line returned
	buf    []byte
	opts   SourceOptions
	object bool
}

// seek positions the reader at r.off, which must be the start of a line (or
// the end of the file).
func (r *jsonReader[T]) seek() error {
	st, err := r.f.Stat()
	if err != nil {
		return fmt.Errorf("file source: %w", err)
	}
	if r.off > st.Size() {
		return fmt.Errorf("file source: %s: position %d beyond the end of the file (%d bytes)", r.path, r.off, st.Size())
	}
	if r.off > 0 && r.off < st.Size() {
		var b [1]byte
		if _, err := r.f.ReadAt(b[:], r.off-1); err != nil {
			return fmt.Errorf("file source: %w", err)
		}
		if b[0] != '\n' {
			return fmt.Errorf("file source: %s: position %d is not at the start of a line", r.path, r.off)
		}
	}
	if _, err := r.f.Seek(r.off, io.SeekStart); err != nil {
		return fmt.Errorf("file source: %w", err)
	}
	r.br = bufio.NewReaderSize(r.f, 64<<10)
	return nil
}

func (r *jsonReader[T]) Next(rec *T) (connector.ReadStatus, error) {
	for {
		line, err := r.readLine()
		if len(line) == 0 && err == io.EOF {
			return connector.End, nil
		}
		if err != nil && err != io.EOF {
			return connector.End, fmt.Errorf("file source: %s: line %s: %w", r.path, r.lineNumber(), err)
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			r.off += int64(len(line))
			continue
		}
		var zero T
		*rec = zero // fields missing from the line must not keep old values
		if err := r.decode(trimmed, rec); err != nil {
			return connector.End, connector.Permanent(fmt.Errorf("file source: %s: line %s: %w", r.path, r.lineNumber(), err))
		}
		r.off += int64(len(line))
		return connector.Record, nil
	}
}

// decode checks a line and decodes it into rec.
func (r *jsonReader[T]) decode(line []byte, rec *T) error {
	if !r.opts.ReplaceInvalidUTF8 && !utf8.Valid(line) {
		i := 0
		for i < len(line) {
			c, n := utf8.DecodeRune(line[i:])
			if c == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return fmt.Errorf("invalid UTF-8 at byte %d of the line", i)
	}
	if string(line) == "null" {
		return errors.New("null is not a record")
	}
	if r.object && line[0] != '{' {
		return fmt.Errorf("a record must be a JSON object, not %.20q", line)
	}
	if !r.opts.DisallowUnknownFields {
		return json.Unmarshal(line, rec)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(rec); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// lineNumber returns the 1-based number of the line that starts at r.off. It
// counts the lines before it, so it is for error messages only.
func (r *jsonReader[T]) lineNumber() string {
	n, err := countLines(io.NewSectionReader(r.f, 0, r.off))
	if err != nil {
		return fmt.Sprintf("at byte %d", r.off)
	}
	return fmt.Sprintf("%d (byte %d)", n+1, r.off)
}

func countLines(rd io.Reader) (int, error) {
	var buf [32 << 10]byte
	n := 0
	for {
		k, err := rd.Read(buf[:])
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// readLine returns the next line including its newline; at the end of the
// file it returns the last line without one, with io.EOF.
func (r *jsonReader[T]) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	r.buf = append(r.buf[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = r.br.ReadSlice('\n')
		r.buf = append(r.buf, line...)
	}
	return r.buf, err
}

func (r *jsonReader[T]) Position() []byte { return binary.AppendUvarint(nil, uint64(r.off)) }

func (r *jsonReader[T]) Close() error { return r.f.Close() }
