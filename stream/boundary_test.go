package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"gocloud.dev/blob/memblob"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
)

// These tests save the ranks of a job at any step of any rank, the steps
// where a rank's epoch ends among them (its state taken in the loop after
// its last batch, or after its loop, at the start of the next epoch, or
// further on in the next epoch), merge them through a store, and resume at
// another world size: every split's rows of both epochs come once, in the
// order of an uninterrupted run. Ranks hold splits of unequal rows, so they
// finish their epochs at different steps, as in a real job.

// epochBatch is a batch's ids with the epoch and split it came from.
type epochBatch struct {
	epoch int64
	split int
	ids   []int64
}

// movedSplit is the split whose position differs between two states of one
// rank: the split a batch taken between them came from.
func movedSplit(t testing.TB, before, after State) int {
	t.Helper()
	for s := range after.Cursors {
		if after.Cursors[s] != before.Cursors[s] || after.SplitEpoch(s) != before.SplitEpoch(s) {
			return s
		}
	}
	t.Fatal("a batch moved no split's cursor")
	return -1
}

// advance takes k batches from ds (k < 0: no limit), across epochs, and
// returns the state after the k-th, taken in the loop body; with finish,
// it goes on to the end of that batch's epoch and returns the state after
// the loop (at the start of the next). It stops early, returning the state
// then, once ds reaches epoch until.
func advance(t testing.TB, ds *Dataset, k int, finish bool, until int64, out *[]epochBatch) State {
	t.Helper()
	if k < 0 {
		k, finish = -1, false // never reaches 0
	}
	for ds.Epoch() < until {
		if k == 0 && !finish {
			return ds.StateDict()
		}
		e := ds.Epoch()
		prev := ds.StateDict()
		var inLoop *State
		for b, err := range ds.Batches(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			st := ds.StateDict()
			*out = append(*out, epochBatch{e, movedSplit(t, prev, st), slices.Clone(b.Column(0).(*array.Int64).Int64Values())})
			prev = st
			if k > 0 {
				k--
			}
			if k == 0 && !finish {
				inLoop = &st
				break
			}
		}
		if inLoop != nil {
			return *inLoop
		}
		if k == 0 {
			return ds.StateDict() // after the loop: the next epoch's start
		}
	}
	return ds.StateDict()
}

// bySplitEpoch concatenates each split's ids, by epoch, in delivery order.
func bySplitEpoch(ds []epochBatch, into map[[2]int64][]int64) {
	for _, d := range ds {
		key := [2]int64{d.epoch, int64(d.split)}
		into[key] = append(into[key], d.ids...)
	}
}

// rankBatches estimates the batches rank takes in epoch e: its splits'
// rows from the reference, a batch at a time.
func rankBatches(ref map[[2]int64][]int64, e int64, rank, world, splits, batch int) int {
	n := 0
	for s := rank; s < splits; s += world {
		n += (len(ref[[2]int64{e, int64(s)}]) + batch - 1) / batch
	}
	return n
}

// TestMergeAtEpochBoundary is the property: random datasets (Parquet with
// known counts, Arrow IPC with counts hidden until read and empty windows),
// order options, world sizes and stop points, two epochs from a random
// start.
func TestMergeAtEpochBoundary(t *testing.T) {
	pq := writeDataset(t, synth.Spec{Files: 5, RowsPerFile: 700, RowGroupRows: 90, Seed: 3})
	ipcDir, _ := writeIPC(t, ipcLayout())
	cases := 40
	if testing.Short() {
		cases = 8
	}
	for seed := range uint64(cases) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 27))
			var o Options
			hidden := false
			if r.IntN(3) == 0 {
				hidden = r.IntN(2) == 0
				o = ipcOptions(t, ipcDir, hidden)
			} else {
				o = checkedOptions(t, pq)
				o.ShuffleWindow = 200 + r.IntN(800)
			}
			o.Shuffle = r.IntN(3) > 0
			o.DropRemainder = !hidden && r.IntN(4) == 0 // it needs known counts
			o.NumSplits = []int{2, 4, 6, 8, 12}[r.IntN(5)]
			o.BatchSize = 5 + r.IntN(60)
			o.Epoch = int64(r.IntN(3))
			boundaryCase(t, o, r)
		})
	}
}

