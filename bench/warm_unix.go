//go:build unix

package main

import (
	"os"
	"strings"
	"syscall"
)

// The harness runs with GODEBUG madvdontneed=0: the Go runtime then hands
// the heap it frees back to the kernel with MADV_FREE, which a later run
// reuses without faulting it in again, instead of MADV_DONTNEED. Between
// two runs the harness collects garbage, probes the floor and runs DuckDB
// in another process, and in that pause the runtime returns the freed heap
// to the kernel; with MADV_DONTNEED the next run, whatever its reader,
// faults every page of its heap in again. On the 2-core reference machine
// (a sandboxed VM, where a fault costs much) a sluice run right after an
// arrow-go probe streamed 25M rows/s where one right after another sluice
// run streamed 35M, and runs after a DuckDB run 29M against 38M without
// it; with MADV_FREE those gaps close to noise. A training job streams
// without such pauses, and DuckDB is measured warm (one untimed query
// first, in its own process), so the harness measures every reader warm.
// Set GODEBUG=madvdontneed=1 to measure them cold.

// runWarm re-executes the harness with madvdontneed=0 added to GODEBUG,
// unless GODEBUG already sets madvdontneed (the runtime reads it only at
// start). It returns only where it does not re-execute.
func runWarm() {
	debug := os.Getenv("GODEBUG")
	if strings.Contains(debug, "madvdontneed=") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return // measured as the runtime's defaults have it
	}
	if debug != "" {
		debug += ","
	}
	env := append(os.Environ(), "GODEBUG="+debug+"madvdontneed=0")
	_ = syscall.Exec(exe, os.Args, env) // returns only if it failed
}
