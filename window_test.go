package eddy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/file"
	"github.com/eddyflow/eddy/state/pebble"
)

// ev is a test event: a key, an event time in ms and a value.
type ev struct {
	Key string `json:"key" proto:"1"`
	TS  int64  `json:"ts" proto:"2"`
	V   int64  `json:"v" proto:"3"`
}

// sliceSource replays a fixed slice as one split. It answers Idle after
// every record, so the runtime emits a watermark after each one: the
// watermark a record sees is then exactly max(earlier timestamps) - delay.
type sliceSource struct{ evs []ev }

func (s sliceSource) Name() string { return "slice" }
func (s sliceSource) Splits() int  { return 1 }
func (s sliceSource) OpenSplit(_ context.Context, _ int, pos []byte) (eddy.SplitReader[ev], error) {
	r := &sliceReader{evs: s.evs}
	if len(pos) == 8 {
		for i := 0; i < 8; i++ {
			r.i |= int(pos[i]) << (8 * i)
		}
	}
	return r, nil
}

type sliceReader struct {
	evs  []ev
	i    int
	idle bool
}

func (r *sliceReader) Next(rec *ev) (eddy.ReadStatus, error) {
	if r.i >= len(r.evs) {
		return eddy.End, nil
	}
	if r.idle {
		r.idle = false
		return eddy.Idle, nil
	}
	*rec = r.evs[r.i]
	r.i++
	r.idle = true
	return eddy.Record, nil
}

func (r *sliceReader) Position() []byte {
	b := make([]byte, 8)
	for i := 0; i < 8; i++ {
		b[i] = byte(r.i >> (8 * i))
	}
	return b
}
func (r *sliceReader) Close() error { return nil }

// winOut is one window result.
type winOut struct {
	Key   string `json:"key" proto:"1"`
	Start int64  `json:"start" proto:"2"`
	End   int64  `json:"end" proto:"3"`
	Sum   int64  `json:"sum" proto:"4"`
	Count int64  `json:"count" proto:"5"`
}

type sumAcc struct {
	Sum   int64 `proto:"1"`
	Count int64 `proto:"2"`
}

// outOfOrder makes n events over keys with timestamps mostly increasing,
// jittered by up to 3 s, and every 97th one 40 s late.
func outOfOrder(seed uint64, n int) []ev {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]ev, n)
	for i := range out {
		ts := int64(1_800_000_000_000) + int64(i)*50 + r.Int64N(3000) - 1500
		if i%97 == 0 {
			ts -= 40_000
		}
		out[i] = ev{Key: fmt.Sprintf("k%d", r.IntN(5)), TS: ts, V: int64(r.IntN(100))}
	}
	return out
}

// model is the brute-force window operator: the same semantics, written
// plainly over the ordered input and the watermark each record sees.
type model struct {
	kind          string
	size, slide   int64 // ms
	lateness      int64 // ms
	delay         int64 // ms
	wins          map[string][]*mwin
	results, late []string
	wm            int64 // ms; event time e is "passed" when e <= wm
}

type mwin struct {
	start, end int64
	sum, count int64
	fired      bool
}

func (m *model) emit(k string, w *mwin) {
	b, _ := json.Marshal(winOut{Key: k, Start: w.start * 1e6, End: w.end * 1e6, Sum: w.sum, Count: w.count})
	m.results = append(m.results, string(b))
}

// advance moves the watermark: windows whose last instant passed fire once;
// windows past their lateness go away.
func (m *model) advance(wm int64) {
	if wm <= m.wm {
		return
	}
	m.wm = wm
	for k, ws := range m.wins {
		var keep []*mwin
		for _, w := range ws {
			if !w.fired && lastNs(w.end) <= nsOf(wm) {
				m.emit(k, w)
				w.fired = true
			}
			if lastNs(w.end)+m.lateness*1e6 > nsOf(wm) {
				keep = append(keep, w)
			}
		}
		m.wins[k] = keep
	}
}

