package stream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/checkpoint"
)

// consumed is what one consumer took: its batches' ids and sizes, and its
// state after each batch.
type consumed struct {
	ids     []int64
	batches []int
	states  []State
}

// drain takes up to limit batches (all of the epoch if limit < 0) from ds,
// calling each(k) before taking the k-th (from 0); it runs on any goroutine
// and reports failures as errors.
func drain(ds *Dataset, limit int, each func(k int)) (consumed, error) {
	var c consumed
	if limit == 0 {
		return c, nil
	}
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			return c, err
		}
		c.ids = append(c.ids, b.Column(0).(*array.Int64).Int64Values()...)
		c.batches = append(c.batches, int(b.NumRows()))
		c.states = append(c.states, ds.StateDict())
		if each != nil {
			each(len(c.batches))
		}
		if limit > 0 && len(c.batches) == limit {
			break
		}
	}
	return c, nil
}

// drainAll runs every consumer on its own goroutine to the end of the
// epoch (or limit batches) and returns what each took.
func drainAll(t *testing.T, cs []*Dataset, limit int) []consumed {
	t.Helper()
	out := make([]consumed, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { out[i], errs[i] = drain(c, limit, nil) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

func splitOf(t *testing.T, ds *Dataset, n int, equal bool) []*Dataset {
	t.Helper()
	consumers := ds.Consumers
	if equal {
		consumers = ds.EqualConsumers
	}
	cs, err := consumers(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	return cs
}

func TestStreamingSplitExactlyOnce(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	total := int64(smallSpec.Files * smallSpec.RowsPerFile)
	for _, shuffle := range []bool{false, true} {
		var all []int64
		for rank := range 2 {
			o := checkedOptions(t, dir)
			o.Shuffle, o.Rank, o.WorldSize, o.NumSplits = shuffle, rank, 2, 12
			ref := open(t, o)
			want, _ := consume(t, ref, -1)
			cs := splitOf(t, open(t, o), 3, false)
			got := drainAll(t, cs, -1)
			var rankIDs []int64
			for i, c := range got {
				rankIDs = append(rankIDs, c.ids...)
				// Consumer i is rank rank+2i of 6: the same rows as a
				// dataset opened so.
				o6 := o
				o6.Rank, o6.WorldSize = rank+2*i, 6
				alone, _ := consume(t, open(t, o6), -1)
				if !slices.Equal(c.ids, allIDs(alone)) {
					t.Fatalf("shuffle %v rank %d consumer %d: rows differ from rank %d of 6", shuffle, rank, i, rank+2*i)
				}
			}
			// Together the rank's rows, and nothing else.
			slices.Sort(rankIDs)
			wantIDs := allIDs(want)
			slices.Sort(wantIDs)
			if !slices.Equal(rankIDs, wantIDs) {
				t.Fatalf("shuffle %v rank %d: consumers took %d rows, the rank has %d", shuffle, rank, len(rankIDs), len(wantIDs))
			}
			all = append(all, rankIDs...)
			// Every consumer moved on to the next epoch on its own.
			for i, c := range cs {
				if e := c.Epoch(); e != 1 {
					t.Fatalf("consumer %d is at epoch %d after its epoch, want 1", i, e)
				}
			}
		}
		exactlyOnce(t, all, total)
	}
}

func TestStreamingSplitEqual(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	o := checkedOptions(t, dir)
	// 24,000 rows in 8 splits of 3,000; 97 rows a batch does not divide them.
	o.Shuffle, o.NumSplits, o.DropRemainder, o.BatchSize = true, 8, true, 97
	for _, n := range []int{1, 2, 4, 8} {
		got := drainAll(t, splitOf(t, open(t, o), n, true), -1)
		for i, c := range got[1:] {
			if !slices.Equal(c.batches, got[0].batches) {
				t.Fatalf("n %d: consumer %d took batches of %v rows, consumer 0 %v", n, i+1, c.batches, got[0].batches)
			}
		}
		if len(got[0].batches) == 0 {
			t.Fatalf("n %d: no batches", n)
		}
	}
	// Rows that do not divide: equal is refused, not approximated.
	o.DropRemainder = false
	_, err := open(t, o).EqualConsumers(2)
	if err == nil || !strings.Contains(err.Error(), "DropRemainder") {
		t.Fatalf("equal without DropRemainder: got %v", err)
	}
}

// TestStreamingSplitIndependent holds one consumer still after its first
// batch while the others run: they must finish their whole epoch meanwhile,
// however long the held one waits (Ray's consumers stall each other).
func TestStreamingSplitIndependent(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	o := checkedOptions(t, dir)
	o.NumSplits, o.Limits.PrefetchBatches = 8, 2
	cs := splitOf(t, open(t, o), 4, false)
	release := make(chan struct{})
	held := make(chan struct{})
	var slow consumed
	var slowErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		slow, slowErr = drain(cs[0], -1, func(k int) {
			if k == 1 {
				close(held)
				<-release
			}
		})
	})
	<-held
	fast := drainAll(t, cs[1:], -1)
	// The others finished their epochs while consumer 0 held its first batch.
	for i, c := range fast {
		if len(c.ids) == 0 || cs[i+1].Epoch() != 1 {
			t.Fatalf("consumer %d took %d rows and is at epoch %d while consumer 0 was held", i+1, len(c.ids), cs[i+1].Epoch())
		}
	}
	if st := cs[0].StateDict(); st.Epoch != 0 {
		t.Fatalf("held consumer moved to epoch %d", st.Epoch)
	}
	close(release)
	wg.Wait()
	if slowErr != nil {
		t.Fatal(slowErr)
	}
	all := slow.ids
	for _, c := range fast {
		all = append(all, c.ids...)
	}
	exactlyOnce(t, all, int64(smallSpec.Files*smallSpec.RowsPerFile))
}

// TestStreamingSplitResume stops every consumer of every rank part way, at
// different points, and resumes the job at another world size and n: from
// the merge of all consumers' states, and from the merge of each rank's
// joined state.
func TestStreamingSplitResume(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	total := int64(smallSpec.Files * smallSpec.RowsPerFile)
	for _, join := range []bool{false, true} {
		o := checkedOptions(t, dir)
		o.Shuffle, o.NumSplits, o.WorldSize = true, 24, 2
		var before []int64
		var consumerStates, rankStates []State
		for rank := range 2 {
			o.Rank = rank
			cs := splitOf(t, open(t, o), 3, false)
			var states []State
			for i, c := range cs {
				got, err := drain(c, 3+4*i+rank, nil)
				if err != nil {
					t.Fatal(err)
				}
				before = append(before, got.ids...)
				states = append(states, c.StateDict())
			}
			consumerStates = append(consumerStates, states...)
			slices.Reverse(states) // any order
			joined, err := JoinConsumerStates(states...)
			if err != nil {
				t.Fatal(err)
			}
			if joined.Rank != rank || joined.WorldSize != 2 {
				t.Fatalf("joined state is rank %d of %d, want %d of 2", joined.Rank, joined.WorldSize, rank)
			}
			rankStates = append(rankStates, joined)
		}
		var merged State
		var err error
		if join {
			merged, err = checkpoint.Merge(rankStates...)
		} else {
			merged, err = checkpoint.Merge(consumerStates...)
		}
		if err != nil {
			t.Fatal(err)
		}
		after := slices.Clone(before)
		o.WorldSize = 3
		for rank := range 3 {
			o.Rank = rank
			ds := open(t, o)
			if err := ds.LoadStateDict(merged); err != nil {
				t.Fatal(err)
			}
			for _, c := range drainAll(t, splitOf(t, ds, 2, false), -1) {
				after = append(after, c.ids...)
			}
		}
		exactlyOnce(t, after, total)
	}
}

func TestStreamingSplitJoinedStateLoads(t *testing.T) {
	// A rank's joined state loads into the rank's own dataset, unsplit.
	dir := writeDataset(t, smallSpec)
	o := checkedOptions(t, dir)
	o.NumSplits = 8
	cs := splitOf(t, open(t, o), 4, false)
	var ids []int64
	var states []State
	for i, c := range cs {
		got, err := drain(c, i+1, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got.ids...)
		states = append(states, c.StateDict())
	}
	joined, err := JoinConsumerStates(states...)
	if err != nil {
		t.Fatal(err)
	}
	ds := open(t, o)
	if err := ds.LoadStateDict(joined); err != nil {
		t.Fatal(err)
	}
	rest, _ := consume(t, ds, -1)
	exactlyOnce(t, append(ids, allIDs(rest)...), int64(smallSpec.Files*smallSpec.RowsPerFile))
}

func TestStreamingSplitErrors(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	o := checkedOptions(t, dir)
	o.NumSplits, o.WorldSize, o.Rank = 8, 2, 1
	ds := open(t, o)
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "at least 1"}, {3, "NumSplits 8 is not a multiple of 3 consumers × WorldSize 2"}} {
		if _, err := ds.Consumers(tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("n %d: got %v, want %q", tc.n, err, tc.want)
		}
	}
	cs := splitOf(t, ds, 2, false)
	// The parent's position is the consumers' now.
	if _, err := ds.Consumers(2); !errors.Is(err, ErrBusy) {
		t.Fatalf("second split: got %v, want ErrBusy", err)
	}
	for _, err := range ds.Batches(context.Background()) {
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("parent iterated: got %v, want ErrBusy", err)
		}
	}
	if err := ds.SetEpoch(1); !errors.Is(err, ErrBusy) {
		t.Fatalf("parent SetEpoch: got %v, want ErrBusy", err)
	}

	a, b := cs[0].StateDict(), cs[1].StateDict()
	for _, tc := range []struct {
		name   string
		states []State
		want   string
	}{
		{"none", nil, "no states"},
		{"twice", []State{a, a}, "appears twice"},
		{"not a divisor", []State{a, b, a}, "field world_size"},
		{"merged", []State{func() State {
			m, _ := checkpoint.Merge(a.Clone(), b.Clone(), rankState(a, 0), rankState(a, 2))
			return m
		}()}, "merged state"},
		{"another rank's consumer", []State{a, rankState(a, 0)}, "field rank"},
		{"another incarnation", []State{a, func() State { s := b.Clone(); s.Incarnation = "job-2"; return s }()}, "field incarnation"},
		{"another order", []State{a, func() State { s := b.Clone(); s.Seed++; s.Fingerprint = s.OrderFingerprint(); return s }()}, "field seed"},
	} {
		_, err := JoinConsumerStates(tc.states...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	// A consumer whose epoch ended joins one still in it: each split keeps
	// its consumer's epoch.
	later := rankState(b, b.Rank)
	later.Epoch = a.Epoch + 1
	j, err := JoinConsumerStates(a, later)
	if err != nil {
		t.Fatal(err)
	}
	for s := range j.Cursors {
		if j.Owns(s) && j.SplitEpoch(s) != []State{a, later}[s/2%2].Epoch {
			t.Fatalf("joined split %d at epoch %d (epochs %v)", s, j.SplitEpoch(s), j.Epochs)
		}
	}
}

// rankState is st as rank r of its world would have taken it at the start.
func rankState(st State, r int) State {
	s := st.Clone()
	s.Rank = r
	clear(s.Cursors)
	return s
}

// A consumer that served Take gives its cache of decoded units back when it
// closes: the checked allocator of checkedOptions finds nothing left.
func TestStreamingSplitTakeReleases(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	o := checkedOptions(t, dir)
	o.Shuffle, o.NumSplits = true, 4
	cs := splitOf(t, open(t, o), 2, false)
	b, err := cs[0].Take(context.Background(), 0, []int64{0, 5, 3})
	if err != nil {
		t.Fatal(err)
	}
	if b.NumRows() != 3 {
		t.Fatalf("took %d rows, want 3", b.NumRows())
	}
	b.Release()
}
