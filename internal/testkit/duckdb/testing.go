package duckdb

import (
	"context"
	"errors"
	"testing"
)

// ForTest starts DuckDB for a test and stops it when the test ends. Where
// DuckDB is not installed the test is skipped with how to install it, unless
// Required says the run must not skip: then it fails.
func ForTest(t testing.TB) *DB {
	t.Helper()
	db, err := Start(context.Background())
	if errors.Is(err, ErrNotInstalled) && !Required() {
		t.Skipf("%v; bash .ci/run installs it and runs this test", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