func nsOf(ms int64) int64 {
	if ms == math.MaxInt64 || ms == math.MinInt64 {
		return ms
	}
	return ms * 1e6
}
func lastNs(endMs int64) int64 { return endMs*1e6 - 1 }

func (m *model) gone(end int64) bool {
	return m.wm != math.MinInt64 && lastNs(end)+m.lateness*1e6 <= nsOf(m.wm)
}

func (m *model) add(e ev) {
	assigned := false
	touch := func(w *mwin) {
		w.sum += e.V
		w.count++
		if lastNs(w.end) <= nsOf(m.wm) {
			m.emit(e.Key, w) // late within lateness: fire again
			w.fired = true
		}
	}
	switch m.kind {
	case "session":
		start, end := e.TS, e.TS+m.size
		if m.gone(end) {
			break
		}
		assigned = true
		merged := &mwin{start: start, end: end, sum: 0, count: 0}
		var keep []*mwin
		for changed := true; changed; {
			changed = false
			keep = keep[:0]
			for _, w := range m.wins[e.Key] {
				if w.start <= merged.end && merged.start <= w.end { // touching sessions merge, as in Flink
					merged.start, merged.end = min(merged.start, w.start), max(merged.end, w.end)
					merged.sum += w.sum
					merged.count += w.count
					changed = true
				} else {
					keep = append(keep, w)
				}
			}
			m.wins[e.Key] = append([]*mwin(nil), keep...)
		}
		m.wins[e.Key] = append(m.wins[e.Key], merged)
		touch(merged)
	default:
		last := e.TS - ((e.TS%m.slide)+m.slide)%m.slide
		for start := last; start > e.TS-m.size; start -= m.slide {
			end := start + m.size
			if m.gone(end) {
				continue
			}
			assigned = true
			var w *mwin
			for _, x := range m.wins[e.Key] {
				if x.start == start {
					w = x
				}
			}
			if w == nil {
				w = &mwin{start: start, end: end}
				m.wins[e.Key] = append(m.wins[e.Key], w)
			}
			touch(w)
		}
	}
	if !assigned {
		b, _ := json.Marshal(e)
		m.late = append(m.late, string(b))
	}
}

func (m *model) run(evs []ev) {
	m.wins = map[string][]*mwin{}
	m.wm = math.MinInt64
	maxTS := int64(math.MinInt64)
	for i, e := range evs {
		if i > 0 {
			m.advanceNs(maxTS*1e6 - m.delay*1e6)
		}
		m.add(e)
		maxTS = max(maxTS, e.TS)
	}
	m.advanceNs(math.MaxInt64)
	sort.Strings(m.results)
	sort.Strings(m.late)
}

// advanceNs is advance for a watermark in ns (the runtime's unit); the model
// keeps ms but compares in ns.
func (m *model) advanceNs(wmNs int64) {
	if wmNs == math.MaxInt64 {
		m.advance(math.MaxInt64)
		return
	}
	// Window ends are whole ms, so a watermark in ns passes the same
	// windows as its floor in ms... except at the boundary: keep ns exact
	// by comparing through nsOf on a ms value only when divisible.
	m.advance(floorDiv(wmNs, 1e6))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}

