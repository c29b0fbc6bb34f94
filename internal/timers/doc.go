// Package timers owns the timers of keyed operators: per key in a list
// state of the operator's backend (so they are checkpointed, restored and
// rescaled with the key's other state), and in a min-heap across keys for
// firing. A timer enters through Register (a keyed function asks for it)
// or Rebuild (after a restore) and leaves through FireDue, which removes it
// from state before calling back.
package timers
