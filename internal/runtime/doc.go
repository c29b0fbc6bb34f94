// Package runtime runs a job graph: it owns the stages and the subtasks
// (goroutines) that run them and wires the packages that own each concern
// together for one run attempt:
//
//   - internal/graph: the job's identities and fingerprint;
//   - internal/shuffle and internal/inbox: records handed between stages,
//     with watermarks inside the batches, into one inbox per receiving
//     subtask;
//   - internal/source: the source loop (splits, watermarks, barriers);
//   - internal/align: barrier and watermark alignment at a receiver;
//   - internal/snapshot: state parts written and acknowledgements sent, in
//     barrier order, after a subtask's barrier;
//   - internal/coord and internal/manifest: when a checkpoint is triggered
//     and complete, and what its manifest holds (Job implements coord.Task:
//     triggering the sources, writing the manifest, committing the sinks);
//   - internal/restore: where keyed state comes back from;
//   - internal/changelog: the changelog state backend per keyed operator,
//     and the attempt's log (OpenLog);
//   - state/pebble: the Pebble state backend (pebble.go): one Pool per
//     Run, one database per keyed operator subtask in the attempt's
//     directory, flushed after each batch, checkpointed at the barrier
//     and uploaded in the background after the subtask's previous upload;
//   - internal/timers: keyed timers.
//
// What stays here is what binds them: the attempt (restore choice, void
// in-flight checkpoints, sink recovery, the restart and fallback policy),
// a subtask's synchronous step at a barrier (snapshot keyed state,
// pre-commit sinks, forward the barrier), its receive loop, and the job's
// counters and Metrics (per subtask records, busy / back-pressured / idle
// time and watermarks, which each subtask counts locally and flushes once
// per batch or wait; readiness; the checkpoint history), which
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
