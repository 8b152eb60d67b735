//go:build cgo

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/examples/exampledata"
	"github.com/sluicedata/sluice/internal/testkit/faults"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openJSON(t *testing.T, o map[string]any) int64 {
	t.Helper()
	b, _ := json.Marshal(o)
	id, err := openDataset(b)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func writeData(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "d")
	if err := exampledata.Write(dir, exampledata.Spec{Files: 2, RowsPerFile: 2000, RowGroupRows: 250, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPullStateAndStop: the state counts exactly the batches handed out,
// and stopping (a break, Ctrl-C) or closing mid-epoch ends every goroutine
// (goleak checks at the end).
func TestPullStateAndStop(t *testing.T) {
	dir := writeData(t)
	id := openJSON(t, map[string]any{"urls": []string{dir}, "columns": []string{"id"}, "batch_size": 100, "shuffle": true, "num_splits": 2})
	h, err := lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for range 7 {
		b, err := h.next(time.Minute)
		if err != nil || b == nil {
			t.Fatal(b, err)
		}
		got = append(got, b.NumRows())
		b.Release()
	}
	st, err := h.state()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := checkpoint.Decode(st)
	if err != nil {
		t.Fatal(err)
	}
	var taken int64
	for _, c := range dec.Cursors {
		taken += c.Rows
	}
	if taken != 700 {
		t.Fatalf("state counts %d rows after 7 batches of 100", taken)
	}
	h.stopIter()
	b, err := h.next(time.Minute) // starts again after the 7th
	if err != nil || b == nil {
		t.Fatal(b, err)
	}
	b.Release()
	if err := closeHandle(id); err != nil {
		t.Fatal(err)
	}
	if err := closeHandle(id); kindOf(err) != "closed" {
		t.Fatalf("second close: %v (kind %s)", err, kindOf(err))
	}
	if _, err := h.next(time.Second); kindOf(err) != "closed" {
		t.Fatalf("next after close: %v", err)
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, js := range []string{`{"urls":["x"],"batchsize":3}`, `{"urls":["x"],"batch_size":"3"}`, `{"urls":["x"]} {}`, `{"urls":["x"],"delimiter":";;"}`} {
		if _, err := openDataset([]byte(js)); kindOf(err) != "usage" {
			t.Errorf("%s: %v (kind %s), want usage", js, err, kindOf(err))
		}
	}
}

func TestKinds(t *testing.T) {
	dir := writeData(t)
	if _, err := openDataset([]byte(fmt.Sprintf(`{"urls":[%q]}`, filepath.Join(dir, "none")))); kindOf(err) != "not_found" {
		t.Errorf("missing: %v kind %s", err, kindOf(err))
	}
	a := openJSON(t, map[string]any{"urls": []string{dir}, "seed": 1, "shuffle": true})
	b := openJSON(t, map[string]any{"urls": []string{dir}, "seed": 2, "shuffle": true})
	ha, _ := lookup(a)
	hb, _ := lookup(b)
	st, _ := ha.state()
	if err := hb.loadState(st); kindOf(err) != "mismatch" {
		t.Errorf("other seed: %v kind %s", err, kindOf(err))
	}
	if err := hb.loadState([]byte("garbage")); kindOf(err) != "corrupt" {
		t.Errorf("garbage: %v kind %s", err, kindOf(err))
	}
	if _, err := mergeStates([][]byte{[]byte("x")}, false); kindOf(err) != "corrupt" {
		t.Errorf("merge garbage: %v kind %s", err, kindOf(err))
	}
	for _, id := range []int64{a, b} {
		if err := closeHandle(id); err != nil {
			t.Fatal(err)
		}
	}
	if kindOf(panicErr("boom")) != "internal" || kindOf(errors.New("x")) != "error" {
		t.Error("internal and default kinds")
	}
	if kindOf(fmt.Errorf("wrapped: %w", os.ErrNotExist)) != "not_found" {
		t.Error("fs.ErrNotExist is not_found")
	}
}

// TestChangedKind: a file rewritten at the same size after the dataset was
// opened is of kind changed (Python's ChangedError), naming the file.
func TestChangedKind(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.csv")
	if err := os.WriteFile(path, []byte("id\n1\n2\n3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := openJSON(t, map[string]any{"urls": []string{path}})
	h, _ := lookup(id)
	if err := faults.RewriteFile(path, []byte("id\n7\n8\n9\n")); err != nil {
		t.Fatal(err)
	}
	b, err := h.next(time.Minute)
	if b != nil {
		b.Release()
	}
	if kindOf(err) != "changed" || !strings.Contains(err.Error(), path) {
		t.Errorf("rewritten: %v (kind %s), want kind changed naming %s", err, kindOf(err), path)
	}
	if err := closeHandle(id); err != nil {
		t.Fatal(err)
	}
}

// TestRankFromEnv: the environment is the caller's, not the Go runtime's.
func TestRankFromEnv(t *testing.T) {
	b, err := rankFromEnv([]byte(`{"RANK":"3","WORLD_SIZE":"4"}`))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil || p["rank"] != 3.0 || p["world_size"] != 4.0 || p["launcher"] != "torchrun" {
		t.Fatalf("%s %v", b, err)
	}
	if b, err := rankFromEnv([]byte(`{}`)); err != nil || string(b) == "" {
		t.Fatal(err)
	}
	if _, err := rankFromEnv([]byte(`{"RANK":"x","WORLD_SIZE":"4"}`)); kindOf(err) != "usage" {
		t.Fatalf("bad RANK: %v", err)
	}
}

// equal_batches reaches stream.Options.EqualBatches: the state of a rank
// counts the batches every rank has left.
func TestEqualBatchesOption(t *testing.T) {
	dir := writeData(t)
	id := openJSON(t, map[string]any{"urls": []string{dir}, "columns": []string{"id"}, "batch_size": 300, "num_splits": 4, "world_size": 2, "equal_batches": true})
	defer closeHandle(id)
	h, err := lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.state()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := checkpoint.Decode(st)
	if err != nil {
		t.Fatal(err)
	}
	// 4,000 rows in 4 splits of 1,000: 4 batches of 300 each, 8 a rank.
	if dec.BatchSize != 300 || dec.BatchesLeft != 8 {
		t.Fatalf("state counts %d batches of %d left, want 8 of 300", dec.BatchesLeft, dec.BatchSize)
	}
}
