//go:build cgo

package main

import (
	"os"
	"runtime"
	"testing"

	"github.com/sluicedata/sluice/stream"
)

// The caller's thread has a P of its own: GOMAXPROCS is one more than the
// cores the decoders are sized for, and the defaults that follow the cores
// follow those, not GOMAXPROCS.
func TestCallerHasAProcOfItsOwn(t *testing.T) {
	if os.Getenv("GOMAXPROCS") == "" {
		if got, want := runtime.GOMAXPROCS(0), decodeCores()+1; got != want {
			t.Fatalf("GOMAXPROCS at load is %d, want the cores (%d) + 1", got, want)
		}
	}
	was := setCores(3)
	t.Cleanup(func() {
		setCores(was)
		if os.Getenv("GOMAXPROCS") != "" {
			runtime.GOMAXPROCS(was)
		}
	})
	if got := runtime.GOMAXPROCS(0); got != 4 {
		t.Fatalf("GOMAXPROCS after setCores(3) = %d, want 4", got)
	}
	if got := setCores(0); got != 3 {
		t.Fatalf("setCores(0) = %d, want the cores set before, 3", got)
	}
	if got := runtime.GOMAXPROCS(0); got != 4 {
		t.Fatalf("setCores(0) changed GOMAXPROCS to %d", got)
	}
	var l stream.Limits
	sizeLimits(&l)
	if l.ReadConcurrency != 3 || l.TransformConcurrency != 3 {
		t.Fatalf("limits on 3 cores: read %d, transform %d, want 3 and 3", l.ReadConcurrency, l.TransformConcurrency)
	}
	l = stream.Limits{ReadConcurrency: 7, TransformConcurrency: 5}
	sizeLimits(&l)
	if l.ReadConcurrency != 7 || l.TransformConcurrency != 5 {
		t.Fatalf("limits set by the caller changed: read %d, transform %d", l.ReadConcurrency, l.TransformConcurrency)
	}
	setCores(1)
	l = stream.Limits{}
	sizeLimits(&l)
	if l.ReadConcurrency != 2 || l.TransformConcurrency != 1 {
		t.Fatalf("limits on 1 core: read %d, transform %d, want 2 and 1 (stream's defaults on 1 core)", l.ReadConcurrency, l.TransformConcurrency)
	}
	for _, c := range []struct{ cores, want int }{{1, 1}, {7, 1}, {8, 2}, {16, 4}} {
		setCores(c.cores)
		var m stream.MixOptions
		sizeMix(&m)
		if m.Concurrency != c.want {
			t.Fatalf("mix concurrency on %d cores = %d, want %d", c.cores, m.Concurrency, c.want)
		}
		m = stream.MixOptions{Concurrency: 9}
		if sizeMix(&m); m.Concurrency != 9 {
			t.Fatalf("mix concurrency set by the caller changed to %d", m.Concurrency)
		}
	}
}
