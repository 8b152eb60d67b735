//go:build cgo

package main

/*
#include <stdint.h>
*/
import "C"

import "runtime"

// sluice_set_max_procs sets GOMAXPROCS, the threads that run Go code at
// once, to n (n < 1 leaves it as it is) and returns the previous value in
// *prev. The Python package calls it in each DataLoader worker before it
// opens a dataset, so that K workers of one host share its cores rather
// than each sizing its decoders to all of them (stream.Options' defaults
// follow GOMAXPROCS as it is when a dataset opens).
//
//export sluice_set_max_procs
func sluice_set_max_procs(n C.int64_t, prev *C.int64_t) (e *C.char) {
	defer guard(&e)
	if n < 1 {
		*prev = C.int64_t(runtime.GOMAXPROCS(0))
		return nil
	}
	*prev = C.int64_t(runtime.GOMAXPROCS(int(n)))
	return nil
}
