//go:build !linux

package pebble

import "os"

// startWriteback does nothing where there is no sync_file_range(2).
func startWriteback(*os.File) {}
