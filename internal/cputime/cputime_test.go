package cputime

import (
	"runtime"
	"testing"
	"time"
)

// Work shows in the reading, and the reading never goes back: a goroutine
// that spins sees the process's CPU time grow by 20 ms long before 10 s
// have passed, however loaded the machine.
func TestProcessCountsWork(t *testing.T) {
	before, ok := Process()
	if !ok {
		if runtime.GOOS != "windows" && runtime.GOOS != "plan9" && runtime.GOOS != "js" && runtime.GOOS != "wasip1" {
			t.Fatalf("no CPU time on %s", runtime.GOOS)
		}
		t.Skipf("no CPU time on %s", runtime.GOOS)
	}
	const want = 20 * time.Millisecond
	start, last, x := time.Now(), before, 0
	for {
		for range 1 << 16 {
			x++
		}
		now, _ := Process()
		if now < last {
			t.Fatalf("CPU time went back from %v to %v", last, now)
		}
		last = now
		if now-before >= want {
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("spun for %v, CPU time grew %v, want %v (x %d)", time.Since(start), now-before, want, x)
		}
	}
}
