package stream

import (
	"context"
	"time"

	"gocloud.dev/blob"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/stream/internal/planner"
)

// ErrPlanMismatch is wrapped when the plan in a PlanStore was made for
// other files or other options than this rank's: the ranks of one job must
// stream one plan, or their splits would not be the same rows.
var ErrPlanMismatch = planner.ErrMismatch

// PlanStore is where the ranks of a job share one plan, so that one rank
// reads every footer and the others read one object instead: the listing
// each rank makes anyway is checked against the plan's file list, and the
// footers come out of the plan. It is an object in a bucket, often beside
// the job's checkpoints:
//
//	Options.PlanStore = &stream.PlanStore{Bucket: ckptBucket, Key: "run-7/plan.json"}
//
// Rank 0 plans when the object does not exist yet and writes it; other
// ranks wait for it (up to Wait) and plan from it. A later run of the job,
// at any world size, finds it and every rank plans from it. The write is
// conditional (if the object does not exist), so where two ranks plan at
// once (one waited past Wait) the first write wins and the other rank
// checks its plan against the winner's. A plan made for other files (one
// added, removed or changed since) or other options is refused with
// ErrPlanMismatch naming the first difference; delete the object, or use
// another key, to plan the changed data.
//
// The plan carries every file's units (row groups, stripes: their rows,
// bytes and offsets) and what drivers keep in a formats.Cache (Parquet
// footers), so that a rank plans without parsing footers: it parses one
// file's of each schema while it opens, and each file's it reads when it
// first reads it, from the plan (formats.PlanOptions.Known). A footer that
// then says otherwise than the plan (a plan object changed by hand, or
// ranks whose drivers are set otherwise) fails that read with
// formats.ErrNotAsKnown, naming the file. A driver that keeps nothing in
// the cache reads such footers from storage, and text files, whose types
// are settled across files, are inspected on every rank still. Since
// version 2 the object is binary (its header JSON); version 1 objects
// (JSON) are read, with every footer parsed, as before.
type PlanStore struct {
	// Bucket holds the plan. The caller opens and closes it. Required.
	Bucket *blob.Bucket
	// Key is the plan object's key. Required.
	Key string
	// Wait bounds how long a rank other than 0 waits for rank 0 to write
	// the plan before planning itself (and writing it, if still missing):
	// where rank 0 fails to plan, the others find out after Wait, when they
	// fail the same way. The context given to Open bounds it too.
	// Default 5 minutes.
	Wait time.Duration
}

// planDataset plans the dataset (package planner): from the PlanStore's
// plan where there is one, else by reading every footer. Every read of
// the buckets it opens is counted in the metrics.
func planDataset(ctx context.Context, o Options) (planner.Planned, error) {
	po := planner.Options{
		Rank:  o.Rank,
		Table: o.Plan,
		URLs:  o.URLs,
		Plan: formats.PlanOptions{
			Columns:     o.Columns,
			Concurrency: o.Limits.PlanConcurrency,
			Storage:     o.Storage,
			Formats:     o.Formats,
			Format:      o.Format,
			Cache:       o.PlanCache,
		},
		Filter:        o.Filter,
		OnRead:        func(scheme string, n int) { o.Metrics.AddRead(scheme, int64(n), 1) },
		CacheDir:      o.CacheDir,
		CacheBytes:    o.CacheBytes,
		OnCacheHit:    func(n int) { o.Metrics.AddCacheHit(int64(n)) },
		OnCacheEvict:  func(blocks int, bytes int64) { o.Metrics.AddCacheEvictions(int64(blocks), bytes) },
		ChunkBytes:    o.ChunkBytes,
		Order:         o.order(),
		Epoch:         o.Epoch,
		ShuffleMemory: o.ShuffleMemory,
	}
	if ps := o.PlanStore; ps != nil {
		po.Store = &planner.Store{Bucket: ps.Bucket, Key: ps.Key, Wait: ps.Wait}
	}
	return planner.Plan(ctx, po)
}
