//go:build unix

package engine

import (
	"syscall"
	"time"
)

// processCPU is the user and system CPU time the process has used, for
// telling a fetch that waits from one that runs (ahead.waited).
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
