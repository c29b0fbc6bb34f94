// Package demojob is the ride-sharing job that `eddy demo` runs: generated
// GPS points, keyed by driver, a running distance and point count per driver
// in keyed state, written exactly once as JSON lines. Tests run the same job
// in process and as a subprocess that they kill.
package demojob
