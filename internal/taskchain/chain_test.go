package taskchain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/eddyflow/eddy/blob"
)

// records reads every record of task's chain straight from the store,
// failing the test on a name that is not a record or a record that does
// not decode.
func records(t *testing.T, s blob.Store, task string) []Record {
	t.Helper()
	ctx := context.Background()
	names, err := s.List(ctx, chainPrefix(task))
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	for _, n := range names {
		seq, ok := parseSeq(chainPrefix(task), n)
		if !ok {
			t.Fatalf("%s is not a record's name", n)
		}
		b, err := s.Get(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeRecord(n, seq, b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// seqsOf returns the seqs of rs.
func seqsOf(rs []Record) []uint64 {
	var s []uint64
	for _, r := range rs {
		s = append(s, r.Seq)
	}
	return s
}

func mustOpen(t *testing.T, s blob.Store, task string) *Chain {
	t.Helper()
	c, err := Open(context.Background(), s, task)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustClaim(t *testing.T, c *Chain, owner string) Record {
	t.Helper()
	r, err := c.Claim(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustCommit(t *testing.T, c *Chain, payload string) Record {
	t.Helper()
	r, err := c.Commit(context.Background(), []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != KindCommit || string(r.Payload) != payload {
		t.Fatalf("Commit(%q) = %+v", payload, r)
	}
	return r
}

// wantFenced checks that err is a *FencedError matching ErrFenced that
// names holder and epoch newer.
func wantFenced(t *testing.T, err error, holder string, newer uint64) {
	t.Helper()
	var fe *FencedError
	if !errors.Is(err, ErrFenced) || !errors.As(err, &fe) {
		t.Fatalf("error %v, want one matching ErrFenced", err)
	}
	if fe.Holder != holder || fe.Newer != newer || !strings.Contains(err.Error(), holder) {
		t.Fatalf("fenced by %q (epoch %d): %v; want %q, epoch %d", fe.Holder, fe.Newer, err, holder, newer)
	}
}

func TestChain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		for _, c := range []struct {
			name string
			f    func(t *testing.T, e env)
		}{
			{"Basics", testBasics},
			{"Zombie", testZombie},
			{"Check", testCheck},
			{"ZombieAfterPrune", testZombieAfterPrune},
			{"ClaimWhileCommitting", testClaimWhileCommitting},
			{"ClaimIntoGap", testClaimIntoGap},
			{"ClaimAfterStaleListing", testClaimAfterStaleListing},
			{"ConcurrentClaimants", testConcurrentClaimants},
			{"LostReply", testLostReply},
			{"UnknownOutcome", testUnknownOutcome},
			{"Corrupt", testCorrupt},
			{"PruneCorrupt", testPruneCorrupt},
			{"Prune", testPrune},
			{"Requests", testRequests},
			{"Errors", testErrors},
			{"Processes", testProcesses},
		} {
			t.Run(c.name, func(t *testing.T) { c.f(t, e) })
		}
	})
}

// Claim, commits, reopen: the next claimant gets the newest commit, and
// its claim opens the next epoch.
func testBasics(t *testing.T, e env) {
	s := e.fresh(t)
	a := mustOpen(t, s, "orders-3")
	if !a.Newest().IsZero() {
		t.Fatalf("a new chain's newest record: %+v", a.Newest())
	}
	if last := mustClaim(t, a, "A"); !last.IsZero() {
		t.Fatalf("claim of a new chain returned %+v, want no commit", last)
	}
	if a.Epoch() != 1 {
		t.Fatalf("epoch %d, want 1", a.Epoch())
	}
	for i := range 3 {
		if r := mustCommit(t, a, fmt.Sprintf("ckpt %d", i)); r.Seq != uint64(i+2) || r.Epoch != 1 || r.Owner != "A" {
			t.Fatalf("commit %d: %+v", i, r)
		}
	}
	b := mustOpen(t, s, "orders-3")
	if n := b.Newest(); n.Seq != 4 || n.Kind != KindCommit || string(n.Payload) != "ckpt 2" {
		t.Fatalf("reopened chain's newest: %+v", n)
	}
	if last := mustClaim(t, b, "B"); string(last.Payload) != "ckpt 2" || last.Seq != 4 || last.Owner != "A" {
		t.Fatalf("B restores from %+v, want A's ckpt 2 at 4", last)
	}
	// A claimant after one that never committed restores from the same
	// commit, read through the claim's link.
	c := mustOpen(t, s, "orders-3")
	if last := mustClaim(t, c, "C"); string(last.Payload) != "ckpt 2" || c.Epoch() != 3 {
		t.Fatalf("C restores from %+v in epoch %d, want ckpt 2 in epoch 3", last, c.Epoch())
	}
	mustCommit(t, c, "ckpt 3")
	rs := records(t, s, "orders-3")
	if got, want := seqsOf(rs), []uint64{1, 2, 3, 4, 5, 6, 7}; !slices.Equal(got, want) {
		t.Fatalf("seqs %v, want %v", got, want)
	}
	var kinds []string
	for _, r := range rs {
		kinds = append(kinds, fmt.Sprintf("%v/%d/%s", r.Kind, r.Epoch, r.Owner))
	}
	if got := strings.Join(kinds, " "); got != "claim/1/A commit/1/A commit/1/A commit/1/A claim/2/B claim/3/C commit/3/C" {
		t.Fatalf("chain: %s", got)
	}
	// Chains of other tasks in the store are separate, and objects
	// among the records that are not records are ignored.
	d := mustOpen(t, s, "orders-30")
	if !d.Newest().IsZero() {
		t.Fatalf("orders-30 sees %+v", d.Newest())
	}
	if err := s.Put(context.Background(), chainPrefix("orders-3")+"NOTES", []byte("not a record")); err != nil {
		t.Fatal(err)
	}
	if n := mustOpen(t, s, "orders-3").Newest(); n.Seq != 7 {
		t.Fatalf("with a foreign object, the newest record is %+v", n)
	}
}

// A zombie: A commits, B claims, A's next Commit fails naming B, and no
// record of A lands after B's claim.
func testZombie(t *testing.T, e env) {
	s := e.fresh(t)
	a := mustOpen(t, s, "t")
	mustClaim(t, a, "A")
	mustCommit(t, a, "a1")
	b := mustOpen(t, s, "t")
	if last := mustClaim(t, b, "B"); string(last.Payload) != "a1" {
		t.Fatalf("B restores from %+v, want a1", last)
	}
	_, err := a.Commit(context.Background(), []byte("a2"))
	wantFenced(t, err, "B", 2)
	if !strings.Contains(err.Error(), describe(s)) || !strings.Contains(err.Error(), ObjectName("t", 3)) {
		t.Errorf("%v: want the store %s and the record %s named", err, describe(s), ObjectName("t", 3))
	}
	_, err = a.Commit(context.Background(), []byte("a3"))
	wantFenced(t, err, "B", 2) // stays fenced, without a request
	if _, err := a.Settle(context.Background()); !errors.Is(err, ErrFenced) {
		t.Fatalf("Settle after fencing: %v", err)
	}
	if _, err := a.Prune(context.Background(), 1); !errors.Is(err, ErrFenced) {
		t.Fatalf("Prune after fencing: %v", err)
	}
	mustCommit(t, b, "b1")
	claimB := uint64(3)
	for _, r := range records(t, s, "t") {
		if r.Owner == "A" && r.Seq >= claimB {
			t.Errorf("A's record %+v is after B's claim at %d", r, claimB)
		}
		if bytes.Equal(r.Payload, []byte("a2")) || bytes.Equal(r.Payload, []byte("a3")) {
			t.Errorf("a fenced commit landed: %+v", r)
		}
	}
	// A fenced owner may claim again: that fences B in turn.
	if last := mustClaim(t, a, "A again"); string(last.Payload) != "b1" {
		t.Fatalf("A's new claim restores from %+v, want b1", last)
	}
	_, err = b.Commit(context.Background(), []byte("b2"))
	wantFenced(t, err, "A again", 3)
}

// Check answers without writing: nil for the owner, a *FencedError once
// a newer owner claimed (after which the owner's commits fail too), and
// ErrNotOwner before a claim.
func testCheck(t *testing.T, e env) {
	s := e.fresh(t)
	ctx := context.Background()
	a := mustOpen(t, s, "t")
	if err := a.Check(ctx); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("Check before a claim: %v, want ErrNotOwner", err)
	}
	mustClaim(t, a, "A")
	mustCommit(t, a, "a1")
	before := len(records(t, s, "t"))
	if err := a.Check(ctx); err != nil {
		t.Fatalf("Check of the owner: %v", err)
	}
	if n := len(records(t, s, "t")); n != before {
		t.Fatalf("Check wrote: %d records, had %d", n, before)
	}
	b := mustOpen(t, s, "t")
	mustClaim(t, b, "B")
	wantFenced(t, a.Check(ctx), "B", 2)
	_, err := a.Commit(ctx, []byte("a2"))
	wantFenced(t, err, "B", 2)
	if err := b.Check(ctx); err != nil {
		t.Fatalf("Check of the new owner: %v", err)
	}
	mustCommit(t, b, "b1")
	if err := b.Check(ctx); err != nil {
		t.Fatalf("Check of the new owner after a commit: %v", err)
	}
}

// Pruning keeps the claims that fence older owners: zombies of two
// epochs back stay fenced after the owner pruned all their commits.
func testZombieAfterPrune(t *testing.T, e env) {
	s := e.fresh(t)
	ctx := context.Background()
	a := mustOpen(t, s, "t")
	mustClaim(t, a, "A")
	mustCommit(t, a, "a1")
	mustCommit(t, a, "a2")
	b := mustOpen(t, s, "t")
	mustClaim(t, b, "B")
	mustCommit(t, b, "b1")
	c := mustOpen(t, s, "t")
	mustClaim(t, c, "C")
	for i := range 5 {
		mustCommit(t, c, fmt.Sprint("c", i))
	}
	if n, err := c.Prune(ctx, 1); err != nil || n != 7 {
		t.Fatalf("Prune(1) = %d, %v; want 7 records deleted (3 commits before C's last and A's, B's commits)", n, err)
	}
	rs := records(t, s, "t")
	var kept []string
	for _, r := range rs {
		kept = append(kept, fmt.Sprintf("%d:%v/%s", r.Seq, r.Kind, r.Owner))
	}
	if got := strings.Join(kept, " "); got != "1:claim/A 4:claim/B 6:claim/C 11:commit/C" {
		t.Fatalf("after Prune(1): %s", got)
	}
	_, err := a.Commit(ctx, []byte("a3"))
	wantFenced(t, err, "B", 2)
	_, err = b.Commit(ctx, []byte("b2"))
	wantFenced(t, err, "C", 3)
	// A reader after the prune still finds what to restore.
	d := mustOpen(t, s, "t")
	if last := mustClaim(t, d, "D"); string(last.Payload) != "c4" {
		t.Fatalf("D restores from %+v", last)
	}
}

// An owner commits (and prunes) as fast as it can while a new owner
// claims: the new owner restores from exactly the last commit the old
// one saw succeed, and every later commit of the old one fails.
func testClaimWhileCommitting(t *testing.T, e env) {
	ctx := context.Background()
	s := e.fresh(t)
	a := mustOpen(t, s, "t")
	mustClaim(t, a, "A")
	// A commits until fenced, but stops racing after most commits and
	// waits for B's claim: an owner committing back to back can win
	// every race against a claimant (which lists and reads between
	// tries), and a Claim gives up after claimTries lost races.
	const most = 100
	started, claimed, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var last Record
	var fenced error
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			switch i {
			case 3:
				close(started)
			case most:
				<-claimed
			case most + 1:
				fenced = errors.New("A's commit after B's claim succeeded")
				return
			}
			r, err := a.Commit(ctx, []byte(fmt.Sprint("a", i)))
			if err != nil {
				fenced = err
				return
			}
			last = r
			if _, err := a.Prune(ctx, 2); err != nil {
				fenced = err
				return
			}
		}
	}()
	<-started
	b := mustOpen(t, s, "t")
	var restored Record
	func() {
		defer close(claimed)
		for {
			r, err := b.Claim(ctx, "B")
			if err == nil {
				restored = r
				return
			}
			if !strings.Contains(err.Error(), "lost the race") {
				t.Errorf("B's claim: %v", err)
				return
			}
		}
	}()
	<-done
	var fe *FencedError
	if !errors.As(fenced, &fe) || fe.Holder != "B" {
		t.Fatalf("A stopped with %v, want fenced by B", fenced)
	}
	if restored.Seq != last.Seq || !bytes.Equal(restored.Payload, last.Payload) {
		t.Fatalf("B restores from %d %q, but A's last successful commit is %d %q", restored.Seq, restored.Payload, last.Seq, last.Payload)
	}
	if claim := b.Newest(); claim.Seq != last.Seq+1 {
		t.Fatalf("B's claim at %d, right after A's last commit %d", claim.Seq, last.Seq)
	}
	for _, r := range records(t, s, "t") {
		if r.Owner == "A" && r.Seq > last.Seq {
			t.Errorf("A's record %d is after its last successful commit %d", r.Seq, last.Seq)
		}
	}
}

// A claimant whose view is older than a prune finds its next seq free
// (written and pruned since): its claim there would fence nobody, so it
// is void, and the claimant claims after the true newest record.
func testClaimIntoGap(t *testing.T, e env) {
	ctx := context.Background()
	s := e.fresh(t)
	a := claimAndCommit(t, s, "A", 4) // 1, then 2..5
	b := mustOpen(t, s, "t")          // sees 5 as the newest
	mustCommit(t, a, "a4")            // 6
	mustCommit(t, a, "a5")            // 7
	if n, err := a.Prune(ctx, 1); err != nil || n != 5 {
		t.Fatalf("Prune(1) = %d, %v", n, err)
	}
	last := mustClaim(t, b, "B") // tries 6, a gap, then 8
	if b.Newest().Seq != 8 || string(last.Payload) != "a5" {
		t.Fatalf("B claimed at %d restoring %q; want 8, restoring a5", b.Newest().Seq, last.Payload)
	}
	if got := mustList(t, s); !slices.Equal(got, []uint64{1, 7, 8}) {
		t.Fatalf("records %v; want B's void claim at 6 gone", got)
	}
	_, err := a.Commit(ctx, []byte("a6"))
	wantFenced(t, err, "B", 2)
}

// A claimant whose listing is pruned before it reads the listing's newest
// record (the owner committed twice and pruned in between) lists again
// and claims after the true newest: a stale listing is a lost race, not
// a failed claim. It failed with "not found" before.
func testClaimAfterStaleListing(t *testing.T, e env) {
	ctx := context.Background()
	s := e.fresh(t)
	a := claimAndCommit(t, s, "A", 4) // 1, then 2..5
	hooked := &afterList{Store: s}
	b := mustOpen(t, hooked, "t") // sees 5 as the newest
	mustCommit(t, a, "a4")        // 6: B's first try loses the race
	hooked.set(func() {
		// Between B's listing (1..6) and its read of 6.
		mustCommit(t, a, "a5") // 7
		mustCommit(t, a, "a6") // 8
		if _, err := a.Prune(ctx, 1); err != nil {
			t.Error(err)
		}
	})
	last, err := b.Claim(ctx, "B")
	if err != nil {
		t.Fatalf("B's claim after a stale listing: %v", err)
	}
	if b.Newest().Seq != 9 || string(last.Payload) != "a6" {
		t.Fatalf("B claimed at %d restoring %q; want 9, restoring a6", b.Newest().Seq, last.Payload)
	}
	if hooked.calls() != 1 {
		t.Fatalf("the prune ran %d times between a listing and a read, want 1", hooked.calls())
	}
	_, err = a.Commit(ctx, []byte("a7"))
	wantFenced(t, err, "B", 2)
}

// afterList is a store that runs a hook once, after the next List.
type afterList struct {
	blob.Store
	mu   sync.Mutex
	hook func()
	ran  int
}

func (l *afterList) set(hook func()) {
	l.mu.Lock()
	l.hook = hook
	l.mu.Unlock()
}

func (l *afterList) calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ran
}

func (l *afterList) List(ctx context.Context, prefix string) ([]string, error) {
	names, err := l.Store.List(ctx, prefix)
	l.mu.Lock()
	hook := l.hook
	l.hook = nil
	if hook != nil {
		l.ran++
	}
	l.mu.Unlock()
	if hook != nil {
		hook()
	}
	return names, err
}

func (l *afterList) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	return l.Store.(blob.Creator).PutIfAbsent(ctx, name, data)
}