// sumWindows is the tests' window operator over src: the sum and count of
// each key's windows, keyed by the string key, or by its number as an int64
// (an integer key, which the runtime handles apart) if intKey.
func sumWindows(src *eddy.Stream[ev], w eddy.Windows, intKey bool, opts ...eddy.WindowOption) eddy.Windowed[ev, winOut] {
	add := func(a sumAcc, e *ev) sumAcc { return sumAcc{a.Sum + e.V, a.Count + 1} }
	merge := func(a, b sumAcc) sumAcc { return sumAcc{a.Sum + b.Sum, a.Count + b.Count} }
	if intKey {
		keyed := eddy.KeyBy(src, func(e *ev) int64 {
			var n int64
			fmt.Sscanf(e.Key, "k%d", &n)
			return n
		})
		return eddy.AggregateWindows(keyed, w, eddy.Aggregator[int64, ev, sumAcc, winOut]{Add: add, Merge: merge,
			Result: func(k int64, w eddy.Window, a sumAcc) winOut {
				return winOut{Key: fmt.Sprintf("k%d", k), Start: w.Start.UnixNano(), End: w.End.UnixNano(), Sum: a.Sum, Count: a.Count}
			},
		}, opts...)
	}
	keyed := eddy.KeyBy(src, func(e *ev) string { return e.Key })
	return eddy.AggregateWindows(keyed, w, eddy.Aggregator[string, ev, sumAcc, winOut]{Add: add, Merge: merge,
		Result: func(k string, w eddy.Window, a sumAcc) winOut {
			return winOut{Key: k, Start: w.Start.UnixNano(), End: w.End.UnixNano(), Sum: a.Sum, Count: a.Count}
		},
	}, opts...)
}

func TestWindowsMatchBruteForce(t *testing.T) {
	evs := outOfOrder(11, 3000)
	cases := []struct {
		name            string
		w               eddy.Windows
		kind            string
		size, slide     int64
		lateness, delay time.Duration
		intKey          bool
	}{
		{"tumbling", eddy.Tumbling(10 * time.Second), "tumbling", 10_000, 10_000, 0, time.Second, false},
		{"tumbling-lateness", eddy.Tumbling(10 * time.Second), "tumbling", 10_000, 10_000, 5 * time.Second, time.Second, false},
		{"sliding", eddy.Sliding(10*time.Second, 3*time.Second), "sliding", 10_000, 3_000, 0, 2 * time.Second, false},
		{"sliding-int-key", eddy.Sliding(10*time.Second, 3*time.Second), "sliding", 10_000, 3_000, 0, 2 * time.Second, true},
		// A size that is a multiple of the slide: the window keeps panes.
		{"sliding-panes", eddy.Sliding(9*time.Second, 3*time.Second), "sliding", 9_000, 3_000, 0, 2 * time.Second, false},
		{"sliding-panes-int-key", eddy.Sliding(9*time.Second, 3*time.Second), "sliding", 9_000, 3_000, 0, 2 * time.Second, true},
		{"tumbling-int-key", eddy.Tumbling(10 * time.Second), "tumbling", 10_000, 10_000, 0, time.Second, true},
		{"sliding-lateness", eddy.Sliding(10*time.Second, 3*time.Second), "sliding", 10_000, 3_000, 4 * time.Second, 2 * time.Second, false},
		{"session", eddy.Session(400 * time.Millisecond), "session", 400, 0, 0, time.Second, false},
		{"session-lateness", eddy.Session(400 * time.Millisecond), "session", 400, 0, 3 * time.Second, time.Second, false},
		// A lateness shorter than the gap: an extended session's firing
		// timer can be the one it absorbed's cleanup timer.
		{"session-short-lateness", eddy.Session(400 * time.Millisecond), "session", 400, 0, 100 * time.Millisecond, time.Second, false},
		{"session-lateness-gap", eddy.Session(400 * time.Millisecond), "session", 400, 0, 400 * time.Millisecond, time.Second, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &model{kind: c.kind, size: c.size, slide: c.slide, lateness: c.lateness.Milliseconds(), delay: c.delay.Milliseconds()}
			m.run(evs)
			dir := t.TempDir()
			env := eddy.New(eddy.Parallelism(2), eddy.LogOutput(&logBuf{}))
			src := eddy.FromSource[ev](env, sliceSource{evs},
				eddy.Watermarks(func(e *ev) time.Time { return time.UnixMilli(e.TS) }, c.delay))
			out := sumWindows(src, c.w, c.intKey, eddy.AllowedLateness(c.lateness))
			eddy.ToSink(out.Results, file.JSONLines[winOut](filepath.Join(dir, "results")))
			eddy.ToSink(out.Late, file.JSONLines[ev](filepath.Join(dir, "late")))
			if err := env.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			got, late := readLines(t, filepath.Join(dir, "results")), readLines(t, filepath.Join(dir, "late"))
			if len(m.results) == 0 || len(m.late) == 0 && c.lateness == 0 {
				t.Fatalf("the case does not exercise windows and lateness: %d results, %d late", len(m.results), len(m.late))
			}
			compareLines(t, "results", got, m.results)
			compareLines(t, "late", late, m.late)
			if st := env.Stats(); st.LateRecords != int64(len(m.late)) {
				t.Fatalf("Stats.LateRecords = %d, want %d", st.LateRecords, len(m.late))
			}
		})
	}
}

func compareLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d lines, want %d\nfirst got:  %v\nfirst want: %v", what, len(got), len(want), head(got), head(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: line %d\n got %s\nwant %s", what, i, got[i], want[i])
		}
	}
}

func head(xs []string) []string {
	if len(xs) > 3 {
		return xs[:3]
	}
	return xs
}

// TestWindowsAcrossRestore stops a window job after a few checkpoints and
// resumes it, several times, with another parallelism each time: the
// committed output equals the brute-force model's. Sessions merge across
// the restores; tumbling and sliding windows without lateness, which
// register no timers, find their open windows again from the restored
// state.
func TestWindowsAcrossRestore(t *testing.T) {
	for _, c := range []struct {
		name     string
		w        eddy.Windows
		m        model
		lateness time.Duration
		intKey   bool
		pebble   bool // state in Pebble
		// The first run keeps a timer per window, as binaries before
		// the index of open windows did; the runs after restore its
		// checkpoints into operators that fire from the index.
		timersFirst bool
	}{
		{"session", eddy.Session(400 * time.Millisecond), model{kind: "session", size: 400, lateness: 2000, delay: 1000}, 2 * time.Second, false, false, false},
		{"sliding", eddy.Sliding(2*time.Second, 500*time.Millisecond), model{kind: "sliding", size: 2000, slide: 500, delay: 1000}, 0, false, false, false},
		{"sliding-int-key", eddy.Sliding(2*time.Second, 500*time.Millisecond), model{kind: "sliding", size: 2000, slide: 500, delay: 1000}, 0, true, false, false},
		{"sliding-pebble", eddy.Sliding(2*time.Second, 500*time.Millisecond), model{kind: "sliding", size: 2000, slide: 500, delay: 1000}, 0, true, true, false},
		{"sliding-from-timer-checkpoints", eddy.Sliding(2*time.Second, 500*time.Millisecond), model{kind: "sliding", size: 2000, slide: 500, delay: 1000}, 0, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := outOfOrder(5, 6000)
			m := c.m
			m.run(evs)
			var opts []eddy.Option
			stopAfter := int64(3)
			if c.pebble {
				opts = append(opts, eddy.StateBackend(eddy.Pebble(filepath.Join(t.TempDir(), "pebble"), pebble.Memory(64<<20))))
				stopAfter = 1 // its checkpoints take longer
			}
			windowsAcrossRestore(t, evs, &m, stopAfter, c.timersFirst, func(src *eddy.Stream[ev]) eddy.Windowed[ev, winOut] {
				return sumWindows(src, c.w, c.intKey, eddy.AllowedLateness(c.lateness), eddy.WindowOp(eddy.Named("windows")))
			}, opts...)
		})
	}
}

