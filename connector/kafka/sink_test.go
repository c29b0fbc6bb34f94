package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/kafka"
	"github.com/eddyflow/eddy/serde"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func countSink(addrs []string, opts ...kafka.SinkOpt) eddy.Sink[Count] {
	base := []kafka.SinkOpt{kafka.Brokers(addrs...), kafka.Key(func(c *Count) []byte { return []byte(c.Key) })}
	return kafka.Sink[Count]("out", append(base, opts...)...)
}

// preCommit writes counts seq from..to-1 with one writer and pre-commits
// them as checkpoint id.
func preCommit(t *testing.T, ctx context.Context, s eddy.Sink[Count], subtask, par int, id uint64, from, to int64) []byte {
	t.Helper()
	w, err := s.OpenWriter(ctx, subtask, par)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := from; i < to; i++ {
		if err := w.Write(&Count{Key: fmt.Sprintf("k%d", i%7), Seq: i, N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := w.PreCommit(id)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func seqs(t *testing.T, addrs []string) map[int64]int {
	t.Helper()
	out := map[int64]int{}
	for _, c := range decodeCounts(t, readCommitted(t, addrs, "out")) {
		out[c.Seq]++
	}
	return out
}

func wantSeqs(t *testing.T, got map[int64]int, from, to int64) {
	t.Helper()
	if len(got) != int(to-from) {
		t.Errorf("output has %d distinct records, want %d", len(got), to-from)
	}
	for i := from; i < to; i++ {
		if got[i] != 1 {
			t.Errorf("record %d written %d times, want once", i, got[i])
		}
	}
}

// TestCommitIsIdempotentAcrossProcesses covers the crash points of the
// exactly-once protocol: a handle committed before the crash is skipped by
// the next process's Recover; one pre-committed but not committed is
// committed by it; a repeated Commit is a no-op.
func TestCommitIsIdempotentAcrossProcesses(t *testing.T) {
	c := newCluster(t, 3, "out")
	addrs := c.ListenAddrs()
	ctx := testCtx(t)

	a := countSink(addrs)
	if err := a.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	h1 := preCommit(t, ctx, a, 0, 2, 1, 0, 100)
	h1b := preCommit(t, ctx, a, 1, 2, 1, 100, 150)
	if err := a.Commit(ctx, [][]byte{h1, h1b}); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, [][]byte{h1, h1b}); err != nil { // again: no-op
		t.Fatal(err)
	}
	h2 := preCommit(t, ctx, a, 0, 2, 2, 150, 300) // pre-committed, then "crash"

	// A new process restores checkpoint 2, which recorded h1, h1b (already
	// committed) and h2 (not yet).
	b := countSink(addrs)
	if err := b.Recover(ctx, [][]byte{h1, h1b, h2}); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, seqs(t, addrs), 0, 300)
	// And once more, as if it crashed right after Recover.
	c2 := countSink(addrs)
	if err := c2.Recover(ctx, [][]byte{h2}); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, seqs(t, addrs), 0, 300)
}

// TestFreshLineageIsNotSkipped: a job started afresh (checkpoint ids from 1
// again) writes its output although markers of an earlier run exist.
func TestFreshLineageIsNotSkipped(t *testing.T) {
	c := newCluster(t, 1, "out")
	addrs := c.ListenAddrs()
	ctx := testCtx(t)
	for run := range 2 {
		s := countSink(addrs)
		if err := s.Recover(ctx, nil); err != nil {
			t.Fatal(err)
		}
		h := preCommit(t, ctx, s, 0, 1, 1, int64(run*10), int64(run*10+10))
		if err := s.Commit(ctx, [][]byte{h}); err != nil {
			t.Fatal(err)
		}
	}
	wantSeqs(t, seqs(t, addrs), 0, 20)
}

// TestZombieFencing: a second producer with the same transactional id
// fences the first, whose commit then fails with a clear error.
func TestZombieFencing(t *testing.T) {
	c := newCluster(t, 1, "out")
	addrs := c.ListenAddrs()
	ctx := testCtx(t)
	zombie := countSink(addrs)
	if err := zombie.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	h := preCommit(t, ctx, zombie, 0, 1, 1, 0, 10)

	// The successor process opens the same subtask's writer.
	next := countSink(addrs)
	if err := next.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := next.OpenWriter(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	err := zombie.Commit(ctx, [][]byte{h})
	if err == nil {
		t.Fatal("the fenced producer committed")
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("want a fencing error, got %v", err)
	}
	if !strings.Contains(err.Error(), `"eddy-out-0"`) || !strings.Contains(err.Error(), "fenced") {
		t.Fatalf("the error does not name the transactional id and fencing: %v", err)
	}
	t.Logf("zombie commit: %v", err)
	if got := seqs(t, addrs); len(got) != 0 {
		t.Fatalf("the zombie's records are visible: %v", got)
	}
	// The successor can commit the zombie's pre-committed handle itself
	// (write-ahead: no need to resume the zombie's transaction).
	if err := next.Commit(ctx, [][]byte{h}); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, seqs(t, addrs), 0, 10)
}

// TestLingeringTransactionIsAborted: a writer killed with an open
// transaction does not block read_committed readers once the job restores.
func TestLingeringTransactionIsAborted(t *testing.T) {
	c := newCluster(t, 1, "out")
	addrs := c.ListenAddrs()
	ctx := testCtx(t)
	s := countSink(addrs)
	if err := s.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	h := preCommit(t, ctx, s, 0, 1, 1, 0, 10)

	// A "killed" process: began a transaction with the sink's id, produced
	// half of the handle's records (here: other records), never ended it.
	killed, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID("eddy-out-0"),
		kgo.TransactionTimeout(10*time.Minute), kgo.DefaultProduceTopic("out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := killed.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	v, _ := serde.MustFor[Count]().Append(nil, &Count{Key: "zombie", Seq: -1})
	if err := killed.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	killed.Close() // no commit, no abort

	// A non-transactional record written after it: read_committed readers
	// must not be held back by the open transaction, once restored.
	plain := client(t, addrs, kgo.DefaultProduceTopic("out"))
	v, _ = serde.MustFor[Count]().Append(nil, &Count{Key: "later", Seq: 1000})
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	restored := countSink(addrs)
	if err := restored.Recover(ctx, [][]byte{h}); err != nil {
		t.Fatal(err)
	}
	got := seqs(t, addrs) // times out if the transaction still holds the LSO
	if got[-1] != 0 {
		t.Fatal("the killed writer's records are visible")
	}
	if got[1000] != 1 {
		t.Fatal("the record written after the open transaction is not visible")
	}
	delete(got, 1000)
	wantSeqs(t, got, 0, 10)
}

// TestOpenWriterFencesLingeringTransaction: with no handle to restore, the
// writer's start alone aborts a transaction its id left open.
func TestOpenWriterFencesLingeringTransaction(t *testing.T) {
	c := newCluster(t, 1, "out")
	addrs := c.ListenAddrs()
	ctx := testCtx(t)
	killed, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID("eddy-out-1"),
		kgo.TransactionTimeout(10*time.Minute), kgo.DefaultProduceTopic("out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := killed.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := killed.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	killed.Close()
	s := countSink(addrs)
	if err := s.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	h := preCommit(t, ctx, s, 1, 2, 1, 0, 5)
	if err := s.Commit(ctx, [][]byte{h}); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, seqs(t, addrs), 0, 5)
}

func TestBufferLimit(t *testing.T) {
	c := newCluster(t, 1, "out")
	addrs := c.ListenAddrs()
	ctx := testCtx(t)
	s := countSink(addrs, kafka.MaxBufferedBytes(1000))
	if err := s.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	w, err := s.OpenWriter(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err = w.Write(&Count{Key: "k", Seq: int64(i)}); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "MaxBufferedBytes") {
		t.Fatalf("want a buffer limit error, got %v", err)
	}
}

func TestAtLeastOnceAndNone(t *testing.T) {
	for _, g := range []kafka.Guarantee{kafka.AtLeastOnce, kafka.None} {
		t.Run(g.String(), func(t *testing.T) {
			c := newCluster(t, 2, "out")
			addrs := c.ListenAddrs()
			ctx := testCtx(t)
			s := countSink(addrs, kafka.DeliveryGuarantee(g))
			if err := s.Recover(ctx, nil); err != nil {
				t.Fatal(err)
			}
			w, err := s.OpenWriter(ctx, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				if err := w.Write(&Count{Key: "k", Seq: int64(i)}); err != nil {
					t.Fatal(err)
				}
			}
			if h, err := w.PreCommit(1); err != nil || h != nil {
				t.Fatalf("PreCommit = %v, %v", h, err)
			}
			if g == kafka.AtLeastOnce {
				wantSeqs(t, seqs(t, addrs), 0, 100) // flushed at the barrier
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			wantSeqs(t, seqs(t, addrs), 0, 100)
		})
	}
}

// recoveredSink starts a one-partition cluster with topic "out" and a
// count sink on it, recovered with no handles (a fresh job).
func recoveredSink(t *testing.T) (*kfake.Cluster, []string, context.Context, eddy.Sink[Count]) {
	t.Helper()
	c := newCluster(t, 1, "out")
	addrs := c.ListenAddrs()
	ctx := testCtx(t)
	s := countSink(addrs)
	if err := s.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return c, addrs, ctx, s
}

// abortCommits makes the cluster abort the next n transactions that a
// client asks to commit, answering as if they committed: what franz-go does
// itself when it wrongly believes no produce of the transaction succeeded.
// It returns how many it turned.
func abortCommits(c *kfake.Cluster, n int) *atomic.Int32 {
	var turned atomic.Int32
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.EndTxnRequest)
		if r.Commit && turned.Load() < int32(n) {
			r.Commit = false
			turned.Add(1)
		}
		c.KeepControl()
		return nil, nil, false // the cluster handles it, as changed
	})
	return &turned
}