// claimAndCommit opens task "t" in s, claims it for owner, commits n
// payloads "a0", "a1", ... and returns the chain.
func claimAndCommit(t *testing.T, s blob.Store, owner string, n int) *Chain {
	t.Helper()
	c := mustOpen(t, s, "t")
	mustClaim(t, c, owner)
	for i := range n {
		mustCommit(t, c, fmt.Sprint("a", i))
	}
	return c
}

// 16 goroutines claim one task at once: each gets an epoch of its own,
// every seq has one record, and of their Commits after all claimed only
// the newest epoch's succeeds.
func testConcurrentClaimants(t *testing.T, e env) {
	s := e.fresh(t)
	const n = 16
	chains := make([]*Chain, n)
	for i := range chains {
		chains[i] = mustOpen(t, s, "t") // all from the same (empty) view
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i, c := range chains {
		wg.Go(func() {
			<-start
			_, errs[i] = c.Claim(context.Background(), fmt.Sprint("claimant ", i))
		})
	}
	close(start)
	wg.Wait()
	epochs := map[uint64]int{}
	for i, c := range chains {
		if errs[i] != nil {
			t.Fatalf("claimant %d: %v", i, errs[i])
		}
		epochs[c.Epoch()] = i
	}
	if len(epochs) != n {
		t.Fatalf("%d distinct epochs among %d claimants", len(epochs), n)
	}
	for i, c := range chains {
		wg.Go(func() { _, errs[i] = c.Commit(context.Background(), []byte(fmt.Sprint("from ", i))) })
	}
	wg.Wait()
	checkClaimed(t, s, n, func(i int) (uint64, error) { return chains[i].Epoch(), errs[i] })
}

// checkClaimed checks the chain of n claimants that each claimed and then
// tried one commit: epochs 1..n, one record per seq, the claims first
// and then the one commit of the newest epoch's owner; result(i) is
// claimant i's epoch and commit error.
func checkClaimed(t *testing.T, s blob.Store, n int, result func(i int) (uint64, error)) {
	t.Helper()
	rs := records(t, s, "t")
	if len(rs) != n+1 {
		t.Fatalf("%d records, want %d claims and one commit", len(rs), n)
	}
	owners := map[uint64]string{}
	for i, r := range rs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
		if i < n && (r.Kind != KindClaim || r.Epoch != uint64(i+1)) {
			t.Fatalf("record %d: %+v, want the claim of epoch %d", i, r, i+1)
		}
		owners[r.Epoch] = r.Owner
	}
	last := rs[n]
	if last.Kind != KindCommit || last.Epoch != uint64(n) || last.Owner != owners[uint64(n)] {
		t.Fatalf("last record %+v, want the commit of epoch %d's owner %s", last, n, owners[uint64(n)])
	}
	winners := 0
	for i := range n {
		epoch, err := result(i)
		if epoch == uint64(n) {
			winners++
			if err != nil {
				t.Errorf("the newest owner's commit failed: %v", err)
			}
			continue
		}
		// Fenced by the claim right after its own.
		var fe *FencedError
		if !errors.As(err, &fe) || fe.Newer != epoch+1 || fe.Holder != owners[epoch+1] {
			t.Errorf("claimant %d (epoch %d): commit error %v, want fenced by %s of epoch %d", i, epoch, err, owners[epoch+1], epoch+1)
		}
	}
	if winners != 1 {
		t.Errorf("%d claimants own the newest epoch", winners)
	}
}

