package coord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy/internal/manifest"
)

// task records what the coordinator asks of it; complete decides each
// Complete's outcome.
type task struct {
	triggers  chan trigger
	completed []*Checkpoint
	complete  func(c *Checkpoint) (map[string][]manifest.Txn, error)
}

type trigger struct {
	id    uint64
	final bool
}

func newTask() *task { return &task{triggers: make(chan trigger, 100)} }

func (t *task) Trigger(id uint64, final bool) { t.triggers <- trigger{id, final} }

func (t *task) Complete(_ context.Context, c *Checkpoint) (map[string][]manifest.Txn, error) {
	t.completed = append(t.completed, c)
	if t.complete != nil {
		return t.complete(c)
	}
	return nil, nil
}

// harness runs a coordinator over channels the test drives.
type harness struct {
	t        *testing.T
	task     *task
	tick     chan time.Time
	acks     chan Ack
	finished chan struct{}
	done     chan error
}

func start(t *testing.T, cfg Config, tk *task) *harness {
	h := &harness{t: t, task: tk, tick: make(chan time.Time), acks: make(chan Ack), finished: make(chan struct{}), done: make(chan error, 1)}
	cfg.Tick = h.tick
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { h.done <- New(tk, cfg).Run(ctx, h.acks, h.finished) }()
	return h
}

// triggered waits for the next trigger and checks it.
func (h *harness) triggered(id uint64, final bool) {
	h.t.Helper()
	select {
	case tr := <-h.task.triggers:
		if tr.id != id || tr.final != final {
			h.t.Fatalf("triggered %+v, want checkpoint %d final=%v", tr, id, final)
		}
	case err := <-h.done:
		h.t.Fatalf("ended (%v) instead of triggering %d", err, id)
	case <-time.After(10 * time.Second):
		h.t.Fatalf("checkpoint %d not triggered", id)
	}
}

// noTrigger checks that nothing was triggered up to now: every trigger
// happens inside a channel operation the test has completed.
func (h *harness) noTrigger() {
	h.t.Helper()
	select {
	case tr := <-h.task.triggers:
		h.t.Fatalf("unexpected trigger %+v", tr)
	default:
	}
}

func (h *harness) ackAll(id uint64, n int, txn string) {
	for i := range n {
		a := Ack{ID: id, Subtask: i}
		if txn != "" && i == 0 {
			a.SinkTxns = map[string][]byte{"sink": []byte(txn)}
		}
		h.acks <- a
	}
}

func (h *harness) end() error {
	h.t.Helper()
	select {
	case err := <-h.done:
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("Run did not end")
		return nil
	}
}

// TestCompletesOnAllAcks: a tick starts a checkpoint, it completes with
// the last of its acks (not before), ticks while one is in flight start
// none, and once every source finished the final one ends Run.
func TestCompletesOnAllAcks(t *testing.T) {
	tk := newTask()
	h := start(t, Config{FirstID: 7, Acks: 3, Sources: 2, Tolerable: 3}, tk)
	h.tick <- time.Now()
	h.triggered(7, false)
	h.tick <- time.Now() // in flight: no second checkpoint
	h.acks <- Ack{ID: 7, Subtask: 0, SyncDur: time.Millisecond}
	h.acks <- Ack{ID: 7, Subtask: 1, SyncDur: 3 * time.Millisecond}
	h.noTrigger()
	h.acks <- Ack{ID: 7, Subtask: 2, SyncDur: 2 * time.Millisecond}
	h.tick <- time.Now()
	h.triggered(8, false)
	if len(tk.completed) != 1 || len(tk.completed[0].Acks) != 3 || tk.completed[0].SyncDur != 3*time.Millisecond || tk.completed[0].Last.Subtask != 2 {
		t.Fatalf("completed %+v", tk.completed)
	}
	h.finished <- struct{}{}
	h.finished <- struct{}{} // every source finished, 8 in flight: the final one waits
	h.noTrigger()
	h.ackAll(8, 3, "")
	h.triggered(9, true)
	h.ackAll(9, 3, "")
	if err := h.end(); err != nil {
		t.Fatal(err)
	}
	if n := len(tk.completed); n != 3 || !tk.completed[2].Final {
		t.Fatalf("%d completed, last %+v", n, tk.completed[n-1])
	}
}

