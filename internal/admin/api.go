package admin

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/eddyflow/eddy/internal/runtime"
)

// Job is the answer of GET /api/job: the graph, per stage and subtask
// rates over the last sample interval, readiness and restore progress.
type Job struct {
	Job         string        `json:"job"`
	Ready       bool          `json:"ready"`
	Restore     Restore       `json:"restore"`
	Stats       runtime.Stats `json:"stats"`
	Stages      []Stage       `json:"stages"`
	Edges       []Edge        `json:"edges"`
	Completed   int64         `json:"checkpointsCompleted"`
	Failed      int64         `json:"checkpointsFailed"`
	SampledAtMs int64         `json:"sampledAtMs"`
}

// Restore is the progress of the current attempt's restore.
type Restore struct {
	Attempt    int64   `json:"attempt"`
	Running    bool    `json:"running"`
	From       uint64  `json:"fromCheckpoint"` // 0: started empty
	Started    int     `json:"subtasksRunning"`
	Total      int     `json:"subtasks"`
	DurationMs float64 `json:"durationMs"`
}

// Edge is a shuffle from one stage to another.
type Edge struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// Stage is a stage of the graph with its subtasks' rates summed (records)
// or averaged (time fractions).
type Stage struct {
	runtime.StageInfo
	Rates
	Subtasks []Subtask `json:"subtasks"`
}

// Subtask is one subtask's counters and rates.
type Subtask struct {
	Subtask int `json:"subtask"`
	Rates
	StateEntries int64 `json:"stateEntries"`
	StateBytes   int64 `json:"stateBytes"`
}

// Rates are cumulative counts and their rates over the last sample
// interval; Busy, BackPressured and Idle are fractions of that interval.
// Watermark is event time in Unix milliseconds (nil: none yet).
type Rates struct {
	RecordsIn      int64   `json:"recordsIn"`
	RecordsOut     int64   `json:"recordsOut"`
	InPerSec       float64 `json:"inPerSec"`
	OutPerSec      float64 `json:"outPerSec"`
	Busy           float64 `json:"busy"`
	BackPressured  float64 `json:"backPressured"`
	Idle           float64 `json:"idle"`
	LateRecords    int64   `json:"lateRecords"`
	DroppedRecords int64   `json:"droppedRecords"`
	Watermark      *int64  `json:"watermarkMs"`
	WatermarkLagMs *int64  `json:"watermarkLagMs"`
}

// Checkpoint is one entry of GET /api/checkpoints.
type Checkpoint struct {
	ID           uint64  `json:"id"`
	CompletedMs  int64   `json:"completedMs"`
	DurationMs   float64 `json:"durationMs"`
	BarrierMs    float64 `json:"barrierMs"`
	SyncMs       float64 `json:"syncMs"`
	AsyncMs      float64 `json:"asyncMs"`
	ManifestMs   float64 `json:"manifestMs"`
	Bytes        int64   `json:"bytes"`    // uploaded for it (incremental)
	FullSize     int64   `json:"fullSize"` // everything it refers to
	StateEntries int64   `json:"stateEntries"`
	Final        bool    `json:"final"`
}

// Checkpoints is the answer of GET /api/checkpoints[?limit=N].
type Checkpoints struct {
	Completed int64        `json:"completed"`
	Failed    int64        `json:"failed"`
	History   []Checkpoint `json:"history"` // oldest first
}

// sample is the subtasks' counters at one time.
type sample struct {
	at   time.Time
	subs [][]counts
}

type counts struct{ in, out, busy, pressed, idle int64 }

// sampler keeps the last two samples of every subtask's counters.
type sampler struct {
	m          *runtime.Metrics
	mu         sync.Mutex
	prev, last sample
}

func newSampler(m *runtime.Metrics) *sampler { return &sampler{m: m} }

func (s *sampler) sample(now time.Time) {
	cur := sample{at: now}
	for _, st := range s.m.Stages() {
		row := make([]counts, st.Parallelism)
		for i := range row {
			m := s.m.Subtask(st.ID, i)
			row[i] = counts{in: m.RecordsIn.Load(), out: m.RecordsOut.Load(), busy: m.BusyNs.Load(), pressed: m.BackPressuredNs.Load(), idle: m.IdleNs.Load()}
		}
		cur.subs = append(cur.subs, row)
	}
	s.mu.Lock()
	s.prev, s.last = s.last, cur
	s.mu.Unlock()
}