// A create whose reply is lost is recognised as the writer's own on
// retry: one record, the commit succeeds, the chain goes on.
func testLostReply(t *testing.T, e env) {
	l := &lossy{Store: e.fresh(t)}
	a := mustOpen(t, l, "t")
	l.set(1, 0)
	mustClaim(t, a, "A")
	mustCommit(t, a, "a1")
	l.set(2, 0) // two of the three attempts lose their reply
	mustCommit(t, a, "a2")
	mustCommit(t, a, "a3")
	rs := records(t, l.Store, "t")
	if got := seqsOf(rs); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Fatalf("seqs %v, want one record per create", got)
	}
	if string(rs[2].Payload) != "a2" || string(rs[3].Payload) != "a3" {
		t.Fatalf("records %+v", rs)
	}
}

// When no attempt of a create gets an answer, Commit says the outcome is
// unknown, refuses to commit again, and Settle finds out: the record
// landed, or it is written now, or a newer owner took its seq.
func testUnknownOutcome(t *testing.T, e env) {
	ctx := context.Background()
	for _, c := range []struct {
		name       string
		lose, drop int
		claimed    bool // another owner claims before Settle
	}{
		{"landed", 3, 0, false},
		{"not landed", 0, 3, false},
		{"not landed, taken over", 0, 3, true},
		{"landed, then taken over", 3, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &lossy{Store: e.fresh(t)}
			a := mustOpen(t, l, "t")
			mustClaim(t, a, "A")
			if r, err := a.Settle(ctx); err != nil || !r.IsZero() {
				t.Fatalf("Settle with nothing pending: %+v, %v", r, err)
			}
			l.set(c.lose, c.drop)
			_, err := a.Commit(ctx, []byte("a1"))
			if !errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, errLost) || !strings.Contains(err.Error(), ObjectName("t", 2)) {
				t.Fatalf("Commit: %v, want an unknown outcome naming the record and the cause", err)
			}
			if _, err := a.Commit(ctx, []byte("a2")); err == nil || !strings.Contains(err.Error(), "Settle") {
				t.Fatalf("Commit with one pending: %v, want to be told to Settle", err)
			}
			if c.claimed {
				b := mustOpen(t, l.Store, "t")
				last := mustClaim(t, b, "B")
				if landed := c.lose > 0; landed != (string(last.Payload) == "a1") {
					t.Fatalf("B restores from %+v", last)
				}
			}
			r, err := a.Settle(ctx)
			switch {
			case c.claimed && c.drop > 0:
				wantFenced(t, err, "B", 2)
			case c.claimed:
				// The commit landed before B's claim: B restored it, and
				// Settle reports it committed; the next commit is fenced.
				if err != nil || string(r.Payload) != "a1" {
					t.Fatalf("Settle: %+v, %v", r, err)
				}
				_, err := a.Commit(ctx, []byte("a2"))
				wantFenced(t, err, "B", 2)
			default:
				if err != nil || r.Seq != 2 || string(r.Payload) != "a1" {
					t.Fatalf("Settle: %+v, %v; want a1 committed at 2", r, err)
				}
				if r := mustCommit(t, a, "a2"); r.Seq != 3 {
					t.Fatalf("next commit at %d", r.Seq)
				}
			}
			for _, r := range records(t, l.Store, "t") {
				if r.Owner == "A" && r.Kind == KindCommit && string(r.Payload) != "a1" && string(r.Payload) != "a2" {
					t.Errorf("unexpected record %+v", r)
				}
			}
		})
	}
}