// windowsAcrossRestore runs the window job windows builds over evs until
// stopAfter checkpoints, then again from the last, with parallelism 2, 1,
// 3 and 2 in turn until a run finishes, and compares the committed output
// with m's. With timersFirst the first run keeps a timer per window
// (eddy.WindowIndexOff), and must stop at a checkpoint.
func windowsAcrossRestore(t *testing.T, evs []ev, m *model, stopAfter int64, timersFirst bool, windows func(*eddy.Stream[ev]) eddy.Windowed[ev, winOut], opts ...eddy.Option) {
	dir := t.TempDir()
	data, results, late := filepath.Join(dir, "data"), filepath.Join(dir, "results"), filepath.Join(dir, "late")
	build := func(par int, stopAfter int64) (*eddy.Env, context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		var seen int64
		env := eddy.New(append([]eddy.Option{eddy.Parallelism(par), eddy.Checkpoints(data, 10*time.Millisecond), eddy.LogOutput(&logBuf{}),
			eddy.OnCheckpoint(func(eddy.CheckpointStats) {
				seen++
				if stopAfter > 0 && seen >= stopAfter {
					cancel()
				}
			})}, opts...)...)
		src := eddy.FromSource[ev](env, slowSlice{sliceSource{evs}},
			eddy.Watermarks(func(e *ev) time.Time { return time.UnixMilli(e.TS) }, time.Second))
		out := windows(src)
		eddy.ToSink(out.Results, file.JSONLines[winOut](results))
		eddy.ToSink(out.Late, file.JSONLines[ev](late))
		return env, ctx, cancel
	}
	restores := 0
	for i, par := range []int{2, 1, 3, 2} {
		on := func() {}
		if timersFirst && i == 0 {
			on = eddy.WindowIndexOff()
		}
		env, ctx, cancel := build(par, stopAfter)
		on()
		err := env.Run(ctx)
		cancel()
		if env.Stats().RestoredFrom != 0 {
			restores++
		}
		if err == nil {
			if timersFirst && i == 0 {
				t.Fatal("the run keeping a timer per window finished before its checkpoints: nothing to restore")
			}
			break // finished before the third checkpoint
		}
	}
	env, ctx, cancel := build(2, 0)
	if err := env.Run(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if restores == 0 && env.Stats().RestoredFrom == 0 {
		t.Fatal("no run restored from a checkpoint; the test did not exercise restore")
	}
	compareLines(t, "results", readLines(t, results), m.results)
	compareLines(t, "late", readLines(t, late), m.late)
}

// slowSlice slows the slice source so that checkpoints happen mid-input.
type slowSlice struct{ sliceSource }

func (s slowSlice) OpenSplit(ctx context.Context, split int, pos []byte) (eddy.SplitReader[ev], error) {
	r, err := s.sliceSource.OpenSplit(ctx, split, pos)
	return slowReader{r.(*sliceReader)}, err
}

type slowReader struct{ *sliceReader }

func (r slowReader) Next(rec *ev) (eddy.ReadStatus, error) {
	st, err := r.sliceReader.Next(rec)
	if st == eddy.Record && r.i%50 == 0 {
		time.Sleep(time.Millisecond)
	}
	return st, err
}

// TestSessionWindowsMergeWhenTouching: records exactly one gap apart are
// one session, as in Flink (windows that touch intersect).
func TestSessionWindowsMergeWhenTouching(t *testing.T) {
	evs := []ev{{Key: "k", TS: 0, V: 1}, {Key: "k", TS: 400, V: 2}, {Key: "k", TS: 801, V: 4}}
	sessionsAre(t, evs, 0, 0, []string{
		`{"key":"k","start":0,"end":800,"sum":3,"count":2}`,
		`{"key":"k","start":801,"end":1201,"sum":4,"count":1}`,
	})
}

// TestSessionMergeKeepsSharedTimers merges sessions whose timers coincide:
// a record 100 ms after the first extends the session [0, 400) to
// [0, 500), and with 100 ms lateness the absorbed session's cleanup timer
// (399+100) is the merged session's firing timer. Deleting the absorbed
// session's timers must not delete that one, or the session is dropped at
// its cleanup without ever firing.
func TestSessionMergeKeepsSharedTimers(t *testing.T) {
	evs := []ev{{Key: "k", TS: 0, V: 1}, {Key: "k", TS: 100, V: 2}, {Key: "j", TS: 0, V: 1}, {Key: "j", TS: 500, V: 2}, {Key: "j", TS: 50, V: 4}}
	sessionsAre(t, evs, time.Second, 100*time.Millisecond, []string{
		`{"key":"j","start":0,"end":450,"sum":5,"count":2}`,
		`{"key":"j","start":500,"end":900,"sum":2,"count":1}`,
		`{"key":"k","start":0,"end":500,"sum":3,"count":2}`,
	})
}

// sessionsAre runs evs through 400 ms session windows at parallelism 1,
// with watermarks delay behind the records and the allowed lateness, and
// checks the sorted results.
func sessionsAre(t *testing.T, evs []ev, delay, lateness time.Duration, want []string) {
	t.Helper()
	dir := t.TempDir()
	env := eddy.New(eddy.Parallelism(1), eddy.LogOutput(&logBuf{}))
	src := eddy.FromSource[ev](env, sliceSource{evs}, eddy.Watermarks(func(e *ev) time.Time { return time.UnixMilli(e.TS) }, delay))
	out := eddy.AggregateWindows(eddy.KeyBy(src, func(e *ev) string { return e.Key }), eddy.Session(400*time.Millisecond), eddy.Aggregator[string, ev, sumAcc, winOut]{
		Add:   func(a sumAcc, e *ev) sumAcc { return sumAcc{a.Sum + e.V, a.Count + 1} },
		Merge: func(a, b sumAcc) sumAcc { return sumAcc{a.Sum + b.Sum, a.Count + b.Count} },
		Result: func(k string, w eddy.Window, a sumAcc) winOut {
			return winOut{Key: k, Start: w.Start.UnixMilli(), End: w.End.UnixMilli(), Sum: a.Sum, Count: a.Count}
		},
	}, eddy.AllowedLateness(lateness))
	eddy.ToSink(out.Results, file.JSONLines[winOut](dir))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, dir)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("sessions %v, want %v", got, want)
	}
}

