//go:build !unix

package main

import "time"

// processCPU is unknown here: reported as 0.
func processCPU() time.Duration { return 0 }