// Damaged records that Open or Claim must read are errors naming them:
// bytes flipped, cut short, or a well-checksummed object that is not a
// record.
func testCorrupt(t *testing.T, e env) {
	ctx := context.Background()
	setup := func(t *testing.T) (blob.Store, string) {
		s := e.fresh(t)
		a := mustOpen(t, s, "t")
		mustClaim(t, a, "A")
		mustCommit(t, a, "a1")
		mustCommit(t, a, "a2")
		return s, ObjectName("t", 3)
	}
	for _, c := range []struct {
		name  string
		f     func([]byte) []byte
		wantS string
	}{
		{"flipped", func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }, "checksum mismatch"},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, "is corrupt"},
		{"empty", func(b []byte) []byte { return nil }, "truncated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, newest := setup(t)
			e.damage(t, s, newest, c.f)
			_, err := Open(ctx, s, "t")
			var ce *blob.CorruptError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), newest) || !strings.Contains(err.Error(), c.wantS) || !strings.Contains(err.Error(), `task "t"`) {
				t.Fatalf("Open: %v; want a corrupt-object error naming %s and saying %q", err, newest, c.wantS)
			}
		})
	}
	t.Run("not a record", func(t *testing.T) {
		s, newest := setup(t)
		if err := s.Put(ctx, newest, []byte("ETC\x01\x02garbage")); err != nil {
			t.Fatal(err)
		}
		_, err := Open(ctx, s, "t")
		var de *DecodeError
		if !errors.As(err, &de) || de.Object != newest {
			t.Fatalf("Open: %v; want a *DecodeError naming %s", err, newest)
		}
	})
	t.Run("restore point", func(t *testing.T) {
		s, newest := setup(t)
		b := mustOpen(t, s, "t")
		mustClaim(t, b, "B") // the newest is now a claim
		e.damage(t, s, newest, func(b []byte) []byte { b[0] ^= 1; return b })
		c := mustOpen(t, s, "t")
		_, err := c.Claim(ctx, "C")
		if err == nil || !strings.Contains(err.Error(), newest) || !strings.Contains(err.Error(), "restores") {
			t.Fatalf("Claim: %v; want an error naming the newest commit %s", err, newest)
		}
	})
}

