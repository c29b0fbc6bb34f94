// Package parallel owns the one bounded fan-out the storage code shares:
// ForEach runs a function over indexes a few at a time and stops at the
// first error (object uploads and downloads, whose time is the store's
// latency rather than its bandwidth).
package parallel
