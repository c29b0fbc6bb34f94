package file

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector"
)

var ctx = context.Background()

type rec struct {
	ID   int    `json:"id"`
	Name string `json:"name,omitempty"`
	Tags []int  `json:"tags,omitempty"`
}

// committed reads dir/*.jsonl back with the source, sorted by ID.
func committed(t *testing.T, dir string) []int {
	t.Helper()
	src := JSONLinesSource[rec](filepath.Join(dir, "*.jsonl"))
	var ids []int
	for s := range src.Splits() {
		r, err := src.OpenSplit(ctx, s, nil)
		if err != nil {
			if len(mustGlob(t, filepath.Join(dir, "*.jsonl"))) == 0 {
				return nil // the pattern matched nothing
			}
			t.Fatal(err)
		}
		for {
			var x rec
			st, err := r.Next(&x)
			if err != nil {
				t.Fatal(err)
			}
			if st == eddy.End {
				break
			}
			ids = append(ids, x.ID)
		}
		r.Close()
	}
	slices.Sort(ids)
	return ids
}

func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func pendingFiles(t *testing.T, dir string) []string {
	return mustGlob(t, filepath.Join(dir, ".part-*.jsonl.pending"))
}

func write(t *testing.T, w eddy.SinkWriter[rec], ids ...int) {
	t.Helper()
	for _, id := range ids {
		if err := w.Write(&rec{ID: id, Name: fmt.Sprint("n", id)}); err != nil {
			t.Fatal(err)
		}
	}
}

func seq(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func TestSinkCommitsOnlyCommitted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out") // created by Recover
	sink := JSONLines[rec](dir)
	if err := sink.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	w0, err := sink.OpenWriter(ctx, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	w1, _ := sink.OpenWriter(ctx, 1, 2)

	write(t, w0, seq(0, 10)...)
	write(t, w1, seq(10, 15)...)
	if got := committed(t, dir); got != nil {
		t.Fatalf("visible before pre-commit: %v", got)
	}
	h0, err := w0.PreCommit(1)
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := w1.PreCommit(1)
	if h0 == nil || h1 == nil {
		t.Fatal("nil handle for a non-empty transaction")
	}
	write(t, w0, seq(15, 20)...) // the next transaction, open
	if got := committed(t, dir); got != nil {
		t.Fatalf("visible before commit: %v", got)
	}
	if err := sink.Commit(ctx, [][]byte{h0, nil, h1}); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, dir); !reflect.DeepEqual(got, seq(0, 15)) {
		t.Fatalf("after commit 1: %v", got)
	}
	// A retried commit is fine.
	if err := sink.Commit(ctx, [][]byte{h0, h1}); err != nil {
		t.Fatal(err)
	}

	h0, _ = w0.PreCommit(2)
	h1, err = w1.PreCommit(2)
	if h1 != nil || err != nil {
		t.Fatalf("empty transaction: handle %s, %v", h1, err)
	}
	if err := sink.Commit(ctx, [][]byte{h0}); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, dir); !reflect.DeepEqual(got, seq(0, 20)) {
		t.Fatalf("after commit 2: %v", got)
	}
	names := mustGlob(t, filepath.Join(dir, "*.jsonl"))
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	if len(names) != 3 || !strings.HasPrefix(names[0], "part-00000-0000000001-") ||
		!strings.HasPrefix(names[1], "part-00000-0000000002-") || !strings.HasPrefix(names[2], "part-00001-0000000001-") {
		t.Fatalf("final files %v", names)
	}
	w0.Close()
	w1.Close()
	if p := pendingFiles(t, dir); len(p) != 0 {
		t.Fatalf("pending files left: %v", p)
	}
	// The lines are plain JSON.
	b, _ := os.ReadFile(filepath.Join(dir, names[2]))
	if !strings.HasPrefix(string(b), `{"id":10,"name":"n10"}`+"\n") {
		t.Fatalf("content %q", b)
	}
}