// Prune deletes a damaged commit it does not keep without reading it,
// and fails, deleting nothing, on a damaged one it must read.
func testPruneCorrupt(t *testing.T, e env) {
	ctx := context.Background()
	s := e.fresh(t)
	a := mustOpen(t, s, "t")
	mustClaim(t, a, "A")
	for i := range 6 {
		mustCommit(t, a, fmt.Sprint("a", i)) // seqs 2..7
	}
	e.damage(t, s, ObjectName("t", 3), func(b []byte) []byte { return b[:3] })
	if n, err := a.Prune(ctx, 4); err != nil || n != 2 {
		t.Fatalf("Prune(4) = %d, %v; want records 2 and 3 deleted", n, err)
	}
	b := mustOpen(t, s, "t")
	mustClaim(t, b, "B") // seq 8; B knows none of the commits
	e.damage(t, s, ObjectName("t", 6), func(b []byte) []byte { b[1] ^= 1; return b })
	names := mustList(t, s)
	_, err := b.Prune(ctx, 3)
	if err == nil || !strings.Contains(err.Error(), ObjectName("t", 6)) {
		t.Fatalf("Prune(3): %v; want an error naming %s", err, ObjectName("t", 6))
	}
	if after := mustList(t, s); !slices.Equal(names, after) {
		t.Fatalf("a failed Prune deleted records: %v, then %v", names, after)
	}
	// Keeping fewer commits, it does not read the damaged one and
	// deletes it.
	if n, err := b.Prune(ctx, 1); err != nil || n != 3 {
		t.Fatalf("Prune(1) = %d, %v; want records 4, 5 and 6 deleted", n, err)
	}
	if kept := mustList(t, s); !slices.Equal(kept, []uint64{1, 7, 8}) {
		t.Fatalf("kept %v", kept)
	}
}

