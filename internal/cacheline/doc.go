// Package cacheline keeps the memory that one subtask's goroutine writes
// for every record off the cache lines that another subtask's goroutine
// uses.
//
// Subtasks run on different cores. Small objects that two subtasks set up
// one after the other (a closure's captured variables, a shuffle writer, a
// state handle's cached entry) often come from the same span, next to each
// other, so that two cores write one cache line for every record (false
// sharing). Whether they do depends on which processor each goroutine was
// on when it allocated, so one job ran at one speed or at half of it from
// one run to the next: Nexmark q7 at parallelism 2 took 218–513 CPU-ns per
// event over five runs, and 207–240 with the padding (BENCHMARKS.md). A
// struct with a Pad at each end, or a value from New, shares no cache line
// with any other allocation.
package cacheline
