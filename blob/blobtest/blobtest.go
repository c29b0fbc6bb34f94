package blobtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eddyflow/eddy/blob"
)

// Option changes what Run checks.
type Option func(*config)

type config struct {
	corrupt func(t *testing.T, s blob.Store, name string, damage func(stored []byte) []byte)
	large   int
	writers int
	// namePrefix is what the store's errors put before a name (see
	// ErrorNamePrefix).
	namePrefix string
}

// ErrorNamePrefix says that the store names its objects in errors with
// prefix before the name it was given: the prefix of the store below a
// blob.Sub, where the object is.
func ErrorNamePrefix(prefix string) Option {
	return func(c *config) { c.namePrefix = prefix }
}

// Corrupt gives Run a way to damage an object behind the store's back:
// corrupt must replace the bytes the store keeps for name (the payload and
// whatever framing the store adds) with damage(stored), bypassing the
// store's own checks. Run then demands that Get reports a
// *blob.CorruptError naming the object. Without this option the corruption
// checks are skipped.
func Corrupt(corrupt func(t *testing.T, s blob.Store, name string, damage func(stored []byte) []byte)) Option {
	return func(c *config) { c.corrupt = corrupt }
}

// LargeSize sets the size of the large objects Run round-trips and
// creates conditionally (default 20 MiB), e.g. to cross a backend's
// multipart threshold. Zero or less skips the large-object checks.
func LargeSize(n int) Option {
	return func(c *config) { c.large = n }
}

// Writers sets how many writers race to create one object (default 16).
func Writers(n int) Option {
	return func(c *config) { c.writers = max(n, 2) }
}

// DefaultLargeSize is the size of the large objects Run checks unless
// LargeSize says otherwise.
const DefaultLargeSize = 20 << 20

// Run runs the conformance suite, one subtest per behaviour, each on a
// store that open returns fresh and empty for that subtest (open may use
// t.Cleanup and t.TempDir).
func Run(t *testing.T, open func(t *testing.T) blob.Store, opts ...Option) {
	c := config{large: DefaultLargeSize, writers: 16}
	for _, o := range opts {
		o(&c)
	}
	tests := []struct {
		name string
		f    func(t *testing.T, s blob.Store, c *config)
	}{
		{"RoundTrip", testRoundTrip},
		{"InvalidName", testInvalidName},
		{"NotFound", testNotFound},
		{"List", testList},
		{"Delete", testDelete},
		{"AtomicVisibility", testAtomicVisibility},
		{"ListDuringPuts", testListDuringPuts},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfAbsentRace", testPutIfAbsentRace},
		{"Corrupt", testCorrupt},
		{"Large", testLarge},
		{"PutIfAbsentLarge", testPutIfAbsentLarge},
		{"HedgedPutIfAbsent", testHedgedPutIfAbsent},
		{"Claim", testClaim},
		{"ClaimRace", testClaimRace},
		{"Parts", testParts},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, open(t), &c) })
	}
}

// payload returns n pseudo-random bytes determined by seed.
func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0xb10b))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func mustPut(t *testing.T, s blob.Store, name string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), name, data); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", name, len(data), err)
	}
}

// mustGet reads name with Get and, for an IntoGetter, with GetInto into
// buffers too small and big enough, and demands want from each.
func mustGet(t *testing.T, s blob.Store, name string, want []byte) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Get(ctx, name)
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %d bytes %s, want %d bytes %s", name, len(got), brief(got), len(want), brief(want))
	}
	if _, ok := s.(blob.IntoGetter); !ok {
		return
	}
	for _, size := range []int{0, 7, len(want) + 64} {
		buf := bytes.Repeat([]byte{0xEE}, size)
		got, err := blob.GetInto(ctx, s, name, &buf)
		if err != nil {
			t.Fatalf("GetInto(%q) with a %d-byte buffer: %v", name, size, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("GetInto(%q) with a %d-byte buffer = %d bytes %s, want %d bytes %s", name, size, len(got), brief(got), len(want), brief(want))
		}
	}
}

func brief(b []byte) string {
	if len(b) > 24 {
		return fmt.Sprintf("%q...", b[:24])
	}
	return fmt.Sprintf("%q", b)
}

