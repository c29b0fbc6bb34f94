// Package race tells whether the race detector is on, so that tests of
// allocation counts (which the detector changes) can skip under it.
package race
