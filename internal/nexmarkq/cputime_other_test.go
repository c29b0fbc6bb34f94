//go:build !unix

package nexmarkq

import "time"

// processCPU is unknown here: reported as 0.
func processCPU() time.Duration { return 0 }
