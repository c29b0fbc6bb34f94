package s3

import (
	"net/http"
	"sync/atomic"
)

// Requests counts the HTTP requests a Store sent, by kind, retries
// included: what an S3 bill counts. A multipart upload's create,
// parts and completion are Puts (its abort a Delete); a HEAD is a Get.
type Requests struct {
	Put, Get, List, Delete int64
}

// Sub returns r minus o, the requests made between two Stats.
func (r Requests) Sub(o Requests) Requests {
	return Requests{Put: r.Put - o.Put, Get: r.Get - o.Get, List: r.List - o.List, Delete: r.Delete - o.Delete}
}

// Stats returns the requests the store has sent so far.
func (s *Store) Stats() Requests {
	return Requests{Put: s.reqs.put.Load(), Get: s.reqs.get.Load(), List: s.reqs.list.Load(), Delete: s.reqs.del.Load()}
}

type counters struct{ put, get, list, del atomic.Int64 }

// countingClient counts the requests that pass through it: it wraps the
// SDK's HTTP client, below its retries.
type countingClient struct {
	base interface {
		Do(*http.Request) (*http.Response, error)
	}
	c *counters
}

func (t *countingClient) Do(r *http.Request) (*http.Response, error) {
	switch r.Method {
	case http.MethodPut, http.MethodPost:
		t.c.put.Add(1)
	case http.MethodDelete:
		t.c.del.Add(1)
	case http.MethodGet, http.MethodHead:
		if r.URL.Query().Has("list-type") || r.URL.Query().Has("uploads") {
			t.c.list.Add(1)
		} else {
			t.c.get.Add(1)
		}
	}
	return t.base.Do(r)
}