func boundaryCase(t *testing.T, o Options, r *rand.Rand) {
	ctx := context.Background()
	e0, until := o.Epoch, o.Epoch+2
	ref := map[[2]int64][]int64{}
	var all []epochBatch
	advance(t, open(t, o), -1, false, until, &all)
	bySplitEpoch(all, ref)

	ws := vc.Divisors(o.NumSplits, o.NumSplits)
	w1, w2 := ws[r.IntN(len(ws))], ws[r.IntN(len(ws))]
	store, err := checkpoint.OpenBucketStore(ctx, memblob.OpenBucket(nil), "")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	got := map[[2]int64][]int64{}
	var stops []string
	for rank := range w1 {
		ro := o
		ro.WorldSize, ro.Rank = w1, rank
		ds := open(t, ro)
		est := rankBatches(ref, e0, rank, w1, o.NumSplits, o.BatchSize)
		var k int
		finish := false
		switch r.IntN(5) {
		case 0: // in the loop, after the epoch's last batch
			k = est
		case 1: // after the loop: the next epoch's start
			k, finish = max(est, 1), true
		case 2: // into the next epoch
			k = est + 1 + r.IntN(rankBatches(ref, e0+1, rank, w1, o.NumSplits, o.BatchSize)+1)
			finish = r.IntN(4) == 0
		default: // anywhere in the epoch
			k = r.IntN(est + 1)
		}
		stops = append(stops, fmt.Sprintf("rank %d: %d batches of about %d (finish %t)", rank, k, est, finish))
		var out []epochBatch
		st := advance(t, ds, k, finish, until, &out)
		bySplitEpoch(out, got)
		st.Incarnation = "job-1"
		if err := store.Save(ctx, "run", 1, rank, st); err != nil {
			t.Fatal(err)
		}
	}
	merged, err := store.LoadStep(ctx, "run", 1)
	if err != nil {
		t.Fatalf("world %d, stops %v: %v", w1, stops, err)
	}
	own := w2 == w1 && r.IntN(2) == 0 // each rank loads its own state
	for rank := range w2 {
		ro := o
		ro.WorldSize, ro.Rank = w2, rank
		ds := open(t, ro)
		st := merged
		if own {
			if st, err = store.Load(ctx, "run", 1, rank); err != nil {
				t.Fatal(err)
			}
		}
		if err := ds.LoadStateDict(st); err != nil {
			t.Fatalf("world %d, stops %v, resumed at world %d: %v", w1, stops, w2, err)
		}
		if ds.Epoch() != st.Epoch {
			// Every rank of the resumed job counts epochs from the same one.
			t.Fatalf("rank %d of %d resumed at epoch %d, the state's is %d", rank, w2, ds.Epoch(), st.Epoch)
		}
		var out []epochBatch
		advance(t, ds, -1, false, until, &out)
		bySplitEpoch(out, got)
	}
	for e := e0; e < until; e++ {
		for s := range o.NumSplits {
			key := [2]int64{e, int64(s)}
			if !slices.Equal(got[key], ref[key]) {
				t.Fatalf("world %d, stops %v, resumed at world %d (own states %t): epoch %d split %d gave %d rows, not the uninterrupted run's %d in its order",
					w1, stops, w2, own, e, s, len(got[key]), len(ref[key]))
			}
		}
	}
	for key := range got {
		if key[0] >= until {
			t.Fatalf("rows of epoch %d were epochBatch", key[0])
		}
	}
}

// mixEpochBatch is a mix's batch with the epoch and mixed split it came
// from.
type mixEpochBatch struct {
	epoch int64
	split int
	rows  []mixRow
}

func movedMixSplit(t testing.TB, before, after MixState) int {
	t.Helper()
	for s := range after.Cursors {
		if after.Cursors[s] != before.Cursors[s] || after.SplitEpoch(s) != before.SplitEpoch(s) {
			return s
		}
	}
	t.Fatal("a batch moved no mixed split's cursor")
	return -1
}

// mixAdvance is advance for a mix.
func mixAdvance(t testing.TB, m *Mixed, k int, finish bool, until int64, out *[]mixEpochBatch) MixState {
	t.Helper()
	if k < 0 {
		k, finish = -1, false
	}
	for m.Epoch() < until {
		if k == 0 && !finish {
			return m.StateDict()
		}
		e := m.Epoch()
		prev := m.StateDict()
		var inLoop *MixState
		for b, err := range m.Batches(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			st := m.StateDict()
			ids, ss := b.Column(0).(*array.Int64), b.Column(1).(*array.String)
			rows := make([]mixRow, b.NumRows())
			for i := range rows {
				rows[i] = mixRow{src: (len(ss.Value(i)) - 8) / 4, id: ids.Value(i)}
			}
			*out = append(*out, mixEpochBatch{e, movedMixSplit(t, prev, st), rows})
			prev = st
			if k > 0 {
				k--
			}
			if k == 0 && !finish {
				inLoop = &st
				break
			}
		}
		if inLoop != nil {
			return *inLoop
		}
		if k == 0 {
			return m.StateDict()
		}
	}
	return m.StateDict()
}

