package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Hedger decides when a write to or a read from a store is hedged: how
// long an attempt may run before another attempt of the same operation
// starts in parallel. It learns the store's latency from the successful
// attempts recorded with it, and hedges after Factor times their 90th
// percentile (of the last 64, once 16 are known), never sooner than
// MinHedgeDelay and never later than Max: the hedge follows the store's
// own tail, as hedged requests do in "The Tail at Scale", rather than
// waiting a fixed time. With Factor zero or negative, or until 16
// attempts are known, it hedges after Max; an attempt started before then
// is hedged as soon as what was learned meanwhile says it is late. Give
// operations of very different sizes their own Hedgers: one learned from
// kilobyte reads hedges every megabyte read. A call returns once all of
// its attempts have: a hedge saves time only with a store whose calls end
// when their context is cancelled. One Hedger is shared by the operations
// it learns from and is safe for concurrent use; the zero value, and a nil
// *Hedger (which learns nothing), hedge after DefaultHedgeMax.
type Hedger struct {
	Factor float64       // times the recent p90; 0 or negative: Max only
	Max    time.Duration // the latest an attempt is hedged; 0 means DefaultHedgeMax

	mu     sync.Mutex
	d      [64]time.Duration
	n      int // recorded in all
	sorted [64]time.Duration
}

// NewHedger returns a Hedger hedging after factor times the recent p90 of
// attempts, at the latest after max.
func NewHedger(factor float64, max time.Duration) *Hedger {
	return &Hedger{Factor: factor, Max: max}
}

// MinHedgeDelay is the soonest a Hedger hedges: below it, a pause of the
// process (a collection, a busy machine) would look like a slow store.
const MinHedgeDelay = 50 * time.Millisecond

// DefaultHedgeMax is the latest a Hedger with a zero Max hedges.
const DefaultHedgeMax = time.Second

// minKnown is how many successful attempts a Hedger needs before it
// trusts their p90.
const minKnown = 16

// Record adds the duration of a successful attempt.
func (h *Hedger) Record(d time.Duration) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.d[h.n%len(h.d)] = d
	h.n++
	h.mu.Unlock()
}

// Delay is how long an attempt runs before the next one starts.
func (h *Hedger) Delay() time.Duration {
	if h == nil {
		return DefaultHedgeMax
	}
	limit := h.Max
	if limit <= 0 {
		limit = DefaultHedgeMax
	}
	if !(h.Factor > 0) {
		return limit
	}
	p90, ok := h.p90()
	if !ok {
		return limit
	}
	d := h.Factor * float64(p90) // clamped as a float: a huge factor must not overflow
	if d >= float64(limit) {
		return limit
	}
	return min(max(time.Duration(d), MinHedgeDelay), limit)
}

// hedgeCheck is how often an attempt started before the Hedger knew the
// store looks again at whether it is due for a hedge: a restore in a new
// process learns the store from its first reads, and the reads it started
// before that are hedged by what it learned, not after Max.
const hedgeCheck = MinHedgeDelay

// due reports whether an attempt started at began is due for a hedge now,
// and if not, how long to wait before asking again.
func (h *Hedger) due(began time.Time) (bool, time.Duration) {
	left := h.Delay() - time.Since(began)
	if left <= 0 {
		return true, 0
	}
	if h != nil && h.Factor > 0 && !h.known() {
		left = min(left, hedgeCheck)
	}
	return false, left
}

// known reports whether the Hedger has seen enough attempts to hedge by
// their p90.
func (h *Hedger) known() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n >= minKnown
}

// p90 returns the 90th percentile of the recorded durations, once at
// least minKnown are.
func (h *Hedger) p90() (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := min(h.n, len(h.d))
	if n < minKnown {
		return 0, false
	}
	s := h.sorted[:n]
	copy(s, h.d[:n])
	slices.Sort(s)
	return s[n*9/10], true
}

