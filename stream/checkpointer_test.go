package stream

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/checkpoint/pebblestore"
)

// faultyStore fails Load or LoadStep with the errors it is given and is
// otherwise the store it wraps.
type faultyStore struct {
	checkpoint.Store
	load, loadStep error
}

func (f *faultyStore) Load(ctx context.Context, run string, step int64, rank int) (checkpoint.State, error) {
	if f.load != nil {
		return checkpoint.State{}, f.load
	}
	return f.Store.Load(ctx, run, step, rank)
}

func (f *faultyStore) LoadStep(ctx context.Context, run string, step int64) (checkpoint.State, error) {
	if f.loadStep != nil {
		return checkpoint.State{}, f.loadStep
	}
	return f.Store.LoadStep(ctx, run, step)
}

func TestCheckpointerResume(t *testing.T) {
	ctx := context.Background()
	dir := writeDataset(t, smallSpec)
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	opts := func(world, rank int) Options {
		o := checkedOptions(t, dir)
		o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = true, 8, world, rank
		return o
	}
	// Both ranks of a two-rank job save step 10 a few batches in.
	var saved []State
	for rank := range 2 {
		ds := open(t, opts(2, rank))
		consume(t, ds, 3+rank)
		if err := NewCheckpointer(ds, store, "run", 0).Save(ctx, 10); err != nil {
			t.Fatal(err)
		}
		saved = append(saved, ds.StateDict())
	}
	resume := func(s checkpoint.Store, world, rank int) (*Dataset, int64, error) {
		ds := open(t, opts(world, rank))
		step, err := NewCheckpointer(ds, s, "run", 0).Resume(ctx)
		return ds, step, err
	}

	t.Run("own state", func(t *testing.T) {
		ds, step, err := resume(store, 2, 1)
		if err != nil || step != 10 {
			t.Fatalf("Resume = %d, %v", step, err)
		}
		if got := ds.StateDict(); !reflect.DeepEqual(got, saved[1]) {
			t.Fatalf("resumed at %+v, rank 1 saved %+v", got, saved[1])
		}
	})
	t.Run("another world size", func(t *testing.T) {
		// Rank 3 of four has no state of its own at step 10: the merge is
		// the way, and its absence is no error.
		if _, step, err := resume(store, 4, 3); err != nil || step != 10 {
			t.Fatalf("Resume = %d, %v", step, err)
		}
	})

	t.Run("dead start's later step", func(t *testing.T) {
		// A start that died saved rank 0 of step 20 only. Resuming rank 0
		// from step 10 deletes it, so a new rank 1 saving step 20 does not
		// complete it with the dead start's cursors.
		ds := open(t, opts(2, 0))
		consume(t, ds, 9)
		if err := NewCheckpointer(ds, store, "run", 0).Save(ctx, 20); err != nil {
			t.Fatal(err)
		}
		if _, step, err := resume(store, 2, 0); err != nil || step != 10 {
			t.Fatalf("Resume = %d, %v", step, err)
		}
		if _, err := store.Load(ctx, "run", 20, 0); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Fatalf("the dead start's rank 0 of step 20 is still there: %v", err)
		}
		ds1, _, err := resume(store, 2, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := NewCheckpointer(ds1, store, "run", 0).Save(ctx, 20); err != nil {
			t.Fatal(err)
		}
		if step, err := store.Latest(ctx, "run"); err != nil || step != 10 {
			t.Fatalf("Latest = %d, %v; step 20 holds rank 1 of the new start only", step, err)
		}
		if err := store.Delete(ctx, "run", 20); err != nil {
			t.Fatal(err)
		}
	})

	errDisk := errors.New("disk on fire")
	errMerge := errors.New("merge failed")
	t.Run("load fails", func(t *testing.T) {
		// A merged state would resume without the rank's round-robin
		// position: the failure to read its own is what Resume must say.
		_, _, err := resume(&faultyStore{Store: store, load: errDisk}, 2, 0)
		if !errors.Is(err, errDisk) {
			t.Fatalf("Resume gave %v, want the load's error", err)
		}
	})
	t.Run("load and merge fail", func(t *testing.T) {
		_, _, err := resume(&faultyStore{Store: store, load: errDisk, loadStep: errMerge}, 2, 0)
		if !errors.Is(err, errDisk) {
			t.Fatalf("Resume gave %v, want the load's error", err)
		}
	})
	t.Run("merge fails at another world size", func(t *testing.T) {
		_, _, err := resume(&faultyStore{Store: store, loadStep: errMerge}, 4, 3)
		if !errors.Is(err, errMerge) || !errors.Is(err, checkpoint.ErrNotFound) {
			t.Fatalf("Resume gave %v, want the merge's error and the load's", err)
		}
	})
}

