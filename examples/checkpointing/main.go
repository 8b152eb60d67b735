// Checkpointing shows the training-loop helper: a job saves its data
// position into an embedded pebble store every 50 steps, "crashes" partway,
// and a restarted job resumes from the latest complete step in one call,
// with no row repeated or skipped.
//
//	go run ./examples/checkpointing
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/checkpoint/pebblestore"
	"github.com/sluicedata/sluice/examples/exampledata"
	"github.com/sluicedata/sluice/stream"
)

// dataset is what the example writes.
var dataset = exampledata.Spec{Files: 4, RowsPerFile: 50_000, RowGroupRows: 4096}

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sluice-checkpointing-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	spec := dataset
	if err := exampledata.Write(filepath.Join(dir, "data"), spec); err != nil {
		return err
	}
	opts := stream.Options{URLs: []string{filepath.Join(dir, "data")}, Columns: []string{"id"}, Shuffle: true, Seed: 7, NumSplits: 4}

	// The first job takes 130 steps and dies; it saved at steps 50 and 100.
	first, _, err := train(ctx, opts, filepath.Join(dir, "ckpt"), 130)
	if err != nil {
		return err
	}
	// The restarted job resumes at step 100: the rows of steps 101..130
	// come again, as the model's weights saved at step 100 never saw them.
	second, last, err := train(ctx, opts, filepath.Join(dir, "ckpt"), -1)
	if err != nil {
		return err
	}
	seen := make([]bool, spec.Rows())
	for step, ids := range first {
		if step > 100 {
			continue // lost with the crash
		}
		for _, id := range ids {
			seen[id] = true
		}
	}
	for _, ids := range second {
		for _, id := range ids {
			if seen[id] {
				return fmt.Errorf("row %d came twice", id)
			}
			seen[id] = true
		}
	}
	for id, ok := range seen {
		if !ok {
			return fmt.Errorf("row %d never came", id)
		}
	}
	fmt.Printf("the restarted job finished the epoch at step %d: every row of the epoch exactly once across the crash\n", last)
	return nil
}

// train runs a job: open the dataset and the store, resume, and take up to
// maxSteps batches (the rest of the epoch if negative), saving every 50
// steps. It returns the ids each step took and the last step.
func train(ctx context.Context, opts stream.Options, storeDir string, maxSteps int64) (map[int64][]int64, int64, error) {
	ds, err := stream.Open(ctx, opts)
	if err != nil {
		return nil, 0, err
	}
	defer ds.Close()
	store, err := pebblestore.Open(storeDir, pebblestore.Options{})
	if err != nil {
		return nil, 0, err
	}
	defer store.Close()

	ck := stream.NewCheckpointer(ds, store, "example-run", 50)
	ck.Keep = 3 // keep the newest three complete steps
	step, err := ck.Resume(ctx)
	if err != nil {
		return nil, 0, err
	}
	fmt.Printf("job starts at step %d (epoch %d)\n", step, ds.Epoch())
	start, epoch := step, ds.Epoch()
	taken := map[int64][]int64{}
	for batch, err := range ds.Batches(ctx) {
		if err != nil {
			return nil, step, err
		}
		step++
		taken[step] = append([]int64(nil), batch.Column(0).(*array.Int64).Int64Values()...)
		if err := ck.Step(ctx, step); err != nil {
			return nil, step, err
		}
		if maxSteps >= 0 && step-start == maxSteps {
			fmt.Printf("job dies at step %d\n", step)
			return taken, step, nil
		}
	}
	fmt.Printf("job finished epoch %d at step %d\n", epoch, step)
	return taken, step, ck.Save(ctx, step)
}
