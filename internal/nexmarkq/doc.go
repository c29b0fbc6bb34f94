// Package nexmarkq owns the Nexmark queries as Eddy jobs: q0 to q12 of the
// reference's Flink SQL (github.com/nexmark/nexmark, nexmark-flink's
// queries/qN.sql), each built onto an *eddy.Env by its Query.Build.
//
// Data enters from a connector/nexmark Source, read with event time from the
// event's dateTime and watermarks 4 s behind it, as the reference's DDL
// declares; the person, auction and bid views are FlatMaps of the one event
// stream. Each query's result leaves through one sink: with an output
// directory, an exactly-once JSON-lines file sink whose records have the
// columns of the reference's sink table (times in epoch milliseconds), or,
// without one, connector/discard. Updating queries (q4, q6) write
// eddy.Change rows, whose fold is the query's result table.
//
// The command `eddy nexmark run` runs them; the package's tests check each
// against a brute-force model over Source.Event. docs/nexmark.md lists
// where the queries deliberately differ from the reference.
package nexmarkq
