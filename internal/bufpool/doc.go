// Package bufpool recycles large byte buffers (state snapshots, their
// parts and chunks) so that each checkpoint does not allocate, and the
// garbage collector clear, the same memory again.
package bufpool