// TestCommitTurnedIntoAbortIsRedone: a commit that the broker aborted while
// the client reported success is noticed by reading the marker back, and
// the transaction is produced again: every record once.
func TestCommitTurnedIntoAbortIsRedone(t *testing.T) {
	c, addrs, ctx, s := recoveredSink(t)
	h := preCommit(t, ctx, s, 0, 1, 1, 0, 50)
	turned := abortCommits(c, 2)
	if err := s.Commit(ctx, [][]byte{h}); err != nil {
		t.Fatal(err)
	}
	if n := turned.Load(); n != 2 {
		t.Fatalf("%d commits were turned into aborts, want 2", n)
	}
	wantSeqs(t, seqs(t, addrs), 0, 50)
	// A repeated commit of the same handle is a no-op.
	if err := s.Commit(ctx, [][]byte{h}); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, seqs(t, addrs), 0, 50)
}

// TestCommitAbortedEveryTimeFailsLoudly: when every commit is aborted, the
// sink says so instead of reporting the checkpoint committed, and a later
// Recover with the handle commits it.
func TestCommitAbortedEveryTimeFailsLoudly(t *testing.T) {
	c, addrs, ctx, s := recoveredSink(t)
	h := preCommit(t, ctx, s, 0, 1, 1, 0, 20)
	turned := abortCommits(c, 3)
	err := s.Commit(ctx, [][]byte{h})
	if err == nil || !strings.Contains(err.Error(), "aborted by the broker 3 times") || !strings.Contains(err.Error(), "checkpoint 1") {
		t.Fatalf("want a loud commit failure naming the checkpoint, got %v", err)
	}
	if n := turned.Load(); n != 3 {
		t.Fatalf("%d commits turned, want 3", n)
	}
	if got := seqs(t, addrs); len(got) != 0 {
		t.Fatalf("aborted records are visible: %v", got)
	}
	// The next attempt of the job restores the checkpoint and commits it.
	s2 := countSink(addrs)
	if err := s2.Recover(ctx, [][]byte{h}); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, seqs(t, addrs), 0, 20)
}
