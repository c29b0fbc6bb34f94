// Package state owns keyed state: the Value, List, Map and Reducing state
// types that a keyed operator declares by name, the key groups that spread
// keys over subtasks, and the heap backend that holds state as Go values and
// serializes it with serde only for snapshots.
//
// A key's serialized bytes hash to one of MaxParallelism key groups; subtask
// i of p owns a contiguous range of key groups (KeyGroupRange). Snapshots are
// written per key group, so a job restores with a different parallelism by
// reading the key groups each new subtask owns.
//
// Every state snapshot carries the serde schema of its key and value types;
// Restore checks them (serde.CheckKey for keys, serde.Check for values)
// before it loads anything, so an incompatible change fails the restore
// without touching state or the checkpoint.
package state
