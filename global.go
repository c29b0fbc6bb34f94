package eddy

// GlobalKey is the one key of a Global stream.
type GlobalKey struct{}

// Global gathers every record of s under one key, in one subtask, for
// non-keyed (global) aggregation: windows over all records (Flink's
// windowAll), a running total, a top-N over everything. It is a KeyBy to
// parallelism 1, so what it feeds does not scale out; aggregate per key
// first where the query allows.
func Global[T any](s *Stream[T]) *KeyedStream[GlobalKey, T] {
	return KeyBy(s, func(*T) GlobalKey { return GlobalKey{} }, WithParallelism(1))
}
