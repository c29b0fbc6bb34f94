package file

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/connector"
)

// byTens puts record i under "dt=<i/10>/even=<i%2==0>".
func byTens(r *rec) string { return fmt.Sprintf("dt=%d/even=%v", r.ID/10, r.ID%2 == 0) }

// committedParts reads every partition's committed files: IDs by partition.
func committedParts(t *testing.T, dir string) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	for _, d := range mustGlob(t, filepath.Join(dir, "dt=*", "even=*")) {
		rel, _ := filepath.Rel(dir, d)
		if ids := committed(t, d); len(ids) > 0 {
			out[filepath.ToSlash(rel)] = ids
		}
	}
	return out
}

// want is what byTens makes of ids.
func wantParts(ids []int) map[string][]int {
	out := map[string][]int{}
	for _, id := range ids {
		p := byTens(&rec{ID: id})
		out[p] = append(out[p], id)
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

func TestPartitionedSinkCommitsOnlyCommitted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	sink := PartitionedJSONLines[rec](dir, byTens)
	if !strings.HasPrefix(sink.Name(), "file-jsonlines-partitioned:") {
		t.Fatalf("name %q", sink.Name())
	}
	if err := sink.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	w0, err := sink.OpenWriter(ctx, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	w1, _ := sink.OpenWriter(ctx, 1, 2)
	write(t, w0, seq(0, 25)...)
	write(t, w1, seq(25, 40)...)
	h0, err := w0.PreCommit(1)
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := w1.PreCommit(1)
	write(t, w0, seq(40, 55)...) // the next transaction, open
	if got := committedParts(t, dir); len(got) != 0 {
		t.Fatalf("visible before commit: %v", got)
	}
	if err := sink.Commit(ctx, [][]byte{h0, h1}); err != nil {
		t.Fatal(err)
	}
	if got := committedParts(t, dir); !reflect.DeepEqual(got, wantParts(seq(0, 40))) {
		t.Fatalf("after commit 1: %v", got)
	}
	if err := sink.Commit(ctx, [][]byte{h0, h1}); err != nil {
		t.Fatalf("retried commit: %v", err)
	}
	// A crash now: a new attempt's Recover commits nothing more and aborts
	// the open transaction's pending files in every partition.
	if err := sink.Recover(ctx, [][]byte{h0, h1}); err != nil {
		t.Fatal(err)
	}
	if p := mustGlob(t, filepath.Join(dir, "*", "*", ".part-*")); len(p) != 0 {
		t.Fatalf("pending files left after Recover: %v", p)
	}
	if got := committedParts(t, dir); !reflect.DeepEqual(got, wantParts(seq(0, 40))) {
		t.Fatalf("after recover: %v", got)
	}
}

func TestPartitionedSinkRollBack(t *testing.T) {
	dir := t.TempDir()
	sink := PartitionedJSONLines[rec](dir, byTens)
	w, _ := sink.OpenWriter(ctx, 0, 1)
	write(t, w, seq(0, 30)...)
	h1, _ := w.PreCommit(1)
	write(t, w, seq(30, 50)...)
	h2, _ := w.PreCommit(2)
	if err := sink.Commit(ctx, [][]byte{h1, h2}); err != nil {
		t.Fatal(err)
	}
	rb := sink.(connector.RollbackSink)
	desc, err := rb.CommittedAfter(ctx, 1)
	if err != nil || !strings.Contains(desc, "committed files") {
		t.Fatalf("CommittedAfter(1) = %q, %v", desc, err)
	}
	if err := rb.RollBack(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := committedParts(t, dir); !reflect.DeepEqual(got, wantParts(seq(0, 30))) {
		t.Fatalf("after rolling back to 1: %v", got)
	}
}

func TestPartitionedSinkBadPartitions(t *testing.T) {
	for _, p := range []string{"", "/abs", "a//b", "a/../b", "..", "a/.", ".part-x", `a\b`} {
		dir := t.TempDir()
		sink := PartitionedJSONLines[rec](dir, func(*rec) string { return p })
		w, _ := sink.OpenWriter(ctx, 0, 1)
		err := w.Write(&rec{ID: 1})
		if err == nil || !errors.Is(err, connector.ErrPermanent) || !strings.Contains(err.Error(), "partition") {
			t.Errorf("partition %q: Write = %v, want a permanent error naming the partition", p, err)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 0 {
			t.Errorf("partition %q: wrote %v", p, entries)
		}
	}
	// A handle naming a bad partition is refused, not followed.
	sink := PartitionedJSONLines[rec](t.TempDir(), byTens)
	bad := []byte(`[{"dir":"../../etc","pending":".part-00000-0000000001-x.jsonl.pending","final":"part-00000-0000000001-x.jsonl"}]`)
	if err := sink.Commit(ctx, [][]byte{bad}); err == nil || !strings.Contains(err.Error(), "bad transaction handle") {
		t.Fatalf("Commit of a handle outside the sink = %v", err)
	}
}
