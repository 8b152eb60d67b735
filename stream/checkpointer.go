package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/sluicedata/sluice/checkpoint"
)

// Checkpointer saves a dataset's state into a checkpoint store as a
// training loop goes, and resumes from the newest complete step. Each rank
// of a job has its own Checkpointer on its own dataset, with the same store
// (pebblestore.Open's on one machine, checkpoint.OpenBucketStore's when ranks
// run on different machines) and run name.
//
//	ck := stream.NewCheckpointer(ds, store, "run-7", 500)
//	step, err := ck.Resume(ctx) // 0 on a fresh start
//	for batch, err := range ds.Batches(ctx) {
//		train(batch)
//		step++
//		if err := ck.Step(ctx, step); err != nil { ... } // saves every 500 steps
//	}
//
// Save the model at the same steps: a state says which rows the loop has
// taken, so it belongs with the weights those rows trained.
//
// Any rank may save at any step, also where ranks are in different epochs
// (one whose epoch ended is in the next while another finishes the last):
// the step's states merge (checkpoint.Merge).
type Checkpointer struct {
	ds    *Dataset
	store checkpoint.Store
	run   string
	every int64
	// Keep, if positive, deletes all but the newest Keep complete steps
	// after each save (rank 0 only, so ranks do not race to delete).
	Keep int
	// Incarnation names this start of the job in every state saved
	// (checkpoint.State.Incarnation). A store completes a step only with
	// every rank's state of one incarnation, so a step that a start which
	// died had half saved is never completed by the next start's states,
	// even where a rank of the next start saves it before another has
	// resumed (Resume's clean-up of a dead start's steps is per rank).
	//
	// It must be the same on every rank of one start of the job and differ
	// from every other start's: the launcher's name for the start, which
	// RankFromEnv reads (Placement.Incarnation: torchrun's run id and
	// restart count, Slurm's job, step and restart count, Open MPI's job
	// id), or a value rank 0 makes and broadcasts (NewIncarnation). Up to
	// checkpoint.MaxIncarnation bytes of printable ASCII, no spaces.
	//
	// NewCheckpointer sets a random one (NewIncarnation) where the dataset
	// is the whole job (WorldSize 1). With more ranks it cannot know one,
	// and leaves it ""; states without an incarnation complete steps among
	// themselves, as before incarnations, guarded by Resume's clean-up
	// alone.
	Incarnation string
}

// NewCheckpointer saves ds's state into store under run every `every` steps
// (0: only when Save is called).
func NewCheckpointer(ds *Dataset, store checkpoint.Store, run string, every int) *Checkpointer {
	c := &Checkpointer{ds: ds, store: store, run: run, every: int64(every)}
	if ds.opts.WorldSize == 1 {
		c.Incarnation = NewIncarnation()
	}
	return c
}

// NewIncarnation returns a random incarnation (32 hexadecimal digits): what
// rank 0 of a job makes at its start and sends to the other ranks, to set
// as every rank's Checkpointer.Incarnation.
func NewIncarnation() string {
	var b [16]byte
	rand.Read(b[:]) // crypto/rand's Read does not fail
	return hex.EncodeToString(b[:])
}

// Step tells the checkpointer that training step `step` is done; it saves
// when step is a multiple of the interval.
func (c *Checkpointer) Step(ctx context.Context, step int64) error {
	if c.every <= 0 || step%c.every != 0 {
		return nil
	}
	return c.Save(ctx, step)
}

// Save stores the dataset's state for this rank at step, now.
func (c *Checkpointer) Save(ctx context.Context, step int64) error {
	st := c.ds.StateDict()
	st.Incarnation = c.Incarnation
	if err := c.store.Save(ctx, c.run, step, st.Rank, st); err != nil {
		return fmt.Errorf("stream: checkpoint run %q step %d rank %d: %w", c.run, step, st.Rank, err)
	}
	if c.Keep > 0 && st.Rank == 0 {
		if err := c.store.Retain(ctx, c.run, c.Keep); err != nil {
			return fmt.Errorf("stream: checkpoint run %q retention: %w", c.run, err)
		}
	}
	return nil
}

// Resume moves the dataset to the newest complete step of the run and
// returns that step, or 0 and no error if the run has none. It then deletes
// what this rank saved at later steps (Store.Abandon): those are a dead
// start's, and left there they could complete a step together with this
// start's states. Call it once, before the first save. At the world
// size the step was saved with, each rank loads its own state (so even the
// round-robin position resumes); at another world size it loads the merge of
// all ranks' states, as it does where the dataset has EqualBatches and the
// rank's state cannot give its count of batches left (saved without
// EqualBatches or with another BatchSize, or with splits in a later epoch).
// An error from loading this rank's state is returned, joined with the
// merge's error where the merge was tried and failed too.
func (c *Checkpointer) Resume(ctx context.Context) (int64, error) {
	rank, world := c.ds.opts.Rank, c.ds.opts.WorldSize
	step, err := c.store.Latest(ctx, c.run)
	if errors.Is(err, checkpoint.ErrNotFound) {
		if err := c.store.Abandon(ctx, c.run, rank, -1); err != nil {
			return 0, fmt.Errorf("stream: resume run %q: %w", c.run, err)
		}
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stream: resume run %q: %w", c.run, err)
	}
	st, err := c.store.Load(ctx, c.run, step, rank)
	o := c.ds.opts
	switch {
	case err == nil && st.WorldSize == world && (!o.EqualBatches || st.BatchSize == o.BatchSize && st.Epochs == nil):
	case err == nil || errors.Is(err, checkpoint.ErrNotFound):
		// The step was saved at another world size, where this rank has no
		// state or one that speaks for other splits than it owns now; or,
		// with EqualBatches, without the count of batches left that only
		// every rank's cursors give again.
		merged, mergeErr := c.store.LoadStep(ctx, c.run, step)
		if mergeErr != nil {
			return 0, fmt.Errorf("stream: resume run %q step %d: %w", c.run, step, errors.Join(err, mergeErr))
		}
		st = merged
	default:
		// The merge is no way round this: it reads the same state, and where
		// it got past a passing failure it would resume without this rank's
		// round-robin position, so not exactly where the job stopped.
		return 0, fmt.Errorf("stream: resume run %q step %d: %w", c.run, step, err)
	}
	if err := c.ds.LoadStateDict(st); err != nil {
		return 0, fmt.Errorf("stream: resume run %q step %d: %w", c.run, step, err)
	}
	if err := c.store.Abandon(ctx, c.run, rank, step); err != nil {
		return 0, fmt.Errorf("stream: resume run %q step %d: %w", c.run, step, err)
	}
	return step, nil
}
