// Package intern keeps one copy of each of a set of key strings, shared by
// every entry that holds the key (the timer service's queue, the window
// operator's index of open windows), so that a new entry of a known key
// allocates nothing. A table forgets the strings its owner no longer uses
// once it has grown to twice those in use.
package intern
