// Package blob owns checkpoint storage: one small interface, Store, that
// every backend implements, and the rules every backend follows.
//
// Data enters through Put and leaves through Get. A Put is atomic (a reader
// sees the whole new object or the old one, never a mix) and every object
// carries a trailer with the CRC-32C and length of its payload (see
// AppendTrailer), so Get hands back exactly the bytes that were put or a
// *CorruptError naming the object. A missing object is reported as an error
// that matches ErrNotFound with errors.Is.
//
// A store that can create an object only if it is absent, atomically with
// respect to every other writer, implements Creator; PutIfAbsent uses it
// and fails with ErrExists when the object is there, and with
// ErrNoConditionalCreate for a store that cannot promise that. Lock
// objects and first-writer-wins claims are built on it.
//
// A store that can build one object from parts uploaded over time and
// make it visible whole at the end (S3's multipart upload) implements
// Parter; the changelog's log streams a checkpoint interval's batches into
// one object with it.
//
// Count wraps a store to count its Put, Get, List and Delete calls in a
// Counter, the same way for every backend, so that what a job costs in
// object-store requests can be read and compared; the wrapper keeps the
// store's Creator and Locker and passes Parter on.
//
// Object names are slash-separated relative paths such as
// "checkpoints/00000000000000000012/MANIFEST"; ValidateName says which are
// allowed. Names whose segments start with "." are reserved for a backend's
// temporary files and never appear in List.
//
// Backends live in subpackages (blob/file for a local or mounted directory)
// and register a URL scheme with RegisterScheme when they are imported, so
// Open can construct them from a URL without this package importing them:
//
//	import _ "github.com/eddyflow/eddy/blob/file"
//
//	store, err := blob.Open("file:///var/lib/eddy/job1")
package blob
