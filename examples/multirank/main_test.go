package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/examples/exampledata"
)

// The program on one machine: a local directory as the bucket, started
// twice as two ranks of a job, one after the other (a rank waits for rank
// 0's plan, so rank 0 goes first). Every row of the epoch is trained on
// once. internal/testkit/e2e runs it as many processes on an S3 server, killed
// and restarted.
func TestTwoRanksOnFiles(t *testing.T) {
	dir := t.TempDir()
	spec := exampledata.Spec{Files: 3, RowsPerFile: 1000, RowGroupRows: 250}
	if err := exampledata.Write(filepath.Join(dir, "data"), spec); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "ckpt"), 0o755); err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	for rank := range 2 {
		t.Setenv("RANK", string(rune('0'+rank)))
		t.Setenv("WORLD_SIZE", "2")
		c := config{data: filepath.Join(dir, "data"), store: "file://" + filepath.Join(dir, "ckpt"), run: "exp", logDir: logs,
			numSplits: 4, batchSize: 64, every: 3, epochs: 1}
		if err := train(context.Background(), c); err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
	}
	seen := make([]int, spec.Rows())
	for rank := range 2 {
		f, err := os.Open(filepath.Join(logs, "0-rank-"+string(rune('0'+rank))+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var l logLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
			for _, id := range l.IDs {
				seen[id]++
			}
		}
		f.Close()
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("row %d trained on %d times", id, n)
		}
	}
}