func TestCrashAbortsUncommitted(t *testing.T) {
	dir := t.TempDir()
	sink := JSONLines[rec](dir)
	sink.Recover(ctx, nil)
	w, _ := sink.OpenWriter(ctx, 0, 1)
	write(t, w, 1, 2)
	h1, _ := w.PreCommit(1)
	sink.Commit(ctx, [][]byte{h1})
	write(t, w, 3, 4)
	if _, err := w.PreCommit(2); err != nil { // checkpoint 2 never completes
		t.Fatal(err)
	}
	write(t, w, 5) // open transaction
	if p := pendingFiles(t, dir); len(p) != 2 {
		t.Fatalf("pending files %v, want 2", p)
	}
	// The runtime fails: writers are closed (abort); then the job restarts
	// from checkpoint 1, whose transaction is committed already.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if p := pendingFiles(t, dir); len(p) != 1 {
		t.Fatalf("after Close: pending files %v, want the pre-committed one", p)
	}
	restarted := JSONLines[rec](dir)
	if err := restarted.Recover(ctx, [][]byte{h1}); err != nil {
		t.Fatal(err)
	}
	if p := pendingFiles(t, dir); len(p) != 0 {
		t.Fatalf("after Recover: pending files %v", p)
	}
	if got := committed(t, dir); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Fatalf("committed %v", got)
	}
	// The new attempt writes the aborted records again.
	w, _ = restarted.OpenWriter(ctx, 0, 1)
	write(t, w, 3, 4, 5)
	h2, _ := w.PreCommit(2)
	if err := restarted.Commit(ctx, [][]byte{h2}); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, dir); !reflect.DeepEqual(got, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("committed %v", got)
	}
}

func TestRecoverCommitsPreCommitted(t *testing.T) {
	dir := t.TempDir()
	sink := JSONLines[rec](dir)
	sink.Recover(ctx, nil)
	w, _ := sink.OpenWriter(ctx, 3, 4)
	write(t, w, 7, 8, 9)
	h, _ := w.PreCommit(5)
	// The checkpoint's manifest is durable, but the process dies before
	// Commit: Recover commits it, and may do so twice.
	w.Close()
	for range 2 {
		if err := JSONLines[rec](dir).Recover(ctx, [][]byte{h}); err != nil {
			t.Fatal(err)
		}
		if got := committed(t, dir); !reflect.DeepEqual(got, []int{7, 8, 9}) {
			t.Fatalf("committed %v", got)
		}
	}
	if err := sink.Commit(ctx, [][]byte{h}); err != nil {
		t.Fatalf("commit after recover: %v", err)
	}
}

func TestCommitMissingFilesFails(t *testing.T) {
	dir := t.TempDir()
	sink := JSONLines[rec](dir)
	w, _ := sink.OpenWriter(ctx, 0, 1)
	write(t, w, 1)
	h, _ := w.PreCommit(1)
	pending := pendingFiles(t, dir)
	if len(pending) != 1 {
		t.Fatal(pending)
	}
	os.Remove(pending[0])
	err := sink.Commit(ctx, [][]byte{h})
	if err == nil || !strings.Contains(err.Error(), filepath.Base(pending[0])) || !strings.Contains(err.Error(), "part-00000-0000000001-") {
		t.Fatalf("commit with both files missing: %v", err)
	}
	if err := sink.Recover(ctx, [][]byte{h}); err == nil {
		t.Fatal("recover with both files missing: no error")
	}
	for _, bad := range []string{`garbage`, `{"pending":"../x.jsonl.pending","final":"part-x.jsonl"}`, `{"pending":".part-1.jsonl.pending","final":"/etc/part-x.jsonl"}`} {
		if err := sink.Commit(ctx, [][]byte{[]byte(bad)}); err == nil || !strings.Contains(err.Error(), "handle") {
			t.Fatalf("handle %s: %v", bad, err)
		}
	}
}