// TestAbortedCheckpointsTransactionsWait: the sink transactions of a failed
// checkpoint reach the next checkpoint's Complete (their records precede
// its barrier), and what Complete leaves pending is kept.
func TestAbortedCheckpointsTransactionsWait(t *testing.T) {
	tk := newTask()
	h := start(t, Config{FirstID: 1, Acks: 2, Sources: 1, Tolerable: 3}, tk)
	h.tick <- time.Now()
	h.triggered(1, false)
	h.acks <- Ack{ID: 1, Subtask: 0, SinkTxns: map[string][]byte{"sink": []byte("t1")}}
	h.acks <- Ack{ID: 1, Subtask: 1, Err: errors.New("upload failed")}
	h.tick <- time.Now()
	h.triggered(2, false)
	tk.complete = func(c *Checkpoint) (map[string][]manifest.Txn, error) {
		return map[string][]manifest.Txn{"sink": {{ID: 99, Data: []byte("later")}}}, nil
	}
	h.ackAll(2, 2, "t2")
	h.tick <- time.Now()
	h.triggered(3, false)
	got := tk.completed[0].Pending["sink"]
	if len(got) != 2 || string(got[0].Data) != "t1" || got[0].ID != 1 || string(got[1].Data) != "t2" {
		t.Fatalf("checkpoint 2 got pending %v", got)
	}
	tk.complete = nil
	h.ackAll(3, 2, "")
	h.tick <- time.Now() // taken once Complete of 3 returned
	h.triggered(4, false)
	if p := tk.completed[1].Pending["sink"]; len(p) != 1 || p[0].ID != 99 {
		t.Fatalf("checkpoint 3 got pending %v, want what checkpoint 2 left", p)
	}
}

// TestFailurePolicy: failed checkpoints in a row (a failed ack, a timeout,
// a Failed Complete) are tolerated up to Tolerable; a success resets the
// count; one more fails Run with the last cause.
func TestFailurePolicy(t *testing.T) {
	tk := newTask()
	h := start(t, Config{FirstID: 1, Acks: 1, Sources: 1, Tolerable: 2, Timeout: 50 * time.Millisecond}, tk)
	// Failure 1: an ack reports an error.
	h.tick <- time.Now()
	h.triggered(1, false)
	h.acks <- Ack{ID: 1, Err: errors.New("disk full")}
	// Failure 2: Complete fails the checkpoint.
	tk.complete = func(c *Checkpoint) (map[string][]manifest.Txn, error) {
		return nil, Failed(fmt.Errorf("checkpoint %d: writing its manifest: boom", c.ID))
	}
	h.tick <- time.Now()
	h.triggered(2, false)
	h.acks <- Ack{ID: 2}
	// A success resets the count. (The tick is taken once Complete of 2
	// has returned: the coordinator is one goroutine.)
	h.tick <- time.Now()
	tk.complete = nil
	h.triggered(3, false)
	h.acks <- Ack{ID: 3}
	// Failures 1 and 2 again, then 3: a timeout (no ack comes).
	for id := uint64(4); id <= 5; id++ {
		h.tick <- time.Now()
		h.triggered(id, false)
		h.acks <- Ack{ID: id, Err: errors.New("disk full")}
	}
	h.tick <- time.Now()
	h.triggered(6, false)
	h.acks <- Ack{ID: 5} // a late ack of an aborted checkpoint: ignored
	err := h.end()
	if err == nil || !strings.Contains(err.Error(), "3 checkpoints in a row failed (2 tolerated)") || !strings.Contains(err.Error(), "checkpoint 6 timed out") {
		t.Fatalf("Run = %v", err)
	}
	if len(tk.completed) != 2 {
		t.Fatalf("%d Complete calls, want 2", len(tk.completed))
	}
}

