//go:build !linux

package file

import "os"

// dropCache does nothing where there is no fadvise(2).
func dropCache(*os.File) {}

// startWriteback does nothing where there is no sync_file_range(2).
func startWriteback(*os.File, int64, int64) {}