// PutHedged stores data under name like s.Put, but hedges against a slow
// store: when no attempt has finished after `after`, it starts another
// attempt of the same write in parallel, and again after each further
// `after` or failure, up to attempts in all. It is Hedger.Put with a
// fixed delay; an `after` of zero or less means DefaultHedgeMax.
func PutHedged(ctx context.Context, s Store, name string, data []byte, after time.Duration, attempts int) error {
	return (&Hedger{Max: after}).Put(ctx, s, name, data, attempts)
}

// Put stores data under name like s.Put, but hedges against a slow store:
// when no attempt has finished after h.Delay(), it starts another attempt
// of the same write in parallel, and again after each further delay or
// failure, up to attempts in all. The first attempt to succeed wins, the
// others are cancelled, and the winner's duration is recorded in h. Every
// attempt writes the same bytes under the same name, so it suits objects
// whose name fixes their content (a checkpoint's manifest, a
// materialized part). It returns the last attempt's error when all fail,
// or the context's error. It returns once every attempt it started has
// returned (the cancelled ones give up at once on a store that honours
// its context), so no write of data lands after it.
func (h *Hedger) Put(ctx context.Context, s Store, name string, data []byte, attempts int) error {
	_, err := hedged(ctx, h, attempts, "put", name, func(ctx context.Context, _ bool) (struct{}, error) {
		return struct{}{}, s.Put(ctx, name, data)
	}, neverFinal)
	return err
}

// PutIfAbsent creates the object name like c.PutIfAbsent, hedged like
// Put. An attempt that finds the object existing reads it back: if it
// holds exactly data, an earlier attempt of this call (hedged, or retried
// after a reply that was lost) created it and the call succeeds; anything
// else (another writer's bytes, or an object gone by the time it is read)
// is another writer's object and the call fails at once with an error
// matching ErrExists. So data must be unique to this writer (a
// manifest carries its writer's time), or two writers of the same bytes
// would both succeed.
func (h *Hedger) PutIfAbsent(ctx context.Context, s Store, name string, data []byte, attempts int) error {
	c, ok := s.(Creator)
	if !ok {
		return fmt.Errorf("blob: put %q if absent: %T: %w", name, s, ErrNoConditionalCreate)
	}
	_, err := hedged(ctx, h, attempts, "create", name, func(ctx context.Context, _ bool) (struct{}, error) {
		err := c.PutIfAbsent(ctx, name, data)
		if !errors.Is(err, ErrExists) {
			return struct{}{}, err
		}
		got, gerr := s.Get(ctx, name)
		switch {
		case errors.Is(gerr, ErrNotFound):
			// It existed and is gone: deleted by whoever owns it (a
			// newer claimant deletes older claims). Not this call's.
			return struct{}{}, &otherWriterError{err}
		case gerr != nil:
			// Unknown whose it is: another attempt reads again.
			return struct{}{}, fmt.Errorf("blob: %q exists; reading it back to compare failed: %w", name, gerr)
		case bytes.Equal(got, data):
			return struct{}{}, nil
		}
		return struct{}{}, &otherWriterError{err}
	}, func(err error) bool {
		var other *otherWriterError
		return errors.As(err, &other)
	})
	var other *otherWriterError
	if errors.As(err, &other) {
		return other.err
	}
	return err
}

// otherWriterError marks PutIfAbsent's attempt that found another
// writer's object: final, not worth another attempt.
type otherWriterError struct{ err error }

func (e *otherWriterError) Error() string { return e.err.Error() }
func (e *otherWriterError) Unwrap() error { return e.err }

// Delete removes the object name like s.Delete, hedged like Put: when no
// attempt has finished after h.Delay(), or all so far have failed, another
// starts in parallel, up to attempts in all. Deleting is idempotent, so
// the attempts cannot disagree; the first success wins.
func (h *Hedger) Delete(ctx context.Context, s Store, name string, attempts int) error {
	_, err := hedged(ctx, h, attempts, "delete", name, func(ctx context.Context, _ bool) (struct{}, error) {
		return struct{}{}, s.Delete(ctx, name)
	}, neverFinal)
	return err
}