func TestWriteErrorNamesFile(t *testing.T) {
	dir := t.TempDir()
	sink := JSONLines[map[string]any](dir)
	w, _ := sink.OpenWriter(ctx, 0, 1)
	bad := map[string]any{"f": func() {}}
	err := w.Write(&bad)
	if err == nil || !strings.Contains(err.Error(), ".part-00000-") {
		t.Fatalf("unencodable record: %v", err)
	}
	w.Close()
	if p := pendingFiles(t, dir); len(p) != 0 {
		t.Fatalf("pending files left: %v", p)
	}
	if _, err := sink.OpenWriter(ctx, 2, 2); err == nil {
		t.Fatal("subtask 2 of 2 opened")
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readSplit reads a split to its end, reopening it from its position after
// every reopenEvery records (0: never).
func readSplit(t *testing.T, src eddy.Source[rec], split, reopenEvery int) []rec {
	t.Helper()
	r, err := src.OpenSplit(ctx, split, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []rec
	var x rec // reused: stale fields must not leak into the next record
	for {
		if reopenEvery > 0 && len(out)%reopenEvery == 0 {
			pos := r.Position()
			r.Close()
			if r, err = src.OpenSplit(ctx, split, pos); err != nil {
				t.Fatal(err)
			}
		}
		st, err := r.Next(&x)
		if err != nil {
			t.Fatal(err)
		}
		if st == eddy.End {
			r.Close()
			return out
		}
		out = append(out, x)
	}
}

func TestSourceReadsAndResumes(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", 200<<10) // longer than the read buffer
	writeFile(t, filepath.Join(dir, "b.jsonl"), "{\"id\":3}\n\n{\"id\":4,\"name\":\""+long+"\"}\r\n  \n{\"id\":5}")
	writeFile(t, filepath.Join(dir, "a.jsonl"), `{"id":1,"name":"one","tags":[1,2]}`+"\n"+`{"id":2}`+"\n")
	writeFile(t, filepath.Join(dir, "c.jsonl"), "")
	src := JSONLinesSource[rec](filepath.Join(dir, "*.jsonl"), filepath.Join(dir, "a.jsonl"))
	if src.Splits() != 3 {
		t.Fatalf("%d splits, want 3 (sorted, de-duplicated)", src.Splits())
	}
	want := [][]rec{
		{{ID: 1, Name: "one", Tags: []int{1, 2}}, {ID: 2}},
		{{ID: 3}, {ID: 4, Name: long}, {ID: 5}},
		nil,
	}
	for s := range 3 {
		for _, every := range []int{0, 1, 2} {
			if got := readSplit(t, src, s, every); !reflect.DeepEqual(got, want[s]) {
				t.Fatalf("split %d, reopened every %d: %d records %v", s, every, len(got), got)
			}
		}
	}
	// The position at the end of a file without a final newline.
	r, _ := src.OpenSplit(ctx, 1, nil)
	var x rec
	for st, _ := r.Next(&x); st != eddy.End; st, _ = r.Next(&x) {
	}
	end := r.Position()
	fi, _ := os.Stat(filepath.Join(dir, "b.jsonl"))
	if v, _ := binary.Uvarint(end); int64(v) != fi.Size() {
		t.Fatalf("end position %d, want the size %d", v, fi.Size())
	}
	r, err := src.OpenSplit(ctx, 1, end)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := r.Next(&x); st != eddy.End || err != nil {
		t.Fatalf("at the end: %v %v", st, err)
	}
}

func TestSourceBadLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "in.jsonl")
	writeFile(t, path, "{\"id\":1}\n\n{\"id\":2}\n{\"id\":\"three\"}\n{\"id\":4}\n")
	src := JSONLinesSource[rec](path)
	r, _ := src.OpenSplit(ctx, 0, nil)
	var x rec
	r.Next(&x)
	r.Next(&x)
	pos := r.Position()
	_, err := r.Next(&x)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("bad line: %v", err)
	}
	if !slices.Equal(r.Position(), pos) {
		t.Fatal("the position moved past the bad line")
	}
	// The same error after a restore at that position.
	r, _ = src.OpenSplit(ctx, 0, pos)
	if _, err := r.Next(&x); err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("bad line after restore: %v", err)
	}
}

func TestSourceBadPositionsAndFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "in.jsonl")
	writeFile(t, path, "{\"id\":1}\n{\"id\":2}\n")
	src := JSONLinesSource[rec](path)
	for _, tc := range []struct {
		pos  []byte
		want string
	}{
		{[]byte{0x80}, "invalid position"},
		{[]byte{1, 2}, "invalid position"},
		{binary.AppendUvarint(nil, 100), "beyond the end"},
		{binary.AppendUvarint(nil, 3), "not at the start of a line"},
	} {
		_, err := src.OpenSplit(ctx, 0, tc.pos)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("position %x: %v, want %q", tc.pos, err, tc.want)
		}
	}
	if _, err := src.OpenSplit(ctx, 1, nil); err == nil {
		t.Error("split 1 of 1 opened")
	}
	missing := filepath.Join(dir, "nothing-*.jsonl")
	src = JSONLinesSource[rec](missing)
	if src.Splits() != 1 {
		t.Fatalf("%d splits for a pattern that matches nothing", src.Splits())
	}
	if _, err := src.OpenSplit(ctx, 0, nil); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing file: %v", err)
	}
}

func BenchmarkSinkWrite(b *testing.B) {
	sink := JSONLines[rec](b.TempDir())
	w, _ := sink.OpenWriter(ctx, 0, 1)
	x := rec{ID: 42, Name: "forty-two", Tags: []int{1, 2, 3}}
	b.ReportAllocs()
	for b.Loop() {
		w.Write(&x)
	}
	w.Close()
}