func mixBySplitEpoch(bs []mixEpochBatch, into map[[2]int64][]mixRow) {
	for _, b := range bs {
		key := [2]int64{b.epoch, int64(b.split)}
		into[key] = append(into[key], b.rows...)
	}
}

// TestMixMergeAtEpochBoundary is TestMergeAtEpochBoundary for mixes: mix
// states saved at any step of any rank, the ends of ranks' epochs among
// them, merge through a store and resume at another world size with every
// mixed split's rows of both epochs in the uninterrupted order.
func TestMixMergeAtEpochBoundary(t *testing.T) {
	const splits = 4
	src := mixSources(t, splits, 0.5, 0.3, 0.2)
	cases := 12
	if testing.Short() {
		cases = 3
	}
	ctx := context.Background()
	for seed := range uint64(cases) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 28))
			o := MixOptions{Seed: seed, BatchSize: 40 + r.IntN(200), StartEpoch: int64(r.IntN(2)), NoRepeat: r.IntN(3) == 0}
			e0, until := o.StartEpoch, o.StartEpoch+2
			ref := map[[2]int64][]mixRow{}
			var all []mixEpochBatch
			mixAdvance(t, newMix(t, src, o), -1, false, until, &all)
			mixBySplitEpoch(all, ref)
			batches := func(e int64, rank, world int) int {
				n := 0
				for s := rank; s < splits; s += world {
					n += (len(ref[[2]int64{e, int64(s)}]) + o.BatchSize - 1) / o.BatchSize
				}
				return n
			}

			ws := vc.Divisors(splits, splits)
			w1, w2 := ws[r.IntN(len(ws))], ws[r.IntN(len(ws))]
			store, err := checkpoint.OpenBucketStore(ctx, memblob.OpenBucket(nil), "")
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			got := map[[2]int64][]mixRow{}
			var stops []string
			for rank := range w1 {
				ro := o
				ro.WorldSize, ro.Rank = w1, rank
				est := batches(e0, rank, w1)
				k, finish := r.IntN(est+1), false
				switch r.IntN(4) {
				case 0:
					k = est
				case 1:
					k, finish = max(est, 1), true
				case 2:
					k = est + 1 + r.IntN(batches(e0+1, rank, w1)+1)
				}
				stops = append(stops, fmt.Sprintf("rank %d: %d batches of %d (finish %t)", rank, k, est, finish))
				var out []mixEpochBatch
				st := mixAdvance(t, newMix(t, src, ro), k, finish, until, &out)
				mixBySplitEpoch(out, got)
				st.Incarnation = "job-1"
				if err := store.SaveMix(ctx, "run", 1, rank, st); err != nil {
					t.Fatal(err)
				}
			}
			merged, err := store.LoadMixStep(ctx, "run", 1)
			if err != nil {
				t.Fatalf("world %d, stops %v: %v", w1, stops, err)
			}
			for rank := range w2 {
				ro := o
				ro.WorldSize, ro.Rank = w2, rank
				m := newMix(t, src, ro)
				if err := m.LoadStateDict(merged); err != nil {
					t.Fatalf("world %d, stops %v, resumed at %d: %v", w1, stops, w2, err)
				}
				if m.Epoch() != merged.Epoch {
					t.Fatalf("rank %d of %d resumed at epoch %d, the merge's is %d", rank, w2, m.Epoch(), merged.Epoch)
				}
				var out []mixEpochBatch
				mixAdvance(t, m, -1, false, until, &out)
				mixBySplitEpoch(out, got)
			}
			for e := e0; e < until; e++ {
				for s := range splits {
					key := [2]int64{e, int64(s)}
					if !slices.Equal(got[key], ref[key]) {
						t.Fatalf("world %d, stops %v, resumed at %d: epoch %d mixed split %d gave %d rows, not the uninterrupted %d in order",
							w1, stops, w2, e, s, len(got[key]), len(ref[key]))
					}
				}
			}
		})
	}
}