// TestFinalCheckpointRetried: a checkpoint that fails while every source
// has finished is followed by the final one (no tick would start it); a
// failed final checkpoint, or a fatal ack, ends Run with its cause; an error
// of Complete not marked Failed ends Run too.
func TestFinalCheckpointRetried(t *testing.T) {
	t.Run("retried", func(t *testing.T) {
		tk := newTask()
		h := start(t, Config{FirstID: 1, Acks: 1, Sources: 1, Tolerable: 1}, tk)
		h.tick <- time.Now()
		h.triggered(1, false)
		h.finished <- struct{}{}
		h.acks <- Ack{ID: 1, Err: errors.New("upload failed")}
		h.triggered(2, true)
		h.acks <- Ack{ID: 2}
		if err := h.end(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("final fails", func(t *testing.T) {
		h := start(t, Config{FirstID: 1, Acks: 1, Sources: 1, Tolerable: 5}, newTask())
		h.finished <- struct{}{}
		h.triggered(1, true)
		h.acks <- Ack{ID: 1, Err: errors.New("upload failed")}
		if err := h.end(); err == nil || !strings.Contains(err.Error(), "the final checkpoint 1 failed: upload failed") {
			t.Fatalf("Run = %v", err)
		}
	})
	t.Run("fatal ack", func(t *testing.T) {
		h := start(t, Config{FirstID: 1, Acks: 2, Sources: 1, Tolerable: 5}, newTask())
		h.tick <- time.Now()
		h.triggered(1, false)
		h.acks <- Ack{ID: 1, Err: errors.New("state does not encode"), Fatal: true}
		if err := h.end(); err == nil || !strings.Contains(err.Error(), "checkpoint 1: state does not encode") {
			t.Fatalf("Run = %v", err)
		}
	})
	t.Run("complete error", func(t *testing.T) {
		tk := newTask()
		tk.complete = func(*Checkpoint) (map[string][]manifest.Txn, error) { return nil, errors.New("sink commit refused") }
		h := start(t, Config{FirstID: 1, Acks: 1, Sources: 1, Tolerable: 5}, tk)
		h.tick <- time.Now()
		h.triggered(1, false)
		h.acks <- Ack{ID: 1}
		if err := h.end(); err == nil || err.Error() != "sink commit refused" {
			t.Fatalf("Run = %v", err)
		}
	})
}

// TestSavepoints: a request starts a checkpoint at once, or after the one
// in flight (which is not the savepoint: it started before the request);
// the requester gets the id, or the failure of the checkpoint (which
// OnFailed reports), or Complete's retention error; a request left when Run
// ends is answered.
func TestSavepoints(t *testing.T) {
	tk := newTask()
	reqs := make(chan SavepointRequest)
	failed := make(chan uint64, 10)
	h := start(t, Config{FirstID: 1, Acks: 2, Sources: 1, Tolerable: 5, Savepoints: reqs, OnFailed: func(id uint64) { failed <- id }}, tk)
	ask := func() chan SavepointResult {
		done := make(chan SavepointResult, 1)
		reqs <- SavepointRequest{Done: done}
		return done
	}
	result := func(done chan SavepointResult) SavepointResult {
		t.Helper()
		select {
		case r := <-done:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no savepoint result")
			return SavepointResult{}
		}
	}
	// No checkpoint in flight: the request triggers one.
	first := ask()
	h.triggered(1, false)
	h.ackAll(1, 2, "")
	if r := result(first); r.ID != 1 || r.Err != nil || !tk.completed[0].Savepoint {
		t.Fatalf("savepoint: %+v, completed %+v", r, tk.completed[0])
	}
	// A checkpoint in flight: the savepoint is the next one.
	h.tick <- time.Now()
	h.triggered(2, false)
	second := ask()
	h.noTrigger()
	h.ackAll(2, 2, "")
	h.triggered(3, false)
	if tk.completed[1].Savepoint {
		t.Fatal("the checkpoint in flight when the savepoint was asked for became it")
	}
	h.acks <- Ack{ID: 3, Subtask: 0, Err: errors.New("upload failed")}
	if r := result(second); r.Err == nil || !strings.Contains(r.Err.Error(), "upload failed") {
		t.Fatalf("failed savepoint: %+v", r)
	}
	if id := <-failed; id != 3 {
		t.Fatalf("OnFailed(%d), want 3", id)
	}
	// Complete could not retain it: the checkpoint stands, the savepoint fails.
	tk.complete = func(c *Checkpoint) (map[string][]manifest.Txn, error) {
		c.SavepointErr = errors.New("marker not written")
		return nil, nil
	}
	third := ask()
	h.triggered(4, false)
	h.ackAll(4, 2, "")
	if r := result(third); r.ID != 4 || r.Err == nil {
		t.Fatalf("unretained savepoint: %+v", r)
	}
	tk.complete = nil
	// Asked while the final checkpoint is in flight: answered when Run ends.
	h.finished <- struct{}{}
	h.triggered(5, true)
	last := ask()
	h.ackAll(5, 2, "")
	if err := h.end(); err != nil {
		t.Fatal(err)
	}
	if r := result(last); r.Err == nil || !strings.Contains(r.Err.Error(), "ended") {
		t.Fatalf("request at the end: %+v", r)
	}
}

// TestReserveBeforeTrigger: Reserve runs with each id before its trigger;
// a failed reservation fails that checkpoint untriggered (counted as a
// failure), the next one gets the next id, and a failed reservation of
// the final checkpoint ends Run with its cause.
func TestReserveBeforeTrigger(t *testing.T) {
	tk := newTask()
	reserveErr := make(chan error, 10)
	var reserved []uint64
	cfg := Config{FirstID: 1, Acks: 1, Sources: 1, Tolerable: 1, Reserve: func(_ context.Context, id uint64) error {
		reserved = append(reserved, id)
		select {
		case err := <-reserveErr:
			return err
		default:
			return nil
		}
	}}
	h := start(t, cfg, tk)
	h.tick <- time.Now()
	h.triggered(1, false)
	h.acks <- Ack{ID: 1}
	reserveErr <- errors.New("reservation refused")
	h.tick <- time.Now() // checkpoint 2 fails unreserved, untriggered
	h.tick <- time.Now()
	h.triggered(3, false)
	h.acks <- Ack{ID: 3}
	reserveErr <- errors.New("store gone")
	h.finished <- struct{}{}
	err := h.end()
	if err == nil || !strings.Contains(err.Error(), "checkpoint 4: store gone") {
		t.Fatalf("Run = %v, want the final checkpoint's reservation error", err)
	}
	if fmt.Sprint(reserved) != "[1 2 3 4]" || len(tk.completed) != 2 {
		t.Fatalf("reserved %v, completed %d; want [1 2 3 4] and 2", reserved, len(tk.completed))
	}
}