// A run whose saved steps are all damaged fails to resume: starting afresh
// would train from the first batch while the model's weights are at the
// saved step. A run that never finished a step starts afresh.
func TestCheckpointerResumeDamaged(t *testing.T) {
	ctx := context.Background()
	dir := writeDataset(t, smallSpec)
	bucket := memblob.OpenBucket(nil)
	store, err := checkpoint.OpenBucketStore(ctx, bucket, "ckpt/")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ds := open(t, checkedOptions(t, dir))
	ck := NewCheckpointer(ds, store, "run", 0)
	if step, err := ck.Resume(ctx); err != nil || step != 0 {
		t.Fatalf("Resume of a run that never saved = %d, %v; want a fresh start", step, err)
	}
	consume(t, ds, 2)
	if err := ck.Save(ctx, 7); err != nil {
		t.Fatal(err)
	}
	// Damage the only state of the step.
	var key string
	objs, listErr := bucket.List(&blob.ListOptions{Prefix: "ckpt/"}).All(ctx)
	for obj := range objs {
		if strings.HasSuffix(obj.Key, ".state") {
			key = obj.Key
		}
	}
	if err := listErr(); err != nil || key == "" {
		t.Fatalf("no state saved (%v)", err)
	}
	if err := bucket.WriteAll(ctx, key, []byte("not a state"), nil); err != nil {
		t.Fatal(err)
	}
	step, err := NewCheckpointer(open(t, checkedOptions(t, dir)), store, "run", 0).Resume(ctx)
	if err == nil || !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("Resume over a damaged step = %d, %v; want an error wrapping ErrCorrupt", step, err)
	}
}

// TestCheckpointerRestartedJob: start "a" of a two-rank job dies while
// saving step 20 (rank 0 saved it, rank 1 never did). In start "b", rank 1
// resumes and saves step 20 before rank 0 has resumed (so before rank 0's
// Resume could delete a's leftover): the bucket then holds both ranks of
// step 20, of two starts. The store must not offer it, and rank 0 must
// resume from step 10; once rank 0 of b saves step 20 it is b's, whole.
func TestCheckpointerRestartedJob(t *testing.T) {
	ctx := context.Background()
	dir := writeDataset(t, smallSpec)
	store, err := checkpoint.OpenBucketStore(ctx, memblob.OpenBucket(nil), "ckpt/")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	opts := func(rank int) Options {
		o := checkedOptions(t, dir)
		o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = true, 8, 2, rank
		return o
	}
	start := func(rank int, inc string) (*Dataset, *Checkpointer) {
		ds := open(t, opts(rank))
		ck := NewCheckpointer(ds, store, "run", 0)
		if ck.Incarnation != "" {
			t.Fatalf("a rank of two got incarnation %q of its own", ck.Incarnation)
		}
		ck.Incarnation = inc
		return ds, ck
	}
	for rank := range 2 {
		ds, ck := start(rank, "a")
		consume(t, ds, 3)
		if err := ck.Save(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if rank == 0 {
			consume(t, ds, 4)
			if err := ck.Save(ctx, 20); err != nil {
				t.Fatal(err)
			}
		}
	}
	ds1, ck1 := start(1, "b")
	if step, err := ck1.Resume(ctx); err != nil || step != 10 {
		t.Fatalf("rank 1 of b resumed at %d, %v", step, err)
	}
	consume(t, ds1, 4)
	if err := ck1.Save(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if step, err := store.Latest(ctx, "run"); err != nil || step != 10 {
		t.Fatalf("Latest = %d, %v: step 20 holds rank 0 of a and rank 1 of b", step, err)
	}
	ds0, ck0 := start(0, "b")
	if step, err := ck0.Resume(ctx); err != nil || step != 10 {
		t.Fatalf("rank 0 of b resumed at %d, %v", step, err)
	}
	consume(t, ds0, 4)
	if err := ck0.Save(ctx, 20); err != nil {
		t.Fatal(err)
	}
	m, err := store.LoadStep(ctx, "run", 20)
	if err != nil {
		t.Fatal(err)
	}
	want, err := checkpoint.Merge(ds0.StateDict(), ds1.StateDict())
	if err != nil {
		t.Fatal(err)
	}
	if m.Incarnation != "b" || !reflect.DeepEqual(m.Cursors, want.Cursors) {
		t.Fatalf("step 20 merged to %q %+v, b's ranks are at %+v", m.Incarnation, m.Cursors, want.Cursors)
	}
}

// TestCheckpointerIncarnation: a checkpointer of a whole job (one rank)
// names its start with a random incarnation of its own, and its states
// carry it.
func TestCheckpointerIncarnation(t *testing.T) {
	ctx := context.Background()
	ds := open(t, checkedOptions(t, writeDataset(t, smallSpec)))
	store, err := checkpoint.OpenBucketStore(ctx, memblob.OpenBucket(nil), "")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	a, b := NewCheckpointer(ds, store, "run", 0), NewCheckpointer(ds, store, "run", 0)
	if len(a.Incarnation) != 32 || a.Incarnation == b.Incarnation {
		t.Fatalf("incarnations %q and %q", a.Incarnation, b.Incarnation)
	}
	if err := a.Save(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if st, err := store.Load(ctx, "run", 1, 0); err != nil || st.Incarnation != a.Incarnation {
		t.Fatalf("saved state's incarnation %q, %v", st.Incarnation, err)
	}
	a.Incarnation = "two words"
	if err := a.Save(ctx, 2); err == nil || !strings.Contains(err.Error(), "incarnation") {
		t.Fatalf("Save with a bad incarnation: %v", err)
	}
}
