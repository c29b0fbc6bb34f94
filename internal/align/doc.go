// Package align owns what a receiving subtask decides about its inputs:
// barrier alignment (a checkpoint is taken once every live input has
// delivered its barrier; an input that has is held until then), the
// combined watermark (the least over inputs that are neither idle nor
// finished; it never goes back), idleness, end of data and termination.
//
// Aligner is a pure state machine: the receive loop feeds it what arrives
// on each input and acts on what it returns (take the checkpoint, advance
// event time, forward idleness). Its behaviour is specified by the
// data-driven tests in testdata/.
package align
