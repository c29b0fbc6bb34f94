package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/eddyflow/eddy/blob"
	_ "github.com/eddyflow/eddy/blob/file" // registers file:// storage
	blobs3 "github.com/eddyflow/eddy/blob/s3"
)

// splitStoreURL splits a storage location as blob.Open takes it into its
// scheme ("" for a plain directory path), the rest of its path, and its
// query ("" or starting with "?").
func splitStoreURL(url string) (scheme, path, query string) {
	i := strings.Index(url, "://")
	if i <= 0 || strings.ContainsAny(url[:i], "/\\?") {
		return "", url, ""
	}
	scheme, rest := strings.ToLower(url[:i]), url[i+len("://"):]
	if j := strings.IndexByte(rest, '?'); j >= 0 {
		rest, query = rest[:j], rest[j:]
	}
	return scheme, rest, query
}

// storeAt returns the location of the store sub (a slash-separated
// relative path) inside the store url: a subdirectory of a directory, or
// for a URL its path extended by sub, its parameters kept:
//
//	storeAt("./data", "kafka-job")                      = "data/kafka-job"
//	storeAt("s3://b/demo?endpoint=http://h", "kafka-job") = "s3://b/demo/kafka-job?endpoint=http://h"
func storeAt(url, sub string) string {
	scheme, path, query := splitStoreURL(url)
	if scheme == "" {
		return filepath.Join(url, filepath.FromSlash(sub))
	}
	return scheme + "://" + strings.TrimRight(path, "/") + "/" + strings.Trim(sub, "/") + query
}

// isRemote reports whether url names a store other than a local directory.
func isRemote(url string) bool {
	scheme, _, _ := splitStoreURL(url)
	return scheme != "" && scheme != "file"
}

// countedStore is a store opened from a URL, counted.
type countedStore struct {
	blob.Store               // counts its operations in reqs
	reqs       *blob.Counter // the store operations
	s3         *blobs3.Store // the S3 store below, or nil: it counts HTTP requests
}

// openCounted opens the store url names and counts its operations in c.
func openCounted(url string, c *blob.Counter) (countedStore, error) {
	s, err := blob.Open(url)
	if err != nil {
		return countedStore{}, err
	}
	cs := countedStore{Store: blob.Count(s, c), reqs: c}
	cs.s3, _ = s.(*blobs3.Store)
	return cs, nil
}

// httpRequests returns the HTTP requests the S3 store below sent, and
// false for a store that is not S3.
func (cs countedStore) httpRequests() (blob.Requests, bool) {
	if cs.s3 == nil {
		return blob.Requests{}, false
	}
	return blob.Requests(cs.s3.Stats()), true
}

// perCheckpoint formats r divided by n checkpoints, e.g.
// "12.0 PUT, 0.0 GET, 0.1 LIST, 4.0 DELETE".
func perCheckpoint(r blob.Requests, n int64) string {
	d := float64(max(n, 1))
	return fmt.Sprintf("%.1f PUT, %.1f GET, %.1f LIST, %.1f DELETE",
		float64(r.Put)/d, float64(r.Get)/d, float64(r.List)/d, float64(r.Delete)/d)
}

// requestSummary writes the demo's summary lines of the store requests
// made, in all and per checkpoint: store operations, and for S3 the HTTP
// requests too (multipart uploads and ranged reads are several).
func requestSummary(tw *tabwriter.Writer, cs countedStore, checkpoints int64) {
	line := func(what string, r blob.Requests) {
		if checkpoints > 0 {
			fmt.Fprintf(tw, "  %s\t%v (per checkpoint: %s)\n", what, r, perCheckpoint(r, checkpoints))
		} else {
			fmt.Fprintf(tw, "  %s\t%v\n", what, r)
		}
	}
	line("store requests", cs.reqs.Requests())
	if r, ok := cs.httpRequests(); ok {
		line("S3 HTTP requests", r)
	}
}

// deleteAll deletes every object of s, eight at a time, and returns the
// first error.
func deleteAll(ctx context.Context, s blob.Store) error {
	names, err := s.List(ctx, "")
	if err != nil {
		return err
	}
	errc := make(chan error, len(names))
	sem := make(chan struct{}, 8)
	for _, n := range names {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errc <- s.Delete(ctx, n)
		}()
	}
	var first error
	for range names {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}
