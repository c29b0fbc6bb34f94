package metrics

import (
	"math"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/internal/runtime"
)

// Collector is the Prometheus collector of one job's metrics. Register it
// in the job's own prometheus.Registry (and in any registerer the user
// passes): two jobs in one process register two collectors that differ in
// job_name.
type Collector struct {
	m    *runtime.Metrics
	job  string
	desc struct {
		recordsIn, recordsOut, late, dropped                                                           *prometheus.Desc
		busy, pressured, idle                                                                          *prometheus.Desc
		watermark, watermarkLag, stateEntries, stateBytes                                              *prometheus.Desc
		completed, failed, size, lastCompleted, lastID                                                 *prometheus.Desc
		restarts, restore, restoredID, ready, subtasks                                                 *prometheus.Desc
		started, materializations, materializationStall, bld                                           *prometheus.Desc
		dstlInFlight, dstlUploaded, dstlUploads, dstlAttempts, dstlObjects, dstlParts, dstlCompletions *prometheus.Desc
		dstlChanges, dstlBlocked, dstlBlockedTime                                                      *prometheus.Desc
		blobRequests, dstlLatency, sourceLag                                                           *prometheus.Desc
		pebbleL0Sublevels, pebbleL0Files, pebbleDebt                                                   *prometheus.Desc
		pebbleDisk, pebbleMemtable, pebbleCache                                                        *prometheus.Desc
	}
	build    prometheus.Labels
	duration prometheus.Histogram
	phase    *prometheus.HistogramVec
	commit   *prometheus.HistogramVec
	uploaded prometheus.Counter
}

// Checkpoint phases, the values of the phase label.
const (
	PhaseBarrier  = "barrier"  // trigger until the barrier was aligned at the subtask that completed the checkpoint
	PhaseSync     = "sync"     // that subtask's synchronous part (snapshot, or cutting the log)
	PhaseAsync    = "async"    // its asynchronous part (uploads, log durable) until its acknowledgement
	PhaseManifest = "manifest" // writing the manifest, retries included
)

// durationBuckets span 1 ms to about 4 min.
var durationBuckets = prometheus.ExponentialBuckets(0.001, 2, 18)