func testRoundTrip(t *testing.T, s blob.Store, _ *config) {
	for i, n := range []int{0, 1, 15, 16, 17, 4096, 1<<20 + 3} {
		name := fmt.Sprintf("rt/obj-%d", i)
		data := payload(uint64(i), n)
		mustPut(t, s, name, data)
		mustGet(t, s, name, data)
	}
	// Overwrite, with a shorter and then a longer object.
	mustPut(t, s, "rt/obj-6", []byte("short"))
	mustGet(t, s, "rt/obj-6", []byte("short"))
	long := payload(99, 70000)
	mustPut(t, s, "rt/obj-6", long)
	mustGet(t, s, "rt/obj-6", long)
	// Put does not keep the caller's buffer.
	buf := []byte("first")
	mustPut(t, s, "rt/reuse", buf)
	copy(buf, "XXXXX")
	mustGet(t, s, "rt/reuse", []byte("first"))
	// Names with spaces, dots inside segments and deep paths.
	for _, name := range []string{"a b/c d", "x/y.z/w..", "u/é ü", "d/e/f/g/h/i/j"} {
		mustPut(t, s, name, []byte(name))
		mustGet(t, s, name, []byte(name))
	}
}

func testInvalidName(t *testing.T, s blob.Store, _ *config) {
	ctx := context.Background()
	for _, name := range []string{"", "/abs", "a//b", "../x", "a/.tmp", ".hidden"} {
		if err := s.Put(ctx, name, []byte("x")); err == nil {
			t.Errorf("Put(%q) succeeded; want an invalid-name error", name)
		}
		if _, err := s.Get(ctx, name); err == nil {
			t.Errorf("Get(%q) succeeded; want an invalid-name error", name)
		}
	}
}

func wantNotFound(t *testing.T, err error, op, name string) {
	t.Helper()
	if !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("%s(%q) = %v, want an error matching blob.ErrNotFound", op, name, err)
	}
	if !strings.Contains(err.Error(), name) {
		t.Fatalf("%s(%q) = %q, want an error naming the object", op, name, err)
	}
}

func testNotFound(t *testing.T, s blob.Store, _ *config) {
	ctx := context.Background()
	for _, name := range []string{"missing", "no/such/object"} {
		_, err := s.Get(ctx, name)
		wantNotFound(t, err, "Get", name)
		var buf []byte
		_, err = blob.GetInto(ctx, s, name, &buf)
		wantNotFound(t, err, "GetInto", name)
	}
	// A name that is a prefix of objects ("directory") is not an object.
	mustPut(t, s, "dir/obj", []byte("x"))
	_, err := s.Get(ctx, "dir")
	wantNotFound(t, err, "Get", "dir")
}

func mustList(t *testing.T, s blob.Store, prefix string) []string {
	t.Helper()
	names, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return names
}

