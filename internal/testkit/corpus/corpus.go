// Package corpus locates the shared test corpus for tests: files written by
// other tools (Spark, parquet-mr, arrow-cpp, the ORC writers, DuckDB, Iceberg
// tables) that the repository does not hold. They live in shared/testdata
// beside the checkout (../shared/testdata from the repository root), where CI
// puts them, or wherever SLUICE_TESTDATA says.
//
// A developer without the corpus gets its tests skipped, with a message
// saying where it belongs. A CI run must not pass by skipping them: with
// SLUICE_REQUIRE_TESTDATA=1 (.ci/run sets it) or CI set, a missing corpus
// fails the test instead.
package corpus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Env names a corpus elsewhere than ../shared/testdata.
const Env = "SLUICE_TESTDATA"

// RequireEnv, set to 1, makes a missing corpus a failure rather than a skip.
const RequireEnv = "SLUICE_REQUIRE_TESTDATA"

// Dir returns the corpus root, an absolute path. Where the corpus is
// missing it skips tb, or fails it when Required.
func Dir(tb testing.TB) string {
	tb.Helper()
	dir, ok := Lookup(tb)
	if !ok {
		tb.Skip(missing(dir, nil))
	}
	return dir
}

// Lookup is Dir for a test that has work to do without the corpus, such as
// a fuzz target with seeds of its own: where the corpus is missing it
// reports false rather than skip, and still fails tb when Required.
func Lookup(tb testing.TB) (string, bool) {
	tb.Helper()
	dir, err := find()
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(dir); err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s is not a directory", dir)
		}
	}
	if err == nil {
		return dir, true
	}
	if Required() {
		tb.Fatal(missing(dir, err) + " (" + requiredBy() + " makes this a failure)")
	}
	return dir, false
}

// Required reports whether a missing corpus must fail the test:
// SLUICE_REQUIRE_TESTDATA=1, or CI set (as CI services set it).
func Required() bool {
	return os.Getenv(RequireEnv) == "1" || ci()
}

func ci() bool {
	v := os.Getenv("CI")
	return v != "" && v != "0" && v != "false"
}

func requiredBy() string {
	if os.Getenv(RequireEnv) == "1" {
		return RequireEnv + "=1"
	}
	return "CI=" + os.Getenv("CI")
}

func missing(dir string, err error) string {
	msg := "shared test data not found at " + dir
	if dir == "" {
		msg = "shared test data not found"
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		msg += ": " + err.Error()
	}
	return msg + "; put the corpus at ../shared/testdata beside the repository (as CI does; its README lists the sources), or set " + Env + " to where it is"
}

// find returns where the corpus should be: Env if set, else
// ../shared/testdata from the repository root, which is found above the
// working directory (a test runs in its package's folder).
func find() (string, error) {
	if dir := os.Getenv(Env); dir != "" {
		return filepath.Abs(dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(filepath.Dir(dir), "shared", "testdata"), nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}
