package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicedata/sluice/checkpoint"
)

// MixCheckpointer is Checkpointer for a mix: it saves the mix's state into
// a checkpoint store as a training loop goes, and resumes from the newest
// complete step, at the world size the step was saved with or at another
// (the merge of all ranks' states). Each rank has its own, on its own mix,
// with the same store and run name; the run holds mix states only.
//
//	ck := stream.NewMixCheckpointer(mix, store, "run-7", 500)
//	step, err := ck.Resume(ctx) // 0 on a fresh start
//	for batch, err := range mix.Batches(ctx) {
//		train(batch)
//		step++
//		if err := ck.Step(ctx, step); err != nil { ... }
//	}
type MixCheckpointer struct {
	mix   *Mixed
	store checkpoint.MixStore
	run   string
	every int64
	// Keep, if positive, deletes all but the newest Keep complete steps
	// after each save (rank 0 only).
	Keep int
	// Incarnation names this start of the job in every state saved, as
	// Checkpointer.Incarnation does: the same on every rank of a start,
	// different for each start; NewMixCheckpointer sets a random one where
	// the mix is the whole job (WorldSize 1).
	Incarnation string
}

// NewMixCheckpointer saves m's state into store under run every `every`
// steps (0: only when Save is called). Every store of package checkpoint,
// pebblestore's included, is a checkpoint.MixStore.
func NewMixCheckpointer(m *Mixed, store checkpoint.MixStore, run string, every int) *MixCheckpointer {
	c := &MixCheckpointer{mix: m, store: store, run: run, every: int64(every)}
	if m.o.WorldSize == 1 {
		c.Incarnation = NewIncarnation()
	}
	return c
}

// Step tells the checkpointer that training step `step` is done; it saves
// when step is a multiple of the interval.
func (c *MixCheckpointer) Step(ctx context.Context, step int64) error {
	if c.every <= 0 || step%c.every != 0 {
		return nil
	}
	return c.Save(ctx, step)
}

// Save stores the mix's state for this rank at step, now.
func (c *MixCheckpointer) Save(ctx context.Context, step int64) error {
	st := c.mix.StateDict()
	st.Incarnation = c.Incarnation
	if err := c.store.SaveMix(ctx, c.run, step, st.Rank, st); err != nil {
		return fmt.Errorf("stream: mix checkpoint run %q step %d rank %d: %w", c.run, step, st.Rank, err)
	}
	if c.Keep > 0 && st.Rank == 0 {
		if err := c.store.RetainMix(ctx, c.run, c.Keep); err != nil {
			return fmt.Errorf("stream: mix checkpoint run %q retention: %w", c.run, err)
		}
	}
	return nil
}

// Resume moves the mix to the newest complete step of the run and returns
// that step, or 0 and no error if the run has none. At the world size the
// step was saved with each rank loads its own state; at another, the merge
// of all ranks' states. Like Checkpointer.Resume, it then deletes what this
// rank saved at later steps (a dead start's), and is called once, before
// the first save.
func (c *MixCheckpointer) Resume(ctx context.Context) (int64, error) {
	rank, world := c.mix.o.Rank, c.mix.o.WorldSize
	step, err := c.store.LatestMix(ctx, c.run)
	if errors.Is(err, checkpoint.ErrNotFound) {
		if err := c.store.Abandon(ctx, c.run, rank, -1); err != nil {
			return 0, fmt.Errorf("stream: resume mix run %q: %w", c.run, err)
		}
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stream: resume mix run %q: %w", c.run, err)
	}
	st, err := c.store.LoadMix(ctx, c.run, step, rank)
	switch {
	case err == nil && st.WorldSize == world:
	case err == nil || errors.Is(err, checkpoint.ErrNotFound):
		merged, mergeErr := c.store.LoadMixStep(ctx, c.run, step)
		if mergeErr != nil {
			return 0, fmt.Errorf("stream: resume mix run %q step %d: %w", c.run, step, errors.Join(err, mergeErr))
		}
		st = merged
	default:
		return 0, fmt.Errorf("stream: resume mix run %q step %d: %w", c.run, step, err)
	}
	if err := c.mix.LoadStateDict(st); err != nil {
		return 0, fmt.Errorf("stream: resume mix run %q step %d: %w", c.run, step, err)
	}
	if err := c.store.Abandon(ctx, c.run, rank, step); err != nil {
		return 0, fmt.Errorf("stream: resume mix run %q step %d: %w", c.run, step, err)
	}
	return step, nil
}
