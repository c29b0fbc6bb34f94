// Package connector holds the contracts between Eddy's runtime and its
// inputs and outputs: Source and SplitReader for partitioned, replayable
// inputs, Sink and SinkWriter for outputs that take part in checkpoints
// with a two-phase commit, and the error kinds a connector reports
// (ErrFenced, Permanent).
//
// A connector imports this package only, never the runtime: data enters the
// runtime through SplitReader.Next and leaves it through SinkWriter.Write;
// what a checkpoint stores of a connector is the bytes it returns from
// SplitReader.Position and SinkWriter.PreCommit, handed back to it on
// restore (Source.OpenSplit, Sink.Recover). A reader gives the records it
// returns memory of their own cheaply with Slab and Strings, which carve it
// from shared chunks. The packages below this one
// (datagen, file, kafka, discard) are Eddy's own connectors.
package connector
