// Package duckdb runs DuckDB as a reference engine for differential tests:
// sluice reads a file, DuckDB reads the same file, and a test compares the
// two. DuckDB runs in a Node.js process (bench/peers/sql.mjs over the
// @duckdb/node-api package that bench/peers/setup.sh installs), so the
// module needs no cgo and no DuckDB build of its own.
package duckdb

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// ErrNotInstalled is returned by Start when node or the DuckDB package is
// missing.
var ErrNotInstalled = errors.New("duckdb: not installed (run: bash bench/peers/setup.sh)")

// Column is a result column: its name and DuckDB type ("BIGINT",
// "DECIMAL(10,2)", "STRUCT(...)").
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Result is a query's whole result. Values are as @duckdb/node-api turns
// them into JSON: numbers for small integers and floats (json.Number),
// strings for BIGINT, HUGEINT and DECIMAL (exact), ISO text for dates and
// timestamps (TIMESTAMPTZ in UTC, "+00"), "\xFF"-escaped text for BLOB,
// arrays for lists, objects for structs, null for NULL.
type Result struct {
	Columns []Column `json:"columns"`
	Rows    [][]any  `json:"rows"`
	Error   string   `json:"error"`
}

// DB is one DuckDB process with one in-memory database. Queries run one at
// a time; DB is safe for concurrent use.
type DB struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *json.Decoder
	stderr strings.Builder
}

// Start starts DuckDB. It looks for bench/peers (with its node_modules)
// above the working directory, as tests run from their package folder.
func Start(ctx context.Context) (*DB, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("%w: no node on PATH", ErrNotInstalled)
	}
	peers, err := findPeers()
	if err != nil {
		return nil, err
	}
	db := &DB{cmd: exec.CommandContext(ctx, node, "sql.mjs")}
	db.cmd.Dir = peers
	db.cmd.Stderr = &db.stderr
	if db.stdin, err = db.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := db.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := db.cmd.Start(); err != nil {
		return nil, fmt.Errorf("duckdb: starting node: %w", err)
	}
	dec := json.NewDecoder(bufio.NewReaderSize(stdout, 1<<20))
	dec.UseNumber()
	db.out = dec
	return db, nil
}

// findPeers returns the bench/peers folder of the module the working
// directory is in, if its DuckDB package is installed.
func findPeers() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			peers := filepath.Join(dir, "bench", "peers")
			if _, err := os.Stat(filepath.Join(peers, "node_modules", "@duckdb", "node-api")); err != nil {
				return "", fmt.Errorf("%w: %s has no node_modules/@duckdb/node-api", ErrNotInstalled, peers)
			}
			return peers, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: no go.mod above the working directory", ErrNotInstalled)
		}
		dir = parent
	}
}

// Query runs sql and returns its whole result; a failed query is an error
// holding DuckDB's message.
func (db *DB) Query(sql string) (*Result, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	req, err := json.Marshal(map[string]string{"sql": sql})
	if err != nil {
		return nil, err
	}
	if _, err := db.stdin.Write(append(req, '\n')); err != nil {
		return nil, fmt.Errorf("duckdb: process gone: %w (stderr: %s)", err, db.stderr.String())
	}
	var res Result
	if err := db.out.Decode(&res); err != nil {
		return nil, fmt.Errorf("duckdb: reading result: %w (stderr: %s)", err, db.stderr.String())
	}
	if res.Error != "" {
		return nil, errors.New(res.Error)
	}
	return &res, nil
}

// Close ends the process.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.stdin.Close()
	return db.cmd.Wait()
}

// Quote makes a SQL string literal of s (a path, a value).
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Required reports whether the environment asks for DuckDB's tests to run
// rather than be skipped (.ci/run sets SLUICE_REQUIRE_DUCKDB=1).
func Required() bool { return os.Getenv("SLUICE_REQUIRE_DUCKDB") == "1" }