// TestPanesNotRestoredIntoWholeWindows: a checkpoint of sliding windows
// kept as panes does not restore into the same operator built to keep
// whole windows (here with an allowed lateness): the run fails naming the
// panes, and nothing of the panes is silently dropped.
func TestPanesNotRestoredIntoWholeWindows(t *testing.T) {
	evs := outOfOrder(5, 6000)
	dir := t.TempDir()
	data, results := filepath.Join(dir, "data"), filepath.Join(dir, "results")
	run := func(lateness time.Duration, stopAfter int64) (*eddy.Env, error) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var seen int64
		env := eddy.New(eddy.Parallelism(2), eddy.Checkpoints(data, 10*time.Millisecond), eddy.LogOutput(&logBuf{}),
			eddy.OnCheckpoint(func(eddy.CheckpointStats) {
				if seen++; stopAfter > 0 && seen >= stopAfter {
					cancel()
				}
			}))
		src := eddy.FromSource[ev](env, slowSlice{sliceSource{evs}},
			eddy.Watermarks(func(e *ev) time.Time { return time.UnixMilli(e.TS) }, time.Second))
		out := sumWindows(src, eddy.Sliding(2*time.Second, 500*time.Millisecond), false,
			eddy.AllowedLateness(lateness), eddy.WindowOp(eddy.Named("windows")))
		eddy.ToSink(out.Results, file.JSONLines[winOut](results))
		return env, env.Run(ctx)
	}
	if _, err := run(0, 3); err == nil {
		t.Fatal("the first run finished before its third checkpoint: nothing to restore")
	}
	env, err := run(time.Second, 0)
	if err == nil || !strings.Contains(err.Error(), "panes") {
		t.Fatalf("restoring panes into whole windows: %v, want an error about the panes", err)
	}
	if env.Stats().RestoredFrom == 0 {
		t.Fatal("the second run did not restore the checkpoint")
	}
}