// New returns the collector of job's metrics m and makes it m's observer.
func New(job string, m *runtime.Metrics) *Collector {
	c := &Collector{m: m, job: job}
	jl := prometheus.Labels{"job_name": job}
	sub := []string{"operator", "subtask"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, jl)
	}
	c.desc.recordsIn = d("eddy_records_in_total", "Records a subtask took in: read from its source, or received from a shuffle.", sub...)
	c.desc.recordsOut = d("eddy_records_out_total", "Records a subtask sent on: to a shuffle, or written to a sink.", sub...)
	c.desc.late = d("eddy_late_records_total", "Records that arrived after their windows were gone (routed to the Late output, or dropped).", sub...)
	c.desc.dropped = d("eddy_dropped_records_total", "Late records dropped because nothing consumes the Late output.", sub...)
	c.desc.busy = d("eddy_subtask_busy_seconds_total", "Time a subtask spent processing records.", sub...)
	c.desc.pressured = d("eddy_subtask_backpressured_seconds_total", "Time a subtask waited for a full downstream inbox (backpressure).", sub...)
	c.desc.idle = d("eddy_subtask_idle_seconds_total", "Time a subtask waited for input.", sub...)
	c.desc.watermark = d("eddy_watermark_seconds", "A subtask's event-time watermark, as Unix time.", sub...)
	c.desc.watermarkLag = d("eddy_watermark_lag_seconds", "Wall-clock time minus a subtask's watermark.", sub...)
	c.desc.sourceLag = d("eddy_source_lag_records", "Records a source subtask's splits hold that it has not read yet (Kafka: high watermark minus position), for sources that know it.", sub...)
	c.desc.stateEntries = d("eddy_state_entries", "Keyed state entries (state, key) of a subtask at its last checkpoint.", sub...)
	c.desc.stateBytes = d("eddy_state_size_bytes", "Serialized size of a subtask's keyed state at its last snapshot or restore.", sub...)
	c.desc.completed = d("eddy_checkpoints_completed_total", "Checkpoints completed (manifest written, sinks committed).")
	c.desc.failed = d("eddy_checkpoints_failed_total", "Checkpoints that failed: timed out, an upload or the manifest failed.")
	c.desc.size = d("eddy_checkpoint_size_bytes", "Size of the last completed checkpoint: incremental (uploaded for it) or full (everything it refers to).", "kind")
	c.desc.lastCompleted = d("eddy_checkpoint_last_completed_timestamp_seconds", "When the last checkpoint completed, as Unix time.")
	c.desc.lastID = d("eddy_checkpoint_last_id", "Id of the last completed checkpoint.")
	c.desc.restarts = d("eddy_restarts_total", "Restarts of the job after failures.")
	c.desc.restore = d("eddy_restore_duration_seconds", "Time the current attempt spent restoring state (its slowest subtask).")
	c.desc.restoredID = d("eddy_restored_checkpoint_id", "Checkpoint the current attempt restored from (0: none).")
	c.desc.ready = d("eddy_job_ready", "1 while an attempt runs with every subtask restored and running.")
	c.desc.subtasks = d("eddy_subtasks", "Subtasks of the job.")
	c.desc.started = d("eddy_subtasks_running", "Subtasks of the current attempt that restored their state and run.")
	c.desc.materializations = d("eddy_changelog_materializations_total", "Changelog materializations completed.")
	c.desc.materializationStall = d("eddy_changelog_materialization_stall_max_seconds", "Longest time one materialization step held up a subtask's records.")
	c.desc.bld = d("eddy_build_info", "Always 1; the labels say which Eddy and Go built the binary.", "version", "revision", "go_version")
	c.desc.dstlInFlight = d("eddy_dstl_in_flight_bytes", "Changelog bytes queued or uploading to the durable short-term log now.")
	c.desc.dstlUploaded = d("eddy_dstl_uploaded_bytes_total", "Bytes of changelog objects uploaded (winning attempts).")
	c.desc.dstlUploads = d("eddy_dstl_uploads_total", "Changelog batches uploaded, by outcome (ok; failed after every attempt).", "outcome")
	c.desc.dstlObjects = d("eddy_dstl_objects_total", "Changelog objects written: one per batch, or on a store that builds objects from parts (S3) one per checkpoint interval, its batches streamed in as parts.")
	c.desc.dstlParts = d("eddy_dstl_parts_total", "Part uploads of streamed changelog objects (S3 multipart upload parts, hedges not counted).")
	c.desc.dstlCompletions = d("eddy_dstl_completions_total", "Streamed changelog objects completed in the background once their checkpoints were durable, by outcome (ok; failed after every attempt, left to a restore).", "outcome")
	c.desc.dstlAttempts = d("eddy_dstl_upload_attempts_total", "Changelog upload attempts started, by why: first, hedge (an earlier one was slow), retry (an earlier one failed).", "reason")
	c.desc.dstlChanges = d("eddy_dstl_changes_total", "State changes sealed into changelog batches.")
	c.desc.dstlBlocked = d("eddy_dstl_blocked_appends_total", "State changes that waited because too many bytes were in flight (backpressure from the log).")
	c.desc.dstlBlockedTime = d("eddy_dstl_blocked_seconds_total", "Time state changes waited for bytes in flight to drop.")
	c.desc.blobRequests = d("eddy_blob_requests_total", "Requests made of the checkpoint store (what an object store bills), hedges and retries included, by operation (put, get, list, delete) and outcome (ok: success or an answer such as not found; failed).", "op", "outcome")
	c.desc.dstlLatency = d("eddy_dstl_upload_duration_seconds", "How long changelog batches took to become durable in the store, hedges and retries included.")
	c.desc.pebbleL0Sublevels = d("eddy_pebble_l0_sublevels", "Sublevels of L0 of a keyed subtask's Pebble database: reads consult each, and Pebble slows writes as they grow (about 20 stalls them).", sub...)
	c.desc.pebbleL0Files = d("eddy_pebble_l0_files", "Files in L0 of a keyed subtask's Pebble database.", sub...)
	c.desc.pebbleDebt = d("eddy_pebble_compaction_debt_bytes", "Bytes Pebble estimates its compactions must rewrite for a keyed subtask's database to settle; steady growth means writes outpace compactions.", sub...)
	c.desc.pebbleDisk = d("eddy_pebble_disk_bytes", "Local disk space a keyed subtask's Pebble database takes, files held by a checkpoint being uploaded included.", sub...)
	c.desc.pebbleMemtable = d("eddy_pebble_memtable_bytes", "Bytes in the memtables of a keyed subtask's Pebble database.", sub...)
	c.desc.pebbleCache = d("eddy_pebble_block_cache_lookups_total", "Lookups in the block cache all Pebble databases of the process share, by result (hit, miss).", "result")
	c.build = buildLabels()
	c.duration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "eddy_checkpoint_duration_seconds",
		Help: "Checkpoint duration, trigger to sinks committed.", ConstLabels: jl, Buckets: durationBuckets})
	c.phase = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "eddy_checkpoint_phase_duration_seconds",
		Help:        "Checkpoint duration by phase: barrier (alignment), sync, async (of the subtask that acknowledged last), manifest (write).",
		ConstLabels: jl, Buckets: durationBuckets}, []string{"phase"})
	c.commit = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "eddy_sink_commit_duration_seconds",
		Help: "Time a sink took to commit a checkpoint's transactions.", ConstLabels: jl, Buckets: durationBuckets}, []string{"sink"})
	c.uploaded = prometheus.NewCounter(prometheus.CounterOpts{Name: "eddy_checkpoint_uploaded_bytes_total",
		Help: "Bytes uploaded for completed checkpoints (state parts and log).", ConstLabels: jl})
	for _, p := range []string{PhaseBarrier, PhaseSync, PhaseAsync, PhaseManifest} {
		c.phase.WithLabelValues(p) // every phase shows from the start
	}
	m.SetObserver(c)
	return c
}

