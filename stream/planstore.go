package stream

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"gocloud.dev/blob"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/stream/internal/engine"
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
// The plan carries what drivers keep in a formats.Cache (Parquet footers);
// a driver that keeps nothing there reads its footers on every rank still.
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
	so := planner.Options{
		Rank:          o.Rank,
		Plan:          o.Plan,
		URLs:          o.URLs,
		Columns:       o.Columns,
		Filter:        o.Filter,
		Concurrency:   o.Limits.PlanConcurrency,
		Storage:       o.Storage,
		Formats:       o.Formats,
		Format:        o.Format,
		Cache:         o.PlanCache,
		OnRead:        func(scheme string, n int) { o.Metrics.AddRead(scheme, int64(n), 1) },
		ChunkBytes:    o.ChunkBytes,
		ShuffleWindow: o.ShuffleWindow,
		ShuffleMemory: o.ShuffleMemory,
	}
	if ps := o.PlanStore; ps != nil {
		so.Store = &planner.Store{Bucket: ps.Bucket, Key: ps.Key, Wait: ps.Wait}
		so.Prepare = func(ctx context.Context, p planner.Planned) error { return findCutPages(ctx, o, p) }
	}
	return planner.Plan(ctx, so)
}

// findCutPages finds, on the rank that writes the shared plan, the pages
// of the units the opening epoch's split boundaries cut where their files
// do not say (Parquet row groups without a page index: their page headers
// are walked to the chunks' ends), so that the walks travel in the plan
// and each cut unit is walked once for the job, not by every rank that
// reads part of it. A walk that fails is left to the read that needs it,
// which walks again and names what is wrong; only a cancelled context
// fails the plan. Later epochs cut other units: those are walked by the
// ranks that read them, as far as their rows, and kept in the plan cache.
func findCutPages(ctx context.Context, o Options, p planner.Planned) error {
	order := o.order()
	order.ShuffleWindow = p.ShuffleWindow
	units, err := engine.CutUnits(p.Data, p.Chunks, order, o.Epoch)
	if err != nil {
		return nil // Open deals the epoch next, and reports it
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(o.Limits.PlanConcurrency, 16))
	for _, u := range units {
		g.Go(func() error {
			_ = p.Data.FindPages(gctx, u.Fragment, u.Unit)
			return gctx.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("stream: finding the pages of cut row groups: %w", err)
	}
	return nil
}
