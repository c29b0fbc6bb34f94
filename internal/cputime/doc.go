// Package cputime owns reading the CPU time the process has used, for the
// benchmarks and the CLI commands that report CPU per event. Nothing enters
// it; Process returns the user plus system time so far (0 where the
// platform does not say).
package cputime
