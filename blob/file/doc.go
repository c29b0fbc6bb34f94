// Package file is the blob.Store of a local (or mounted) directory, Eddy's
// default checkpoint storage.
//
// An object "a/b/c" is the file dir/a/b/c holding the payload followed by
// the blob trailer (CRC-32C, length, magic; see blob.AppendTrailer). Put
// writes a temporary file next to the target (its name starts with "."),
// fsyncs it, renames it over the target and fsyncs the directory, so an
// object is either wholly there or not there, also after a crash. A crash
// mid-Put can leave a dot-file behind; List and Get never see it.
//
// PutIfAbsent (blob.Creator) writes the temporary file the same way but
// link(2)s it to the target instead of renaming it: link fails if the
// target exists, so the create is atomic across processes sharing the
// directory, and the loser gets an error matching blob.ErrExists.
//
// Importing the package registers the "file" scheme with blob.Open, which
// also handles plain directory paths:
//
//	import _ "github.com/eddyflow/eddy/blob/file"
package file
