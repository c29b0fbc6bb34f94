// Package inspect reads a checkpoint store with no job running, for the
// `eddy checkpoints` and `eddy state` commands: it summarizes manifests,
// verifies every object a checkpoint lists, and decodes keyed state with
// only the schemas stored in the checkpoint (no job code).
//
// Data enters through a blob.Store opened read-only (OpenStore), whose Put
// and Delete fail, so nothing here can change a store; it leaves as plain
// Go values (Summary, Details, Problem, Entry) that the CLI prints as text
// or JSON.
package inspect
