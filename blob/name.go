package blob

import (
	"fmt"
	"strings"
)

// ValidateName reports whether name may name an object: a non-empty,
// slash-separated relative path whose segments are non-empty, are not "."
// or "..", do not start with "." (reserved for temporary files), and contain
// no backslash or NUL byte. Stores call it on every name they are given.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("blob: invalid object name %q: empty", name)
	}
	if name[0] == '/' {
		return fmt.Errorf("blob: invalid object name %q: absolute path; names are relative to the store", name)
	}
	for i, seg := range strings.Split(name, "/") {
		switch {
		case seg == "":
			return fmt.Errorf("blob: invalid object name %q: empty segment %d (doubled or trailing '/')", name, i+1)
		case seg == "..":
			return fmt.Errorf("blob: invalid object name %q: segment %d is \"..\"", name, i+1)
		case seg[0] == '.':
			return fmt.Errorf("blob: invalid object name %q: segment %d %q starts with '.', which is reserved for temporary files", name, i+1, seg)
		case strings.ContainsAny(seg, "\\\x00"):
			return fmt.Errorf("blob: invalid object name %q: segment %d %q contains a backslash or NUL byte; separate segments with '/'", name, i+1, seg)
		}
	}
	return nil
}