// buildLabels names the Eddy module version, the VCS revision and the Go
// version of the binary.
func buildLabels() prometheus.Labels {
	l := prometheus.Labels{"version": "(devel)", "revision": "", "go_version": ""}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return l
	}
	l["go_version"] = bi.GoVersion
	if bi.Main.Path == "github.com/eddyflow/eddy" {
		l["version"] = bi.Main.Version
	}
	for _, dep := range bi.Deps {
		if dep.Path == "github.com/eddyflow/eddy" {
			l["version"] = dep.Version
		}
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			l["revision"] = s.Value
		}
	}
	return l
}

// CheckpointCompleted implements runtime.Observer.
func (c *Collector) CheckpointCompleted(s runtime.CheckpointStats) {
	c.duration.Observe(s.Duration.Seconds())
	c.phase.WithLabelValues(PhaseBarrier).Observe(s.Last.Barrier.Seconds())
	c.phase.WithLabelValues(PhaseSync).Observe(s.Last.Sync.Seconds())
	c.phase.WithLabelValues(PhaseAsync).Observe(s.Last.Async.Seconds())
	c.phase.WithLabelValues(PhaseManifest).Observe(s.ManifestWrite.Seconds())
	c.uploaded.Add(float64(s.Bytes))
}

// CheckpointFailed implements runtime.Observer; the count is read from the
// runtime's metrics at scrape time.
func (c *Collector) CheckpointFailed(uint64) {}

// SinkCommitted implements runtime.Observer.
func (c *Collector) SinkCommitted(sink string, d time.Duration) {
	c.commit.WithLabelValues(sink).Observe(d.Seconds())
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.desc.recordsIn, c.desc.recordsOut, c.desc.late, c.desc.dropped, c.desc.busy, c.desc.pressured,
		c.desc.idle, c.desc.watermark, c.desc.watermarkLag, c.desc.stateEntries, c.desc.stateBytes, c.desc.completed, c.desc.failed,
		c.desc.size, c.desc.lastCompleted, c.desc.lastID, c.desc.restarts, c.desc.restore, c.desc.restoredID, c.desc.ready,
		c.desc.subtasks, c.desc.started, c.desc.materializations, c.desc.materializationStall, c.desc.bld,
		c.desc.dstlInFlight, c.desc.dstlUploaded, c.desc.dstlUploads, c.desc.dstlAttempts, c.desc.dstlObjects, c.desc.dstlParts, c.desc.dstlCompletions, c.desc.dstlChanges,
		c.desc.dstlBlocked, c.desc.dstlBlockedTime, c.desc.blobRequests, c.desc.dstlLatency, c.desc.sourceLag,
		c.desc.pebbleL0Sublevels, c.desc.pebbleL0Files, c.desc.pebbleDebt, c.desc.pebbleDisk, c.desc.pebbleMemtable, c.desc.pebbleCache} {
		ch <- d
	}
	c.duration.Describe(ch)
	c.phase.Describe(ch)
	c.commit.Describe(ch)
	c.uploaded.Describe(ch)
}

