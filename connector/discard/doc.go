// Package discard provides a sink that counts records and drops them: the
// cheapest possible end of a pipeline, for benchmarks.
package discard
