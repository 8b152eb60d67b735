//go:build !unix

package engine

import "time"

// processCPU is not measured here: a fetch's age then counts whole as
// latency (ahead.waited).
func processCPU() (time.Duration, bool) { return 0, false }