// Collect implements prometheus.Collector: it reads the runtime's counters
// as they are now.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	now := time.Now()
	for _, st := range c.m.Stages() {
		for i := range st.Parallelism {
			s := c.m.Subtask(st.ID, i)
			l := []string{st.Name, strconv.Itoa(i)}
			counter(c.desc.recordsIn, float64(s.RecordsIn.Load()), l...)
			counter(c.desc.recordsOut, float64(s.RecordsOut.Load()), l...)
			counter(c.desc.busy, seconds(s.BusyNs.Load()), l...)
			counter(c.desc.pressured, seconds(s.BackPressuredNs.Load()), l...)
			counter(c.desc.idle, seconds(s.IdleNs.Load()), l...)
			if wm := s.Watermark.Load(); wm != math.MinInt64 && wm != math.MaxInt64 {
				gauge(c.desc.watermark, seconds(wm), l...)
				gauge(c.desc.watermarkLag, now.Sub(time.Unix(0, wm)).Seconds(), l...)
			}
			if lag := s.SourceLag.Load(); st.Source && lag != math.MinInt64 {
				gauge(c.desc.sourceLag, float64(lag), l...)
			}
			if !st.Source {
				counter(c.desc.late, float64(s.LateRecords.Load()), l...)
				counter(c.desc.dropped, float64(s.DroppedRecords.Load()), l...)
				gauge(c.desc.stateEntries, float64(s.StateEntries.Load()), l...)
				gauge(c.desc.stateBytes, float64(s.StateSizeBytes.Load()), l...)
			}
		}
	}
	stats := c.m.Stats()
	completed, failed := c.m.Checkpoints()
	counter(c.desc.completed, float64(completed))
	counter(c.desc.failed, float64(failed))
	gauge(c.desc.size, float64(stats.LastUploaded), "incremental")
	gauge(c.desc.size, float64(stats.LastFullSize), "full")
	if h := c.m.History(); len(h) > 0 {
		last := h[len(h)-1]
		gauge(c.desc.lastCompleted, float64(last.Completed.UnixNano())/1e9)
		gauge(c.desc.lastID, float64(last.ID))
	}
	counter(c.desc.restarts, float64(stats.Restarts))
	gauge(c.desc.restore, stats.Recovery.Seconds())
	gauge(c.desc.restoredID, float64(stats.RestoredFrom))
	r := c.m.Readiness()
	ready := 0.0
	if r.Ready() {
		ready = 1
	}
	gauge(c.desc.ready, ready)
	gauge(c.desc.subtasks, float64(r.Total))
	gauge(c.desc.started, float64(r.Started))
	counter(c.desc.materializations, float64(stats.Materializations))
	gauge(c.desc.materializationStall, stats.MaterializationStall.Seconds())
	gauge(c.desc.bld, 1, c.build["version"], c.build["revision"], c.build["go_version"])
	if d, ok := c.m.DSTL(); ok {
		gauge(c.desc.dstlInFlight, float64(d.BytesInFlight))
		counter(c.desc.dstlUploaded, float64(d.BytesUploaded))
		counter(c.desc.dstlUploads, float64(d.Uploads), "ok")
		counter(c.desc.dstlUploads, float64(d.FailedBatches), "failed")
		counter(c.desc.dstlObjects, float64(d.Objects))
		counter(c.desc.dstlParts, float64(d.Parts))
		counter(c.desc.dstlCompletions, float64(d.Completions), "ok")
		counter(c.desc.dstlCompletions, float64(d.FailedCompletions), "failed")
		counter(c.desc.dstlAttempts, float64(d.Attempts-d.HedgedUploads-d.Retries), "first")
		counter(c.desc.dstlAttempts, float64(d.HedgedUploads), "hedge")
		counter(c.desc.dstlAttempts, float64(d.Retries), "retry")
		counter(c.desc.dstlChanges, float64(d.Changes))
		counter(c.desc.dstlBlocked, float64(d.BlockedAppends))
		counter(c.desc.dstlBlockedTime, d.BlockedTime.Seconds())
		lat := d.UploadLatency
		buckets := make(map[float64]uint64, len(lat.Buckets))
		for i, b := range dstl.UploadLatencyBuckets {
			buckets[b.Seconds()] = uint64(lat.Buckets[i])
		}
		ch <- prometheus.MustNewConstHistogram(c.desc.dstlLatency, uint64(lat.Count), lat.Sum.Seconds(), buckets)
	}
	if dbs, on := c.m.Pebble(); on {
		var hits, misses int64
		for _, h := range dbs {
			l := []string{h.Operator, strconv.Itoa(h.Subtask)}
			gauge(c.desc.pebbleL0Sublevels, float64(h.L0Sublevels), l...)
			gauge(c.desc.pebbleL0Files, float64(h.L0Files), l...)
			gauge(c.desc.pebbleDebt, float64(h.CompactionDebt), l...)
			gauge(c.desc.pebbleDisk, float64(h.DiskBytes), l...)
			gauge(c.desc.pebbleMemtable, float64(h.MemTableBytes), l...)
			// The cache is the pool's: every database reports the same.
			hits, misses = max(hits, h.CacheHits), max(misses, h.CacheMisses)
		}
		counter(c.desc.pebbleCache, float64(hits), "hit")
		counter(c.desc.pebbleCache, float64(misses), "miss")
	}
	reqs, reqsFailed := c.m.BlobRequests()
	for _, r := range []struct {
		op          string
		all, failed int64
	}{{"put", reqs.Put, reqsFailed.Put}, {"get", reqs.Get, reqsFailed.Get}, {"list", reqs.List, reqsFailed.List}, {"delete", reqs.Delete, reqsFailed.Delete}} {
		counter(c.desc.blobRequests, float64(r.all-r.failed), r.op, "ok")
		counter(c.desc.blobRequests, float64(r.failed), r.op, "failed")
	}
	c.duration.Collect(ch)
	c.phase.Collect(ch)
	c.commit.Collect(ch)
	c.uploaded.Collect(ch)
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }
