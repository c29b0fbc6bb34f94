// Package blobtest owns the conformance suite of blob.Store: the behaviour
// every backend promises, checked the same way for each, as
// testing/fstest.TestFS does for fs.FS.
//
// A backend's test calls Run with a function that opens a fresh, empty
// store for one subtest:
//
//	func TestConformance(t *testing.T) {
//		blobtest.Run(t, func(t *testing.T) blob.Store {
//			s, err := file.New(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// Run checks round trips of small and large objects (with GetInto when the
// store is a blob.IntoGetter), that a concurrent Get during a Put sees the
// old or the new object and never part of one, not-found errors that match
// blob.ErrNotFound and name the object, List by prefix (sorted, and never
// a temporary of an unfinished Put), that deleting a missing object is no
// error, and, for a blob.Creator, conditional creates raced by 16 writers:
// exactly one wins, the others get blob.ErrExists, and Get returns the
// winner's bytes. With the Corrupt option it also damages stored objects
// behind the store's back and demands a *blob.CorruptError.
package blobtest
