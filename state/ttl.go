package state

import (
	"fmt"
	"math"
	"time"
)

// Option is an option of a state declaration (NewValue, NewReducing,
// NewList, NewMap).
type Option interface{ applyState(*stateOptions) }

type stateOptions struct {
	ttl *TTLConfig
}

// TTLConfig says when a key's state expires.
type TTLConfig struct {
	// TTL is how long a key's state lives after its last write (or read,
	// with RefreshOnRead).
	TTL time.Duration
	// EventTime measures TTL in event time instead of the wall clock:
	// state written by a record at event time t expires once the
	// operator's watermark passes t+TTL (before the first watermark
	// nothing does).
	EventTime bool
	// RefreshOnRead restarts the TTL on reads as well as writes.
	RefreshOnRead bool
}

func (c TTLConfig) applyState(o *stateOptions) { o.ttl = &c }

// TTL makes a state expire per key: once TTL has passed since the key's
// last write (RefreshOnRead: or read), its value reads as absent and is
// removed. Expiry is enforced on every read, expired keys are removed a
// few at a time as records are processed (CleanupExpired) and are left out
// of whole snapshots; the time of each key's last write is itself state
// (named "<name>/ttl"), so a restored job expires it on the same schedule.
// A List or Map expires as a whole per key, not per element.
func TTL(c TTLConfig) Option { return c }

// ttl is the expiry of one state: its configuration and the hidden state
// holding each key's last access.
type ttl struct {
	cfg    TTLConfig
	stamps *Value[int64] // nil for the stamps table itself
	next   int           // the key group the next cleanup scans
}

// cleaner is what CleanupExpired does per state.
type cleaner interface {
	cleanup(budget int) int
}

// SetEventTime sets the operator's event time for event-time TTL (the
// runtime calls it as the watermark advances).
func (b *Backend) SetEventTime(wm int64) { b.eventTime = wm }

// SetRecordTime sets the event time of the record (or timer) being
// processed, math.MinInt64 for none: event-time TTL stamps a write with
// it, so a key's state lives TTL past its last record's time however far
// the watermark lags.
func (b *Backend) SetRecordTime(ts int64) { b.recordTime = ts }

// stampTime is when an access at this point happens for c's clock.
func (b *Backend) stampTime(c *TTLConfig) int64 {
	if c.EventTime && b.recordTime != math.MinInt64 {
		return max(b.recordTime, b.eventTime)
	}
	return b.now(c)
}

// now is the TTL clock of c.
func (b *Backend) now(c *TTLConfig) int64 {
	if c.EventTime {
		return b.eventTime
	}
	if b.clock != nil {
		return b.clock()
	}
	return time.Now().UnixNano()
}

// SetClock replaces the wall clock of processing-time TTL (for tests).
func (b *Backend) SetClock(now func() int64) { b.clock = now }

// expired reports whether a key last accessed at stamp has expired. A key
// written before the first watermark (stamp math.MinInt64) has not: its
// TTL starts at the first read after one (ttlGet).
func (b *Backend) expired(c *TTLConfig, stamp int64) bool {
	now := b.now(c)
	if stamp == math.MinInt64 || (c.EventTime && now == math.MinInt64) {
		return false
	}
	return stamp <= now-int64(c.TTL)
}

// withTTL sets up expiry of state t (whose owner is self) as declared by
// opts; it declares the stamps state.
func withTTL[E any](t *table[E], self cleaner, opts []Option) error {
	var o stateOptions
	for _, op := range opts {
		op.applyState(&o)
	}
	if o.ttl == nil {
		return nil
	}
	if o.ttl.TTL <= 0 {
		return &DeclareError{State: t.name, Err: fmt.Errorf("TTL %v must be positive", o.ttl.TTL)}
	}
	codec, schema, err := codecAndSchema[int64](t.name + "/ttl")
	if err != nil {
		return err
	}
	stamps := &Value[int64]{table: newTable(t.b, t.name+"/ttl", codec), schema: schema}
	stamps.self = stamps
	stamps.ttl = &ttl{cfg: *o.ttl}
	if err := t.b.register(stamps); err != nil {
		return err
	}
	t.ttl = &ttl{cfg: *o.ttl, stamps: stamps}
	t.b.ttlStates = append(t.b.ttlStates, self)
	return nil
}

// ttlGet is get of a state with a TTL: an expired entry is removed and
// reads as absent; a live one is refreshed if so configured.
func (t *table[E]) ttlGet() *E {
	t.cgen = 0 // bypass the cache: expiry depends on the clock
	p := t.rawGet()
	if p == nil {
		return nil
	}
	st := t.ttl.stamps
	stamp, ok := st.Get()
	switch {
	case !ok || stamp == math.MinInt64:
		// Written before the state had a TTL (restored from a checkpoint
		// of a job without it), or before the first watermark: its TTL
		// starts now.
		t.stamp()
	case t.b.expired(&t.ttl.cfg, stamp):
		t.clearRaw()
		st.clear()
		return nil
	case t.ttl.cfg.RefreshOnRead:
		t.stamp()
	}
	return p
}

// stamp records an access of the current key: at the record's event time
// or the TTL clock's now (math.MinInt64 before the first watermark and
// without a record time, for event time).
func (t *table[E]) stamp() {
	t.ttl.stamps.Update(t.b.stampTime(&t.ttl.cfg))
}

// cleanup removes up to budget expired keys of one key group (the next
// in turn) and returns how many it looked at. Go's map iteration starts at
// a random place, so repeated small scans reach every key over time.
func (t *table[E]) cleanup(budget int) int {
	if t.ttl == nil || t.ttl.stamps == nil || t.b.store != nil {
		return 0
	}
	n := len(t.groups)
	if n == 0 {
		return 0
	}
	g := t.ttl.next % n
	scan := t.groups[g].all
	if (t.ttl.next/n)%2 == 1 {
		scan = t.groups[g].allLongFirst // every other pass over the groups
	}
	t.ttl.next++
	var expired []string
	seen := 0
	st := t.ttl.stamps
	for k := range scan {
		if seen >= budget {
			break
		}
		seen++
		if p := st.groups[g].get(k); p != nil && t.b.expired(&t.ttl.cfg, *p) {
			expired = append(expired, string(k))
		}
	}
	if len(expired) == 0 {
		return seen
	}
	saveKey, saveKG := t.b.key, t.b.kg
	for _, k := range expired {
		t.b.SetCurrentKey([]byte(k), t.b.kgStart+g)
		t.clearRaw()
		st.clear()
	}
	t.b.SetCurrentKey(saveKey, saveKG)
	return seen
}

// liveInSnapshot reports whether key k of key group index g goes into a
// whole snapshot: not if its TTL has expired.
func (t *table[E]) liveInSnapshot(g int, k []byte, e *E) bool {
	switch {
	case t.ttl == nil:
		return true
	case t.ttl.stamps != nil:
		p := t.ttl.stamps.groups[g].get(k)
		return p == nil || !t.b.expired(&t.ttl.cfg, *p)
	default: // the stamps table: its own value is the stamp
		return !t.b.expired(&t.ttl.cfg, any(*e).(int64))
	}
}

// CleanupExpired removes expired keys of the states with a TTL, looking at
// about budget keys per state. The runtime calls it between records; it
// moves the current key.
func (b *Backend) CleanupExpired(budget int) {
	for _, s := range b.ttlStates {
		s.cleanup(budget)
	}
}
