// Package restore owns reading a keyed operator's state back from a
// checkpoint: the snapshot parts whose key groups overlap a subtask's
// (fetched in parallel, checked against the CRC-32C the manifest records),
// the changelog's log ranges replayed on top of them (fetched while the
// parts load), the watermark at the checkpoint, and the classification of
// what goes wrong: a corrupt or missing object makes the checkpoint
// unusable (*Error: the job falls back to an older one), an incompatible
// state is permanent, anything else is a storage error worth a retry.
//
// Data enters as a checkpoint.Manifest and the blob.Store it lives in, and
// leaves into a state.Backend.
package restore
