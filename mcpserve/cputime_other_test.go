//go:build !unix

package mcpserve_test

import "time"

// processCPU is 0 where the benchmarks do not measure CPU time.
func processCPU() time.Duration { return 0 }
