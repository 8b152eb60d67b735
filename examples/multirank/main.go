// Multirank is one process of a training job that a launcher starts many
// times: torchrun, srun, mpirun or a Kubernetes indexed Job. It takes its
// rank from the launcher's environment (stream.RankFromEnv), shares one plan
// with the other ranks (stream.PlanStore) and saves its data position into a
// checkpoint store in a bucket, so the job resumes after a crash, at any
// world size that divides --num-splits.
//
//	RANK=0 WORLD_SIZE=2 multirank --data s3://b/data/ --store 's3://b?prefix=ckpt/' --run exp1 &
//	RANK=1 WORLD_SIZE=2 multirank --data s3://b/data/ --store 's3://b?prefix=ckpt/' --run exp1
//
// The checkpoints live under the store's prefix, as <run>/<step>/..., and the
// plan beside them as <run>/plan.json. With --log DIR each process appends,
// before every save, the ids it trained on since the previous save to
// DIR/<attempt>-rank-<rank>.jsonl, after a first line with the step it
// resumed from: the multi-process test reads them back
// to check that every row of every epoch was trained on exactly once.
//
// Checkpoints are numbered per start of the job and per epoch
// (attempt×10⁷ + epoch×10⁵ + batches of the epoch), and every rank also saves
// at the end of each epoch: a job resumed mid-epoch at another world size may
// give its ranks unequal rests of that epoch, so a rank with more batches
// saves steps that one with fewer never reaches, and the end-of-epoch step is
// one they all save. The attempt (--attempt, a number that grows with each
// start, such as torchrun's TORCHELASTIC_RESTART_COUNT) is also the start's
// incarnation (stream.Checkpointer.Incarnation): the store never completes a
// step from ranks of two starts.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"gocloud.dev/blob"

	"github.com/sluicedata/sluice/checkpoint"
	_ "github.com/sluicedata/sluice/storage/azure"
	_ "github.com/sluicedata/sluice/storage/gcs"
	_ "github.com/sluicedata/sluice/storage/s3"
	"github.com/sluicedata/sluice/stream"
)

// epochSteps separates the epochs' step numbers; endOfEpoch is the step of
// an epoch's last save.
const (
	epochSteps   = 100_000
	endOfEpoch   = epochSteps - 1
	attemptSteps = 100 * epochSteps
)

type config struct {
	data, store, run, logDir, launcher  string
	numSplits, batchSize, every, epochs int
	worldSize                           int
	attempt                             int64
	stepDelay                           time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.data, "data", "", "URL of the dataset (required)")
	flag.StringVar(&c.store, "store", "", "bucket URL of the checkpoint store; the shared plan lives there too (required)")
	flag.StringVar(&c.run, "run", "", "name of the run in the store (required)")
	flag.StringVar(&c.logDir, "log", "", "directory for the ids trained on (default: none)")
	flag.Int64Var(&c.attempt, "attempt", 0, "number of this start of the job, larger than the last start's")
	flag.StringVar(&c.launcher, "launcher", "", "read only this launcher's variables (torchrun, slurm, openmpi, kubernetes)")
	flag.IntVar(&c.worldSize, "world-size", 0, "world size, for a Kubernetes indexed Job (its completions)")
	flag.IntVar(&c.numSplits, "num-splits", 24, "splits per epoch: a multiple of every world size the job runs at")
	flag.IntVar(&c.batchSize, "batch-size", 32, "rows per batch")
	flag.IntVar(&c.every, "every", 5, "save every this many steps")
	flag.IntVar(&c.epochs, "epochs", 2, "epochs to train")
	flag.DurationVar(&c.stepDelay, "step-time", 0, "time a training step takes")
	flag.Parse()
	if c.data == "" || c.store == "" || c.run == "" || c.epochs > 99 || c.attempt < 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := train(context.Background(), c); err != nil {
		log.Fatal(err)
	}
}

