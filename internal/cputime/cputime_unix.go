//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process is the user and system CPU time the process has used, all its
// threads together, and true; or 0 and false where the system does not
// say.
func Process() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