// rates returns subtask i of stage st's rates between the last two samples.
func (s *sampler) rates(st, i int) (r Rates, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last.subs == nil {
		return r, at
	}
	last := s.last.subs[st][i]
	r.RecordsIn, r.RecordsOut = last.in, last.out
	if s.prev.subs == nil {
		return r, s.last.at
	}
	prev := s.prev.subs[st][i]
	dt := s.last.at.Sub(s.prev.at)
	if dt <= 0 {
		return r, s.last.at
	}
	sec, ns := dt.Seconds(), float64(dt.Nanoseconds())
	r.InPerSec = float64(last.in-prev.in) / sec
	r.OutPerSec = float64(last.out-prev.out) / sec
	// Counters are flushed in lumps, so a fraction may overshoot a little.
	r.Busy = clamp01(float64(last.busy-prev.busy) / ns)
	r.BackPressured = clamp01(float64(last.pressed-prev.pressed) / ns)
	r.Idle = clamp01(float64(last.idle-prev.idle) / ns)
	return r, s.last.at
}

func clamp01(f float64) float64 { return max(0, min(1, f)) }

func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	m := s.cfg.Metrics
	rd := m.Readiness()
	stats := m.Stats()
	out := Job{Job: s.cfg.Job, Ready: rd.Ready(), Stats: stats, Edges: []Edge{},
		Restore: Restore{Attempt: rd.Attempt, Running: rd.Running, From: stats.RestoredFrom, Started: rd.Started, Total: rd.Total,
			DurationMs: ms(stats.Recovery)}}
	out.Completed, out.Failed = m.Checkpoints()
	now := time.Now()
	for _, info := range m.Stages() {
		st := Stage{StageInfo: info}
		for _, in := range info.Inputs {
			out.Edges = append(out.Edges, Edge{From: in, To: info.ID})
		}
		minWM := int64(math.MaxInt64)
		for i := range info.Parallelism {
			c := m.Subtask(info.ID, i)
			rt, at := s.sampler.rates(info.ID, i)
			if !at.IsZero() {
				out.SampledAtMs = at.UnixMilli()
			}
			rt.LateRecords, rt.DroppedRecords = c.LateRecords.Load(), c.DroppedRecords.Load()
			wm := c.Watermark.Load()
			if wm != math.MinInt64 && wm != math.MaxInt64 {
				rt.Watermark, rt.WatermarkLagMs = watermark(wm, now)
			}
			minWM = min(minWM, wm)
			sub := Subtask{Subtask: i, Rates: rt, StateEntries: c.StateEntries.Load(), StateBytes: c.StateSizeBytes.Load()}
			st.Subtasks = append(st.Subtasks, sub)
			st.RecordsIn += rt.RecordsIn
			st.RecordsOut += rt.RecordsOut
			st.InPerSec += rt.InPerSec
			st.OutPerSec += rt.OutPerSec
			st.Busy += rt.Busy / float64(info.Parallelism)
			st.BackPressured += rt.BackPressured / float64(info.Parallelism)
			st.Idle += rt.Idle / float64(info.Parallelism)
			st.LateRecords += rt.LateRecords
			st.DroppedRecords += rt.DroppedRecords
		}
		// A stage's watermark is its slowest subtask's.
		if minWM != math.MinInt64 && minWM != math.MaxInt64 {
			st.Watermark, st.WatermarkLagMs = watermark(minWM, now)
		}
		out.Stages = append(out.Stages, st)
	}
	writeJSON(w, http.StatusOK, out)
}

func watermark(ns int64, now time.Time) (*int64, *int64) {
	wm := ns / 1e6
	lag := now.UnixMilli() - wm
	return &wm, &lag
}

func (s *Server) checkpoints(w http.ResponseWriter, r *http.Request) {
	m := s.cfg.Metrics
	h := m.History()
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "limit must be a non-negative integer, got " + strconv.Quote(l)})
			return
		}
		if n < len(h) {
			h = h[len(h)-n:]
		}
	}
	out := Checkpoints{History: make([]Checkpoint, 0, len(h))}
	out.Completed, out.Failed = m.Checkpoints()
	for _, c := range h {
		out.History = append(out.History, Checkpoint{ID: c.ID, CompletedMs: c.Completed.UnixMilli(), DurationMs: ms(c.Duration),
			BarrierMs: ms(c.Last.Barrier), SyncMs: ms(c.Last.Sync), AsyncMs: ms(c.Last.Async), ManifestMs: ms(c.ManifestWrite),
			Bytes: c.Bytes, FullSize: c.FullSize, StateEntries: c.StateEntries, Final: c.Final})
	}
	writeJSON(w, http.StatusOK, out)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