func train(ctx context.Context, c config) error {
	where, err := stream.RankFromEnv(stream.LaunchOptions{WorldSize: c.worldSize, Launcher: c.launcher})
	if errors.Is(err, stream.ErrNoLauncher) {
		where = stream.Placement{Rank: 0, WorldSize: 1} // started by hand: the whole job
	} else if err != nil {
		return err
	}
	bucket, err := blob.OpenBucket(ctx, c.store)
	if err != nil {
		return err
	}
	defer bucket.Close()
	store, err := checkpoint.OpenBucketStore(ctx, bucket, "")
	if err != nil {
		return err
	}
	defer store.Close()

	ds, err := stream.Open(ctx, stream.Options{
		URLs:          []string{c.data},
		Columns:       []string{"id"},
		BatchSize:     c.batchSize,
		Shuffle:       true,
		Seed:          7,
		NumSplits:     c.numSplits,
		DropRemainder: true,
		Rank:          where.Rank,
		WorldSize:     where.WorldSize,
		PlanStore:     &stream.PlanStore{Bucket: bucket, Key: c.run + "/plan.json"},
	})
	if err != nil {
		return err
	}
	defer ds.Close()
	ck := stream.NewCheckpointer(ds, store, c.run, 0)
	// The launcher's name for this start where it has one (a torchrun or
	// Slurm restart), else the attempt this start was given.
	ck.Incarnation = where.Incarnation
	if ck.Incarnation == "" {
		ck.Incarnation = fmt.Sprintf("attempt-%d", c.attempt)
	}
	step, err := ck.Resume(ctx)
	if err != nil {
		return err
	}
	var logw *bufio.Writer
	if c.logDir != "" {
		f, err := os.OpenFile(filepath.Join(c.logDir, fmt.Sprintf("%d-rank-%d.jsonl", c.attempt, where.Rank)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		logw = bufio.NewWriter(f)
		// The step resumed from comes first: the ids logged later count only
		// up to the step the next start resumes from.
		line, _ := json.Marshal(logLine{Resumed: &step, Rank: where.Rank})
		logw.Write(append(line, '\n'))
		if err := logw.Flush(); err != nil {
			return err
		}
	}
	// taken counts the batches of the current epoch that the job (each
	// rank alike) had taken at the resumed step.
	base := c.attempt * attemptSteps
	if step >= base+attemptSteps {
		return fmt.Errorf("resumed step %d is of a later start than --attempt %d", step, c.attempt)
	}
	taken := step % epochSteps
	if taken == endOfEpoch {
		taken = 0
	}
	var ids []int64
	// save logs the ids trained on since the last save, then saves: a
	// state in the store always has its ids in the log, while ids logged
	// for a step that never completed were trained on by a job that died.
	save := func(step int64) error {
		if logw != nil {
			line, _ := json.Marshal(logLine{Step: step, Rank: where.Rank, IDs: ids})
			logw.Write(append(line, '\n'))
			if err := logw.Flush(); err != nil {
				return err
			}
		}
		ids = ids[:0]
		return ck.Save(ctx, step)
	}
	for e := ds.Epoch(); e < int64(c.epochs); e = ds.Epoch() {
		for batch, err := range ds.Batches(ctx) {
			if err != nil {
				return err
			}
			ids = append(ids, batch.Column(0).(*array.Int64).Int64Values()...)
			time.Sleep(c.stepDelay) // the model's forward and backward pass
			taken++
			if taken%int64(c.every) == 0 {
				if err := save(base + e*epochSteps + taken); err != nil {
					return err
				}
			}
		}
		if err := save(base + e*epochSteps + endOfEpoch); err != nil {
			return err
		}
		taken = 0
	}
	return nil
}

// logLine is one save's worth of trained ids.
type logLine struct {
	Resumed *int64  `json:"resumed,omitempty"` // only in a start's first line
	Step    int64   `json:"step,omitempty"`
	Rank    int     `json:"rank"`
	IDs     []int64 `json:"ids,omitempty"`
}
