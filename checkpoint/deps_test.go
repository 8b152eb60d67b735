package checkpoint_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestLibraryLinksNoPebble keeps pebble in package pebblestore: a program
// that streams, or keeps its checkpoints in a bucket, must not link pebble
// nor the Prometheus client that pebble links.
func TestLibraryLinksNoPebble(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go tool is not on PATH (%v): cannot list what stream links", err)
	}
	const mod = "github.com/sluicedata/sluice/"
	out, err := exec.Command(goTool, "list", "-deps", mod+"stream", mod+"checkpoint").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	banned := []string{"github.com/cockroachdb/pebble", "github.com/prometheus/client_golang"}
	n := 0
	for pkg := range strings.FieldsSeq(string(out)) {
		n++
		for _, b := range banned {
			if pkg == b || strings.HasPrefix(pkg, b+"/") {
				t.Errorf("the library links %s", pkg)
			}
		}
	}
	// A listing this short lost its packages somewhere, and would pass.
	if n < 50 {
		t.Fatalf("go list -deps listed %d packages: %q", n, out)
	}
}
