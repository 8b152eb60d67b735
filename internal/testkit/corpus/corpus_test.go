package corpus

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// outcome is what Dir did to a test: returned a path, skipped it or failed it.
type outcome struct {
	dir     string
	skipped string
	failed  string
}

// recorder stands in for the test Dir is given: Skip and Fatal end its
// goroutine, as they end a test's.
type recorder struct {
	testing.TB
	out *outcome
}

func (r recorder) Helper() {}
func (r recorder) Skip(args ...any) {
	r.out.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r recorder) Fatal(args ...any) {
	r.out.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

func dirOutcome(t *testing.T) outcome {
	var out outcome
	done := make(chan struct{})
	go func() {
		defer close(done)
		out.dir = Dir(recorder{TB: t, out: &out})
	}()
	<-done
	return out
}

func TestMissingSkipsLocallyAndFailsUnderCI(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "no-such-corpus")
	t.Setenv(Env, gone)
	t.Setenv(RequireEnv, "")
	t.Setenv("CI", "")
	if got := dirOutcome(t); got.skipped == "" || got.failed != "" || !strings.Contains(got.skipped, gone) || !strings.Contains(got.skipped, Env) {
		t.Errorf("missing corpus, locally: %+v, want a skip naming %s and %s", got, gone, Env)
	}
	for _, env := range [][2]string{{RequireEnv, "1"}, {"CI", "true"}} {
		t.Run(env[0], func(t *testing.T) {
			t.Setenv(env[0], env[1])
			if got := dirOutcome(t); got.failed == "" || got.skipped != "" || !strings.Contains(got.failed, env[0]) {
				t.Errorf("missing corpus with %s=%s: %+v, want a failure naming %s", env[0], env[1], got, env[0])
			}
		})
	}
	t.Run("CI=false", func(t *testing.T) {
		t.Setenv("CI", "false")
		if got := dirOutcome(t); got.skipped == "" {
			t.Errorf("missing corpus with CI=false: %+v, want a skip", got)
		}
	})
}

func TestFound(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(Env, dir)
	t.Setenv(RequireEnv, "1")
	if got := dirOutcome(t); got.dir != dir || got.skipped != "" || got.failed != "" {
		t.Errorf("corpus at %s: %+v", dir, got)
	}
	if got, ok := Lookup(t); !ok || got != dir {
		t.Errorf("Lookup: %s, %t; want %s", got, ok, dir)
	}
}

// Without SLUICE_TESTDATA the corpus is beside the repository: this test
// runs in internal/testkit/corpus, three folders below the root.
func TestBesideTheRepository(t *testing.T) {
	t.Setenv(Env, "")
	got, err := find()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "..", "..", "..", "..", "shared", "testdata"); got != filepath.Clean(want) {
		t.Errorf("corpus at %s, want %s", got, want)
	}
}
