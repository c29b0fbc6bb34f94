package blob

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

var (
	schemesMu sync.RWMutex
	schemes   = map[string]func(rest string) (Store, error){}
)

// RegisterScheme makes Open construct stores for URLs "scheme://rest" by
// calling open(rest). Backends call it from init; it panics if open is nil,
// scheme is not a lower-case URL scheme, or the scheme is already
// registered, as database/sql.Register does.
func RegisterScheme(scheme string, open func(rest string) (Store, error)) {
	if open == nil {
		panic("blob: RegisterScheme " + scheme + " with a nil open function")
	}
	if !validScheme(scheme) || strings.ToLower(scheme) != scheme {
		panic(fmt.Sprintf("blob: RegisterScheme: invalid scheme %q", scheme))
	}
	schemesMu.Lock()
	defer schemesMu.Unlock()
	if _, dup := schemes[scheme]; dup {
		panic("blob: RegisterScheme called twice for scheme " + scheme)
	}
	schemes[scheme] = open
}

// Open returns the store a URL names. "scheme://rest" is handed to the
// backend registered for scheme; anything else is a directory path for the
// "file" backend. The file forms are:
//
//	file:///abs/dir     an absolute directory
//	file://./rel/dir    a directory relative to the working directory
//	/abs/dir, rel/dir   plain paths
//
// The backend's package must be imported (blob/file for "file"); the error
// for an unregistered scheme says so.
func Open(url string) (Store, error) {
	if url == "" {
		return nil, fmt.Errorf("blob: empty storage URL; want e.g. file:///var/lib/eddy or a directory path")
	}
	scheme, rest := "file", url
	if i := strings.Index(url, "://"); i > 0 && validScheme(url[:i]) {
		scheme, rest = strings.ToLower(url[:i]), url[i+len("://"):]
	}
	schemesMu.RLock()
	open := schemes[scheme]
	known := make([]string, 0, len(schemes))
	for s := range schemes {
		known = append(known, s)
	}
	schemesMu.RUnlock()
	if open == nil {
		slices.Sort(known)
		if len(known) == 0 {
			known = append(known, "none")
		}
		hint := "import its backend package, e.g. _ \"github.com/eddyflow/eddy/blob/" + scheme + "\""
		return nil, fmt.Errorf("blob: open %q: no store registered for scheme %q (registered: %s); %s",
			url, scheme, strings.Join(known, ", "), hint)
	}
	if rest == "" {
		return nil, fmt.Errorf("blob: open %q: missing path after %s://", url, scheme)
	}
	s, err := open(rest)
	if err != nil {
		return nil, fmt.Errorf("blob: open %q: %w", url, err)
	}
	return s, nil
}

// validScheme reports whether s has the syntax of a URL scheme (RFC 3986):
// a letter followed by letters, digits, '+', '-' or '.'.
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}