func mustList(t *testing.T, s blob.Store) []uint64 {
	t.Helper()
	names, err := s.List(context.Background(), chainPrefix("t"))
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, n := range names {
		if seq, ok := parseSeq(chainPrefix("t"), n); ok {
			seqs = append(seqs, seq)
		}
	}
	return seqs
}

// Prune keeps the newest keep commits and every claim, carries its floor
// into the next records so that the next owner's prune starts there, and
// never deletes the newest commit.
func testPrune(t *testing.T, e env) {
	ctx := context.Background()
	s := e.fresh(t)
	a := mustOpen(t, s, "t")
	mustClaim(t, a, "A")
	if n, err := a.Prune(ctx, 3); err != nil || n != 0 {
		t.Fatalf("Prune of a chain without commits = %d, %v", n, err)
	}
	for i := range 5 {
		mustCommit(t, a, fmt.Sprint("a", i)) // 2..6
	}
	if n, err := a.Prune(ctx, 0); err != nil || n != 4 {
		t.Fatalf("Prune(0) = %d, %v; want it to keep one commit", n, err)
	}
	if got := mustList(t, s); !slices.Equal(got, []uint64{1, 6}) {
		t.Fatalf("kept %v", got)
	}
	mustCommit(t, a, "a5") // 7, floor 6
	if r := a.Newest(); r.floor != 6 {
		t.Fatalf("record 7 carries floor %d, want 6", r.floor)
	}
	b := mustOpen(t, s, "t")
	mustClaim(t, b, "B") // 8
	for i := range 3 {
		mustCommit(t, b, fmt.Sprint("b", i)) // 9..11
		if _, err := b.Prune(ctx, 2); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustList(t, s); !slices.Equal(got, []uint64{1, 8, 10, 11}) {
		t.Fatalf("kept %v", got)
	}
	if _, err := mustOpen(t, s, "t").Prune(ctx, 1); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("Prune by a reader: %v, want ErrNotOwner", err)
	}
}