func testList(t *testing.T, s blob.Store, _ *config) {
	all := []string{"a/1", "a/2", "a/b/3", "ab", "b/1", "c"}
	for _, n := range slices.Backward(all) {
		mustPut(t, s, n, []byte(n))
	}
	cases := map[string][]string{
		"":      all,
		"a":     {"a/1", "a/2", "a/b/3", "ab"},
		"a/":    {"a/1", "a/2", "a/b/3"},
		"a/b":   {"a/b/3"},
		"a/b/":  {"a/b/3"},
		"b/1":   {"b/1"},
		"zz":    nil,
		"zz/y/": nil,
		"../":   nil,
	}
	for prefix, want := range cases {
		got := mustList(t, s, prefix)
		if len(got) == 0 && len(want) == 0 {
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
	}
}

func testDelete(t *testing.T, s blob.Store, _ *config) {
	ctx := context.Background()
	if err := s.Delete(ctx, "never/was"); err != nil {
		t.Fatalf("Delete of a missing object: %v", err)
	}
	mustPut(t, s, "d/x", []byte("x"))
	mustPut(t, s, "d/y", []byte("y"))
	if err := s.Delete(ctx, "d/x"); err != nil {
		t.Fatalf("Delete(d/x): %v", err)
	}
	_, err := s.Get(ctx, "d/x")
	wantNotFound(t, err, "Get after Delete", "d/x")
	if got := mustList(t, s, "d/"); !slices.Equal(got, []string{"d/y"}) {
		t.Fatalf("List(d/) after Delete(d/x) = %q, want [d/y]", got)
	}
	if err := s.Delete(ctx, "d/x"); err != nil {
		t.Fatalf("second Delete(d/x): %v", err)
	}
	mustGet(t, s, "d/y", []byte("y"))
}

// version returns the object of version v: its length and every byte
// depend on v, so a reader can tell a whole version from a mix.
func version(v int) []byte {
	return bytes.Repeat([]byte{byte(v)}, 256<<10+v*4099)
}

// isVersion reports which version b is, or -1 if it is none.
func isVersion(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	v := int(b[0])
	if !bytes.Equal(b, version(v)) {
		return -1
	}
	return v
}

func testAtomicVisibility(t *testing.T, s blob.Store, _ *config) {
	ctx := context.Background()
	const name, versions = "atomic/obj", 12
	mustPut(t, s, name, version(0))
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	var reads atomic.Int64
	for range 3 {
		wg.Go(func() {
			// Read at least once after the last Put began, whatever the
			// scheduling: the loop ends only after a read that started
			// once done was set.
			for last := false; !last; {
				last = done.Load()
				got, err := s.Get(ctx, name)
				if err != nil {
					errs <- fmt.Errorf("Get during Puts: %w", err)
					return
				}
				reads.Add(1)
				if isVersion(got) < 0 {
					errs <- fmt.Errorf("Get during Puts returned %d bytes that are no whole version (%s)", len(got), brief(got))
					return
				}
			}
		})
	}
	for v := 1; v <= versions; v++ {
		if err := s.Put(ctx, name, version(v)); err != nil {
			t.Errorf("Put version %d: %v", v, err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mustGet(t, s, name, version(versions))
	t.Logf("%d reads during %d Puts", reads.Load(), versions)
}

func testListDuringPuts(t *testing.T, s blob.Store, _ *config) {
	ctx := context.Background()
	want := map[string]bool{}
	var names []string
	for i := range 20 {
		n := fmt.Sprintf("ld/obj-%02d", i)
		want[n] = true
		names = append(names, n)
	}
	var done atomic.Bool
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for last := false; !last; {
			last = done.Load()
			got, err := s.List(ctx, "ld/")
			if err != nil {
				errs <- fmt.Errorf("List during Puts: %w", err)
				return
			}
			if !slices.IsSorted(got) {
				errs <- fmt.Errorf("List during Puts not sorted: %q", got)
				return
			}
			for _, n := range got {
				if !want[n] {
					errs <- fmt.Errorf("List during Puts listed %q, which no Put wrote (a temporary?)", n)
					return
				}
			}
		}
	})
	for _, n := range names {
		if err := s.Put(ctx, n, payload(1, 64<<10)); err != nil {
			t.Errorf("Put(%q): %v", n, err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := mustList(t, s, "ld/"); !slices.Equal(got, names) {
		t.Errorf("List(ld/) = %q, want %q", got, names)
	}
}

func creator(t *testing.T, s blob.Store) blob.Creator {
	t.Helper()
	c, ok := s.(blob.Creator)
	if !ok {
		err := blob.PutIfAbsent(context.Background(), s, "x", nil)
		if !errors.Is(err, blob.ErrNoConditionalCreate) {
			t.Fatalf("blob.PutIfAbsent on a %T, which is no blob.Creator = %v, want ErrNoConditionalCreate", s, err)
		}
		t.Skipf("%T is no blob.Creator", s)
	}
	return c
}

func wantExists(t *testing.T, err error, name string) {
	t.Helper()
	if !errors.Is(err, blob.ErrExists) {
		t.Fatalf("PutIfAbsent(%q) of an existing object = %v, want an error matching blob.ErrExists", name, err)
	}
	if !strings.Contains(err.Error(), name) {
		t.Fatalf("PutIfAbsent(%q) = %q, want an error naming the object", name, err)
	}
}

func testPutIfAbsent(t *testing.T, s blob.Store, _ *config) {
	c := creator(t, s)
	ctx := context.Background()
	if err := c.PutIfAbsent(ctx, "pia/obj", []byte("first")); err != nil {
		t.Fatalf("PutIfAbsent of a new object: %v", err)
	}
	mustGet(t, s, "pia/obj", []byte("first"))
	wantExists(t, c.PutIfAbsent(ctx, "pia/obj", []byte("second")), "pia/obj")
	mustGet(t, s, "pia/obj", []byte("first"))
	// An object written by Put exists too.
	mustPut(t, s, "pia/put", []byte("put"))
	wantExists(t, c.PutIfAbsent(ctx, "pia/put", []byte("second")), "pia/put")
	mustGet(t, s, "pia/put", []byte("put"))
	// Once deleted, the name can be created again.
	if err := s.Delete(ctx, "pia/obj"); err != nil {
		t.Fatal(err)
	}
	if err := c.PutIfAbsent(ctx, "pia/obj", []byte("again")); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
	mustGet(t, s, "pia/obj", []byte("again"))
	if err := c.PutIfAbsent(ctx, "../bad", []byte("x")); err == nil {
		t.Fatal("PutIfAbsent of an invalid name succeeded")
	}
	if got := mustList(t, s, "pia/"); !slices.Equal(got, []string{"pia/obj", "pia/put"}) {
		t.Fatalf("List(pia/) = %q, want [pia/obj pia/put]", got)
	}
}

// race has writers create name at once, each with its own bytes, and
// checks that exactly one wins and that Get returns the winner's bytes.
func race(t *testing.T, s blob.Store, name string, writers int, data func(i int) []byte) {
	t.Helper()
	c := creator(t, s)
	ctx := context.Background()
	errs := make([]error, writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		d := data(i)
		wg.Go(func() {
			<-start
			errs[i] = c.PutIfAbsent(ctx, name, d)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both created %q", winner, i, name)
		case err == nil:
			winner = i
		default:
			wantExists(t, err, name)
		}
	}
	if winner < 0 {
		t.Fatalf("none of %d writers created %q", writers, name)
	}
	mustGet(t, s, name, data(winner))
}

func testPutIfAbsentRace(t *testing.T, s blob.Store, c *config) {
	for round := range 3 {
		name := fmt.Sprintf("race/obj-%d", round)
		race(t, s, name, c.writers, func(i int) []byte {
			return []byte(fmt.Sprintf("writer %d of round %d", i, round))
		})
	}
}

func testPutIfAbsentLarge(t *testing.T, s blob.Store, c *config) {
	if c.large <= 0 {
		t.Skip("large objects not checked (LargeSize)")
	}
	race(t, s, "race/large", 3, func(i int) []byte { return payload(uint64(100+i), c.large) })
}

func testLarge(t *testing.T, s blob.Store, c *config) {
	if c.large <= 0 {
		t.Skip("large objects not checked (LargeSize)")
	}
	data := payload(7, c.large)
	mustPut(t, s, "large/obj", data)
	mustGet(t, s, "large/obj", data)
	// An overwrite with a large object of another size.
	data = payload(8, c.large+12345)
	mustPut(t, s, "large/obj", data)
	mustGet(t, s, "large/obj", data)
}

func wantCorrupt(t *testing.T, s blob.Store, c *config, name, how string) {
	t.Helper()
	_, err := s.Get(context.Background(), name)
	var ce *blob.CorruptError
	if !errors.As(err, &ce) || ce.Name != c.namePrefix+name {
		t.Fatalf("Get(%q) after %s = %v, want a *blob.CorruptError naming it", name, how, err)
	}
}

func testCorrupt(t *testing.T, s blob.Store, c *config) {
	if c.corrupt == nil {
		t.Skip("the store cannot be corrupted by the test (no Corrupt option)")
	}
	damages := []struct {
		how    string
		damage func([]byte) []byte
	}{
		{"flipping a payload bit", func(b []byte) []byte { b[3] ^= 0x10; return b }},
		{"flipping a trailer bit", func(b []byte) []byte { b[len(b)-10] ^= 1; return b }},
		{"truncating it", func(b []byte) []byte { return b[:len(b)-1] }},
		{"cutting it to 5 bytes", func(b []byte) []byte { return b[:5] }},
		{"emptying it", func(b []byte) []byte { return b[:0] }},
		{"appending a byte", func(b []byte) []byte { return append(b, 0) }},
	}
	for i, d := range damages {
		name := fmt.Sprintf("corrupt/obj-%d", i)
		mustPut(t, s, name, payload(uint64(i), 1000))
		c.corrupt(t, s, name, d.damage)
		wantCorrupt(t, s, c, name, d.how)
	}
	if c.large > 0 {
		mustPut(t, s, "corrupt/large", payload(3, c.large))
		c.corrupt(t, s, "corrupt/large", func(b []byte) []byte { b[len(b)/2] ^= 0x80; return b })
		wantCorrupt(t, s, c, "corrupt/large", "flipping a bit in the middle of a large object")
	}
}

// testHedgedPutIfAbsent: a hedged create that finds its own bytes (an
// earlier attempt's) succeeds, one that finds another writer's fails with
// ErrExists and leaves that writer's object.
func testHedgedPutIfAbsent(t *testing.T, s blob.Store, _ *config) {
	creator(t, s)
	ctx := context.Background()
	h := blob.NewHedger(3, 0)
	if err := h.PutIfAbsent(ctx, s, "hpia/obj", []byte("mine"), 3); err != nil {
		t.Fatalf("hedged PutIfAbsent of a new object: %v", err)
	}
	// As if a lost reply made the caller try again: its own bytes are there.
	if err := h.PutIfAbsent(ctx, s, "hpia/obj", []byte("mine"), 3); err != nil {
		t.Fatalf("hedged PutIfAbsent finding its own bytes = %v, want success", err)
	}
	wantExists(t, h.PutIfAbsent(ctx, s, "hpia/obj", []byte("theirs"), 3), "hpia/obj")
	mustGet(t, s, "hpia/obj", []byte("mine"))
}

// testClaim: a second claim fences the first, whose Check then names the
// newer owner; the newer one's Check passes, and older claims are gone.
func testClaim(t *testing.T, s blob.Store, _ *config) {
	creator(t, s)
	ctx := context.Background()
	first, err := blob.Claim(ctx, s, "first owner")
	if err != nil {
		t.Fatalf("Claim of an unclaimed store: %v", err)
	}
	if err := first.Check(); err != nil {
		t.Fatalf("Check of the only claim: %v", err)
	}
	second, err := blob.Claim(ctx, s, "second owner")
	if err != nil {
		t.Fatalf("second Claim: %v", err)
	}
	var fenced *blob.FencedError
	if err := first.Check(); !errors.As(err, &fenced) || fenced.Holder != "second owner" || !strings.Contains(err.Error(), "second owner") {
		t.Fatalf("Check of the older claim = %v, want a *blob.FencedError naming the second owner", err)
	}
	if err := second.Check(); err != nil {
		t.Fatalf("Check of the newest claim: %v", err)
	}
	if err := second.Release(); err != nil {
		t.Fatal(err)
	}
	// Released, the newest claim still fences the older one.
	if err := first.Check(); !errors.As(err, &fenced) {
		t.Fatalf("Check of the older claim after the newer one's Release = %v, want fenced", err)
	}
	if got := mustList(t, s, blob.ClaimsDir); len(got) != 1 {
		t.Fatalf("claims left = %q, want only the newest", got)
	}
	// A claim deleted behind its holder's back is lost too.
	mustDeleteAll(t, s, blob.ClaimsDir)
	if err := second.Check(); !errors.As(err, &fenced) || fenced.Newer != 0 {
		t.Fatalf("Check of a deleted claim = %v, want a *blob.FencedError with no newer claim", err)
	}
}

// testClaimRace: of writers claiming at once, each gets its own epoch and
// exactly one, the newest, passes Check.
func testClaimRace(t *testing.T, s blob.Store, c *config) {
	creator(t, s)
	ctx := context.Background()
	leases := make([]blob.Lease, c.writers)
	errs := make([]error, c.writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range c.writers {
		wg.Go(func() {
			<-start
			leases[i], errs[i] = blob.Claim(ctx, s, fmt.Sprintf("claimant %d", i))
		})
	}
	close(start)
	wg.Wait()
	holders := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("claimant %d: %v", i, err)
		}
		if leases[i].Check() == nil {
			holders++
		}
	}
	if holders != 1 {
		t.Fatalf("%d of %d racing claimants hold the store, want exactly 1", holders, c.writers)
	}
}

func mustDeleteAll(t *testing.T, s blob.Store, prefix string) {
	t.Helper()
	for _, n := range mustList(t, s, prefix) {
		if err := s.Delete(context.Background(), n); err != nil {
			t.Fatalf("Delete(%q): %v", n, err)
		}
	}
}

// testParts builds an object from parts uploaded out of order, one of them
// twice at once (a hedge): nothing is listed or readable before Complete,
// then Get returns the payload the parts and trailer make up. An aborted
// upload leaves nothing. Stores that are not blob.Parters skip it.
func testParts(t *testing.T, s blob.Store, _ *config) {
	p, min, ok := blob.PartsOf(s)
	if !ok {
		t.Skipf("%T cannot build objects from parts", s)
	}
	ctx := context.Background()
	u, err := p.CreateParts(ctx, "parts/obj")
	if err != nil {
		t.Fatal(err)
	}
	payload := payload(7, 2*min+1000)
	var crc uint32
	crc = blob.UpdateChecksum(crc, payload)
	last := blob.AppendTrailerOf(append([]byte(nil), payload[2*min:]...), crc, int64(len(payload)))
	if err := u.UploadPart(ctx, 3, last); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, n := range []int{2, 2, 1} {
		wg.Go(func() { errs <- u.UploadPart(ctx, n, payload[(n-1)*min:n*min]) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if names := mustList(t, s, "parts/"); len(names) != 0 {
		t.Fatalf("before Complete, List gives %v", names)
	}
	if _, err := s.Get(ctx, "parts/obj"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("before Complete, Get gives %v, want not found", err)
	}
	if err := u.Complete(ctx, 3); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, "parts/obj", payload)
	// A retry of a completion whose response was lost finds the upload
	// gone and the object whole: it succeeds.
	if err := u.Complete(ctx, 3); err != nil {
		t.Fatalf("Complete again: %v", err)
	}

	a, err := p.CreateParts(ctx, "parts/aborted")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.UploadPart(ctx, 1, payload[:min]); err != nil {
		t.Fatal(err)
	}
	if err := a.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if names := mustList(t, s, "parts/"); !slices.Equal(names, []string{"parts/obj"}) {
		t.Fatalf("after an abort, List gives %v, want only parts/obj", names)
	}
	if err := a.Complete(ctx, 1); err == nil {
		t.Fatal("Complete after Abort succeeded")
	}
	if err := p.CompleteParts(ctx, "parts/aborted", a.ID(), 1, int64(min)); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("CompleteParts of an aborted upload: %v, want not found", err)
	}

	// Another process completes an upload from its id; a second
	// completion, by it or by the writer, finds the object whole.
	r, err := p.CreateParts(ctx, "parts/resumed")
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 2; n++ {
		if err := r.UploadPart(ctx, n, payload[(n-1)*min:n*min]); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.UploadPart(ctx, 3, last); err != nil {
		t.Fatal(err)
	}
	size := int64(len(payload) + blob.TrailerSize)
	if err := p.CompleteParts(ctx, "parts/resumed", r.ID(), 3, size+1); err == nil {
		t.Fatal("CompleteParts with the wrong size succeeded")
	}
	if names := mustList(t, s, "parts/resumed"); len(names) != 0 {
		t.Fatalf("after a refused CompleteParts, List gives %v", names)
	}
	if err := p.CompleteParts(ctx, "parts/resumed", r.ID(), 3, size); err != nil {
		t.Fatalf("CompleteParts: %v", err)
	}
	mustGet(t, s, "parts/resumed", payload)
	if err := p.CompleteParts(ctx, "parts/resumed", r.ID(), 3, size); err != nil {
		t.Fatalf("CompleteParts again: %v", err)
	}
	if err := r.Complete(ctx, 3); err != nil {
		t.Fatalf("Complete after CompleteParts: %v", err)
	}
	mustGet(t, s, "parts/resumed", payload)
}
