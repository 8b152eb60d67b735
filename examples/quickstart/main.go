// Quickstart writes a small Parquet dataset to a temporary folder, streams
// two shuffled epochs, takes a state in the middle of the second, resumes
// from it in a new dataset, checks that the resume was exact, and prints the
// throughput.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/examples/exampledata"
	"github.com/sluicedata/sluice/stream"
)

// dataset is what the quickstart writes (tests write less).
var dataset = exampledata.Spec{Files: 8, RowsPerFile: 125_000, RowGroupRows: 8192, Seed: 1}

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sluice-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	spec := dataset
	if err := exampledata.Write(dir, spec); err != nil {
		return err
	}
	fmt.Printf("wrote %d rows in %d Parquet files to %s\n", spec.Rows(), spec.Files, dir)

	opts := stream.Options{
		URLs:      []string{"file://" + dir + "/"},
		Columns:   []string{"id", "x", "label"},
		BatchSize: 1024,
		Shuffle:   true,
		Seed:      42,
		NumSplits: 8,
	}
	ds, err := stream.Open(ctx, opts)
	if err != nil {
		return err
	}
	defer ds.Close()

	// Epoch 0: one full shuffled pass.
	start := time.Now()
	ids, _, err := take(ctx, ds, -1, nil)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	if err := exactlyOnce(ids, spec.Rows()); err != nil {
		return fmt.Errorf("epoch 0: %w", err)
	}
	fmt.Printf("epoch 0: %d rows in %.2fs, %.0f rows/s, every row once\n", len(ids), secs, float64(len(ids))/secs)

	// Epoch 1: a full pass, with the state taken halfway through.
	half := int(spec.Rows() / int64(opts.BatchSize) / 2)
	var (
		mid  stream.State
		done int // rows taken when the state was
	)
	start = time.Now()
	epoch1, _, err := take(ctx, ds, -1, func(batch, rows int) {
		if batch == half {
			mid, done = ds.StateDict(), rows
		}
	})
	if err != nil {
		return err
	}
	secs = time.Since(start).Seconds()
	if err := exactlyOnce(epoch1, spec.Rows()); err != nil {
		return fmt.Errorf("epoch 1: %w", err)
	}
	if slices.Equal(ids, epoch1) {
		return fmt.Errorf("epochs 0 and 1 came in the same order")
	}
	fmt.Printf("epoch 1: %d rows in %.2fs, %.0f rows/s, another order\n", len(epoch1), secs, float64(len(epoch1))/secs)

	// Resume epoch 1 from the state in a new dataset, as a restarted job would.
	resumed, err := stream.Open(ctx, opts)
	if err != nil {
		return err
	}
	defer resumed.Close()
	if err := resumed.LoadStateDict(mid); err != nil {
		return err
	}
	rest, _, err := take(ctx, resumed, -1, nil)
	if err != nil {
		return err
	}
	if !slices.Equal(rest, epoch1[done:]) {
		return fmt.Errorf("resume was not exact: %d rows after the state, want %d in the same order", len(rest), len(epoch1)-done)
	}
	fmt.Printf("resumed epoch %d at batch %d in a new dataset: the remaining %d rows match exactly\n", mid.Epoch, half+1, len(rest))
	return nil
}

// take streams the rest of ds's epoch and returns the ids, calling
// after(i, rows) once batch i has been taken, rows in all.
func take(ctx context.Context, ds *stream.Dataset, limit int, after func(batch, rows int)) ([]int64, int, error) {
	var ids []int64
	n := 0
	for batch, err := range ds.Batches(ctx) {
		if err != nil {
			return nil, n, err
		}
		ids = append(ids, batch.Column(0).(*array.Int64).Int64Values()...)
		if after != nil {
			after(n, len(ids))
		}
		n++
		if n == limit {
			break
		}
	}
	return ids, n, nil
}

func exactlyOnce(ids []int64, rows int64) error {
	seen := make([]bool, rows)
	for _, id := range ids {
		if id < 0 || id >= rows || seen[id] {
			return fmt.Errorf("row %d delivered twice or out of range", id)
		}
		seen[id] = true
	}
	if int64(len(ids)) != rows {
		return fmt.Errorf("%d rows delivered, want %d", len(ids), rows)
	}
	return nil
}
