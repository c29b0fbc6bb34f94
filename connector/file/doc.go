// Package file connects Eddy jobs to local files: an exactly-once JSON-lines
// sink and a replayable JSON-lines source.
package file
