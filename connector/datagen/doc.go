// Package datagen generates deterministic sample events for demos, tests and
// benchmarks. Its event types are plain Go structs with protobuf field numbers
// in their tags, the way Eddy users write their own.
package datagen