// GetInto reads the object name like blob.GetInto, hedged: when no
// attempt has returned after h.Delay(), another read of the object starts
// in parallel, up to attempts in all, and one more starts at once when
// every attempt so far has failed. The first attempt to succeed wins, the
// others are cancelled, and the winner's duration is recorded in h. A
// missing or damaged object is an answer, not a slow store: its error is
// returned at once. The first attempt reads into *buf, the others into
// memory of their own, so the payload may alias *buf or not; GetInto
// returns once every attempt it started has returned, so *buf is free
// again.
func (h *Hedger) GetInto(ctx context.Context, s Store, name string, buf *[]byte, attempts int) ([]byte, error) {
	return hedged(ctx, h, attempts, "get", name, func(ctx context.Context, first bool) ([]byte, error) {
		if first {
			return GetInto(ctx, s, name, buf)
		}
		return s.Get(ctx, name)
	}, func(err error) bool {
		var corrupt *CorruptError
		return errors.Is(err, ErrNotFound) || errors.As(err, &corrupt)
	})
}

// List lists the names under prefix like s.List, hedged like Put: when no
// attempt has returned after h.Delay(), or every attempt so far has
// failed, another starts, up to attempts in all. Listing is idempotent;
// the first success wins.
func (h *Hedger) List(ctx context.Context, s Store, prefix string, attempts int) ([]string, error) {
	return hedged(ctx, h, attempts, "list", prefix, func(ctx context.Context, _ bool) ([]string, error) {
		return s.List(ctx, prefix)
	}, neverFinal)
}

// neverFinal is hedged's final for operations whose every error may pass
// on another attempt.
func neverFinal(error) bool { return false }

// hedged runs attempt, the first time with first set, and again in
// parallel whenever the newest attempt is due for a hedge (h) or every
// attempt so far has failed, up to attempts in all. The first success
// wins and its duration is recorded in h; an error final says is final
// is returned at once. It cancels the others and waits for every attempt
// it started before it returns.
func hedged[T any](ctx context.Context, h *Hedger, attempts int, op, name string,
	attempt func(ctx context.Context, first bool) (T, error), final func(error) bool) (T, error) {
	var zero T
	if attempts < 1 {
		attempts = 1
	}
	actx, cancel := context.WithCancel(ctx)
	type result struct {
		v    T
		err  error
		took time.Duration
	}
	results := make(chan result, attempts)
	launched, done := 0, 0
	var newest time.Time // when the newest attempt started
	launch := func() {
		newest = time.Now()
		first := launched == 0
		launched++
		go func() {
			began := time.Now()
			v, err := attempt(actx, first)
			results <- result{v, err, time.Since(began)}
		}()
	}
	defer func() {
		cancel()
		for ; done < launched; done++ {
			<-results
		}
	}()
	launch()
	_, wait := h.due(newest)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var errs []error
	for {
		select {
		case r := <-results:
			done++
			if r.err == nil {
				h.Record(r.took)
				return r.v, nil
			}
			if final(r.err) {
				return zero, r.err
			}
			errs = append(errs, r.err)
			if len(errs) == attempts {
				return zero, fmt.Errorf("blob: %s %q: %d attempts failed: %w", op, name, attempts, errors.Join(errs...))
			}
			if done == launched && launched < attempts && ctx.Err() == nil {
				launch()
			}
		case <-timer.C:
			if launched >= attempts {
				break
			}
			if now, wait := h.due(newest); !now {
				timer.Reset(wait)
				break
			}
			launch()
			_, wait := h.due(newest)
			timer.Reset(wait)
		case <-ctx.Done():
			return zero, fmt.Errorf("blob: %s %q: %w", op, name, ctx.Err())
		}
	}
}

// Sleep waits for d, or until ctx ends, then returning ctx's error: the
// pause between two attempts of a retry loop.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
