// Package runtime runs a job graph: it owns the stages and the subtasks
// (goroutines) that run them, the hash shuffles between them (batches
// handed to one inbox per receiving subtask, with watermarks inside the
// batches), the source loop, barrier checkpoints (alignment decided by
// internal/align, snapshots and sink pre-commits at the barrier,
// acknowledgements), the coordinator's I/O (Job implements coord.Task:
// triggering the sources, writing manifests assembled by internal/manifest,
// committing sinks; internal/coord decides when), where keyed state is
// restored from (internal/restore reads it), the job's side of the
// changelog state backend (the log and what internal/changelog's
// Operator needs of the job), the restart and fallback policy, and the
// job's counters and Metrics (per subtask records, busy / back-pressured /
// idle time and watermarks, which each subtask counts locally and flushes
// once per batch or wait; readiness; the checkpoint history), which
// internal/metrics and internal/admin read.
//
// The root package builds a Graph through this package's small API
// (Graph.AddSource, KeyedStage, SetReceive, Shuffle, OpenKeyed, RunSource,
// OpenSink) and calls Run. Records enter at RunSource, from a connector's
// split readers; they leave through a sink writer (OpenSink) or a Push to
// the next operator. What is checkpointed leaves through blob.Store and
// comes back on restore through checkpoint.Storage.
//
// The job runs one coord.Coordinator over all its subtasks today. What it
// decides (internal/coord) and what a checkpoint holds (manifest.Assemble)
// take only the acknowledgements, sources and sinks they are given, so a
// coordinator per task (the subgraph over one source split) is another
// coord.Task over that subgraph's triggers, acks and sinks.
package runtime
