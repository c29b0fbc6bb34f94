// Package checkpoint owns the checkpoints of a job in blob storage: their
// manifests, how long they are kept, and which one a restore starts from.
//
// A checkpoint with id N lives under "checkpoints/<N as 20 digits>/": the
// state parts the runtime uploads there (see Storage.StateBlobName) and,
// written last by Storage.Complete, its MANIFEST. A checkpoint exists once
// its manifest exists, never before: a crash before the manifest leaves
// orphans that a later Complete deletes. The manifest (Manifest, encoded
// with serde as protobuf and stored with the blob trailer's checksum) records
// source positions, the key-group ranges and blobs of every operator's
// state, the sink transactions pre-committed in the checkpoint, and every
// blob the checkpoint uses.
//
// Data enters through Complete and leaves through Latest, Before and Load.
// Complete keeps the newest few checkpoints and deletes everything else under
// "checkpoints/" that they do not use, up to the completed id. Latest
// returns the newest checkpoint whose manifest is intact and whose files all
// exist, reporting every newer one it had to skip and why.
//
// One process writes a job's checkpoints at a time. A checkpoint in flight
// may use blobs under its own id and blobs listed by the newest complete
// checkpoint; anything else can be deleted while it is in flight.
package checkpoint
