//go:build !linux

package file

import "os"

// dropCache does nothing where there is no fadvise(2).
func dropCache(*os.File) {}
