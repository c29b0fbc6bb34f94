// Package s3 is the blob.Store of an S3 bucket (AWS or an S3-compatible
// server), built on the AWS SDK for Go v2.
//
// An object "a/b" is the S3 object prefix+"a/b" holding the payload
// followed by the blob trailer (CRC-32C, length, magic; see
// blob.AppendTrailer), the same bytes blob/file keeps in a file, so Get
// verifies what it read and reports damage as a *blob.CorruptError. S3
// makes a PUT visible whole, so Put is atomic. An object larger than
// MultipartAbove (16 MiB by default) is uploaded as a multipart upload of
// PartSize pieces sent in parallel straight from the caller's buffer (it
// is not copied), and objects larger than PartSize are read with parallel
// ranged GETs, each conditional on the ETag the first saw, so a read never
// mixes two versions of an object. CreateParts (blob.Parter) exposes the
// multipart upload itself, for a writer whose object grows over time: its
// parts (at least 5 MiB but the last) go up as they exist, and Complete
// makes them the object. CompleteParts completes an upload from its id
// in another process (a reader of a writer that died after its parts were
// up), taking the parts' ETags from ListParts.
//
// PutIfAbsent (blob.Creator) sends "If-None-Match: *" with the PUT, or
// with the completion of a multipart upload: S3 lets exactly one of
// several writers create a name, and the others get 412, reported as
// blob.ErrExists. A 409 ConditionalRequestConflict is retried a few
// times.
//
// Data enters and leaves through the SDK's client: requests are counted
// by kind (Stats), retried at most MaxAttempts times in all (blob.Hedger
// hedges above the store), and a response that does not start, or a body
// that stops, for StallTimeout fails. New probes the bucket (a List of one
// key) within OpenTimeout and fails with an error naming endpoint, bucket
// and prefix and saying what to fix. Credentials come from the standard
// chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the
// shared files, an instance role) unless Credentials is given; no error
// or log carries the secret.
//
// Importing the package registers the "s3" scheme with blob.Open:
//
//	import _ "github.com/eddyflow/eddy/blob/s3"
//
//	store, err := blob.Open("s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1")
//
// The URL's parameters are endpoint (implies path-style addressing),
// region, path_style, multipart_above and part_size (bytes), concurrency,
// open_timeout and stall_timeout (durations such as "5s") and
// max_attempts.
package s3
