package cputime

import (
	"runtime"
	"testing"
	"time"
)

// A process that spins for a while has used at least most of that time,
// and the reading never goes back.
func TestProcessCountsWork(t *testing.T) {
	before, ok := Process()
	if !ok {
		if runtime.GOOS != "windows" && runtime.GOOS != "plan9" && runtime.GOOS != "js" && runtime.GOOS != "wasip1" {
			t.Fatalf("no CPU time on %s", runtime.GOOS)
		}
		t.Skipf("no CPU time on %s", runtime.GOOS)
	}
	spin := 50 * time.Millisecond
	x := 0
	for start := time.Now(); time.Since(start) < spin; {
		x++
	}
	after, _ := Process()
	if after < before {
		t.Fatalf("CPU time went back from %v to %v", before, after)
	}
	// Half the spin: a busy machine may run other work on the core.
	if after-before < spin/2 {
		t.Fatalf("spun %v on one goroutine, CPU time grew %v (x %d)", spin, after-before, x)
	}
}
