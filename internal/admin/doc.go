// Package admin serves a running job's admin HTTP endpoint: Prometheus
// metrics (/metrics), liveness and readiness (/healthz, /readyz), a JSON API
// of the job graph with per-operator rates and of the checkpoint history
// (/api/job, /api/checkpoints), profiles (/debug/pprof/) and a web page
// (/) whose assets are embedded in the binary.
//
// Data enters from the runtime's Metrics (read, never written) and a
// prometheus.Gatherer; a sampler takes the subtasks' counters every second
// so the JSON API can report rates. The endpoint binds to a loopback
// address unless told otherwise: it serves profiles and the job's
// internals, and is not meant to face a network.
package admin