// The requests of each operation are what the package documents: Commit
// one PUT; Prune after a commit one DELETE; Open one LIST and one GET.
func testRequests(t *testing.T, e env) {
	p90, after := hedgeP90, hedgeAfter
	defer func() { hedgeP90, hedgeAfter = p90, after }()
	hedgeP90, hedgeAfter = 0, 1<<62 // no hedges: count what the protocol asks for
	ctx := context.Background()
	var n blob.Counter
	s := blob.Count(e.fresh(t), &n)
	step := func(what string, want blob.Requests, f func()) {
		t.Helper()
		before := n.Requests()
		f()
		if got := n.Requests().Sub(before); got != want {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	var a *Chain
	step("Open of an empty chain", blob.Requests{List: 1}, func() { a = mustOpen(t, s, "t") })
	step("Claim", blob.Requests{Put: 1, List: 1}, func() { mustClaim(t, a, "A") })
	for i := range 5 {
		step("Commit", blob.Requests{Put: 1}, func() { mustCommit(t, a, fmt.Sprint(i)) })
	}
	step("first Prune(2)", blob.Requests{Delete: 3}, func() {
		if _, err := a.Prune(ctx, 2); err != nil {
			t.Fatal(err)
		}
	})
	for i := range 3 {
		step("Commit, then Prune(2)", blob.Requests{Put: 1, Delete: 1}, func() {
			mustCommit(t, a, fmt.Sprint("p", i))
			if _, err := a.Prune(ctx, 2); err != nil {
				t.Fatal(err)
			}
		})
	}
	var b *Chain
	step("Open", blob.Requests{List: 1, Get: 1}, func() { b = mustOpen(t, s, "t") })
	step("Claim after a commit", blob.Requests{Put: 1, List: 1}, func() { mustClaim(t, b, "B") })
	var c *Chain
	step("Open", blob.Requests{List: 1, Get: 1}, func() { c = mustOpen(t, s, "t") })
	step("Claim after a claim", blob.Requests{Put: 1, List: 1, Get: 1}, func() { mustClaim(t, c, "C") })
	// The first prune after Open needs the links of the kept commits
	// and of the claims above the floor: C read them already (the
	// newest record at Open, the commit it restores from).
	step("Commit, then the first Prune(2)", blob.Requests{Put: 1, Delete: 1}, func() {
		mustCommit(t, c, "c")
		if _, err := c.Prune(ctx, 2); err != nil {
			t.Fatal(err)
		}
	})
	step("fenced Commit", blob.Requests{Put: 1, Get: 2}, func() {
		_, err := b.Commit(ctx, []byte("b"))
		wantFenced(t, err, "C", 3)
	})
}

// Bad task ids, owners and payloads, a store without conditional
// creates, a cancelled context and commits before a claim are errors
// that say so.
func testErrors(t *testing.T, e env) {
	s := e.fresh(t)
	if _, err := Open(context.Background(), s, "a/../b"); err == nil || !strings.Contains(err.Error(), "invalid task id") {
		t.Errorf("Open of a bad task id: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Open(ctx, s, "t"); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `task "t"`) {
		t.Errorf("Open with a cancelled context: %v", err)
	}
	a := mustOpen(t, s, "t")
	if _, err := a.Commit(context.Background(), []byte("x")); !errors.Is(err, ErrNotOwner) {
		t.Errorf("Commit before Claim: %v", err)
	}
	if _, err := a.Claim(context.Background(), ""); err == nil || !strings.Contains(err.Error(), "empty owner") {
		t.Errorf("Claim with no owner: %v", err)
	}
	if _, err := a.Claim(ctx, "A"); !errors.Is(err, context.Canceled) {
		t.Errorf("Claim with a cancelled context: %v", err)
	}
	mustClaim(t, a, "A")
	if _, err := a.Commit(context.Background(), make([]byte, MaxPayload+1)); err == nil || !strings.Contains(err.Error(), "payload") {
		t.Errorf("Commit of a huge payload: %v", err)
	}
	if _, err := a.Commit(ctx, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit with a cancelled context: %v", err)
	}
	if _, err := Open(context.Background(), plainStore{s}, "t"); !errors.Is(err, blob.ErrNoConditionalCreate) {
		t.Errorf("Open of a store without conditional creates: %v", err)
	}
}

// plainStore hides a store's PutIfAbsent.
type plainStore struct{ blob.Store }
