// Package metrics exports a running job's measurements to Prometheus.
//
// The runtime counts records and time in plain local counters that each
// subtask flushes, once per batch or wait, into its runtime.SubtaskMetrics;
// the Collector of this package reads those at scrape time, so the hot path
// never resolves a label or touches a map. What happens once per checkpoint
// (durations by phase, sizes, sink commits) is observed into histograms
// through runtime.Observer.
//
// Every metric carries the label job_name (not job, which Prometheus sets
// on every scraped series itself); per subtask metrics add operator (the
// name of the subtask's chain of operators: its source's or its first keyed
// operator's id) and subtask. No metric is labelled by key.
package metrics
