//go:build cgo

package main

/*
#include <stdint.h>
*/
import "C"

import (
	"os"
	"runtime"
	"sync"

	"github.com/sluicedata/sluice/stream"
)

// The library's Go runtime runs one P (GOMAXPROCS) more than the cores its
// decoding is sized for: the caller's thread's. A thread that calls into
// Go (every sluice_next) runs Go code on a P, and the goroutine it waits
// as is locked to that thread, so its wake hands it a P and parks the P
// until the OS runs the thread. Sized to the cores alone, that P is a
// decoder's: traces of the bench's sequential numeric pass in Python had
// one decoder running alone 26-28 ms a pass against 14-15 ms with the
// extra P, and the Go API's own pass (its consumer a goroutine that needs
// no hand-off) 9 ms. The defaults that follow the cores (stream.Limits'
// ReadConcurrency and TransformConcurrency, a mix's Concurrency) are given
// the cores, not GOMAXPROCS. GOMAXPROCS set in the environment is taken as
// it is, and is the cores.
var (
	procsMu sync.Mutex
	cores   = initProcs()
)

func initProcs() int {
	n := runtime.GOMAXPROCS(0)
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(n + 1)
	}
	return n
}

// decodeCores is the cores a dataset or mix opened now is sized for.
func decodeCores() int {
	procsMu.Lock()
	defer procsMu.Unlock()
	return cores
}

// sizeLimits fills in the limits left at zero with their defaults on the
// cores the library decodes on (not GOMAXPROCS, one more).
func sizeLimits(l *stream.Limits) { *l = l.WithDefaults(decodeCores()) }

// sizeMix does the same for a mix's options.
func sizeMix(o *stream.MixOptions) { *o = o.WithDefaults(decodeCores()) }

// sluice_set_max_procs sizes the library to n cores (n < 1 leaves it as
// it is) and returns the cores it was sized for in *prev: the decoders
// that datasets opened from here on run by default, with GOMAXPROCS, the
// threads that run Go code at once, one more for the caller's thread (see
// cores). The Python package calls it in each DataLoader worker before it
// opens a dataset, so that K workers of one host share its cores rather
// than each sizing its decoders to all of them.
//
//export sluice_set_max_procs
func sluice_set_max_procs(n C.int64_t, prev *C.int64_t) (e *C.char) {
	defer guard(&e)
	*prev = C.int64_t(setCores(int(n)))
	return nil
}

// setCores sizes the library to n cores where n >= 1 (GOMAXPROCS n+1) and
// returns the cores it was sized for.
func setCores(n int) (prev int) {
	procsMu.Lock()
	defer procsMu.Unlock()
	prev = cores
	if n >= 1 {
		cores = n
		runtime.GOMAXPROCS(n + 1)
	}
	return prev
}