// TestNamesAreCanonical: the sink's and the source's identity do not depend
// on how their paths are spelled.
func TestNamesAreCanonical(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if err := os.WriteFile("in.jsonl", []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".", "here"); err != nil {
		t.Fatal(err)
	}
	sink := JSONLines[map[string]any]("out").Name()
	for _, p := range []string{"./out/", filepath.Join(dir, "out"), "here/out"} {
		if got := JSONLines[map[string]any](p).Name(); got != sink {
			t.Errorf("sink %q is named %q, sink %q %q", p, got, "out", sink)
		}
	}
	if want := "file-jsonlines:" + filepath.Join(dir, "out"); sink != want {
		t.Errorf("sink name %q, want %q", sink, want)
	}
	src := JSONLinesSource[map[string]any]("in.jsonl").Name()
	for _, p := range []string{"./in.jsonl", filepath.Join(dir, "in.jsonl"), "here/in.jsonl", "*.jsonl"} {
		if got := JSONLinesSource[map[string]any](p).Name(); got != src {
			t.Errorf("source %q is named %q, source %q %q", p, got, "in.jsonl", src)
		}
	}
}

// TestSourceRejectsNonRecords: null, non-objects and bad UTF-8 fail the
// read with the file, line and byte offset, as permanent errors; unknown
// fields do with the option; replacement of bad UTF-8 is an opt-in.
func TestSourceRejectsNonRecords(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		line string
		opts SourceOptions
		want string // "" : accepted
	}{
		{`null`, SourceOptions{}, "null is not a record"},
		{`[1,2]`, SourceOptions{}, "must be a JSON object"},
		{`7`, SourceOptions{}, "must be a JSON object"},
		{`{}`, SourceOptions{}, ""},
		{"{\"id\":1,\"name\":\"a\xffb\"}", SourceOptions{}, "invalid UTF-8 at byte 17"},
		{"{\"id\":1,\"name\":\"a\xffb\"}", SourceOptions{ReplaceInvalidUTF8: true}, ""},
		{`{"id":1,"extra":2}`, SourceOptions{}, ""},
		{`{"id":1,"extra":2}`, SourceOptions{DisallowUnknownFields: true}, `unknown field "extra"`},
	}
	for i, c := range cases {
		path := filepath.Join(dir, fmt.Sprintf("in%d.jsonl", i))
		writeFile(t, path, "{\"id\":0}\n"+c.line+"\n")
		r, err := JSONLinesSourceWith[rec](c.opts, path).OpenSplit(ctx, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		var x rec
		if st, err := r.Next(&x); st != eddy.Record || err != nil {
			t.Fatalf("first line: %v %v", st, err)
		}
		_, err = r.Next(&x)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q with %+v: %v", c.line, c.opts, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path+": line 2 (byte 9)") ||
			!errors.Is(err, connector.ErrPermanent)):
			t.Errorf("%q with %+v: %v, want a permanent error naming the place and %q", c.line, c.opts, err, c.want)
		}
		r.Close()
	}
}

// TestRollBack: the sink removes exactly the files committed by
// checkpoints after the one a restore falls back to.
func TestRollBack(t *testing.T) {
	dir := t.TempDir()
	sink := JSONLines[rec](dir)
	rb := sink.(connector.RollbackSink)
	if desc, err := rb.CommittedAfter(ctx, 0); desc != "" || err != nil {
		t.Fatalf("empty sink: %q, %v", desc, err)
	}
	if err := sink.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	w, err := sink.OpenWriter(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for ckpt := uint64(1); ckpt <= 3; ckpt++ {
		write(t, w, int(ckpt))
		h, err := w.PreCommit(ckpt)
		if err != nil {
			t.Fatal(err)
		}
		if err := sink.Commit(ctx, [][]byte{h}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	desc, err := rb.CommittedAfter(ctx, 1)
	if err != nil || !strings.HasPrefix(desc, "2 committed files") {
		t.Fatalf("CommittedAfter(1) = %q, %v", desc, err)
	}
	if err := rb.RollBack(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, dir); !slices.Equal(got, []int{1}) {
		t.Fatalf("after rolling back past checkpoint 1: %v", got)
	}
	if desc, _ := rb.CommittedAfter(ctx, 1); desc != "" {
		t.Fatalf("still committed after 1: %s", desc)
	}
}
