package stream

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/checkpoint/pebblestore"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
)

// EqualBatches over random datasets and jobs: files of random row counts
// (empty batches and files among them), their counts known or found by the
// counting pass (hidden by the driver, or behind a filter), random
// NumSplits, world sizes and batch sizes, and a job that stops every rank at the same random batch
// (data-parallel ranks step together), merges their states and resumes on
// another world size and batch size, twice, then runs the next epoch.
//
// The oracle is the option's definition, checked against runs without it:
// from every position, each rank's batches without the option are counted;
// with it, every rank takes exactly the fewest of those counts, and its
// batches are the first that many of its batches without the option, row
// for row. A rank's own state resumes its rest exactly. No row comes twice
// in an epoch, and the rows left out are the tails of the ranks' sequences.
func TestEqualBatchesProperty(t *testing.T) {
	n := 60
	if testing.Short() {
		n = 12
	}
	for c := range n {
		t.Run(fmt.Sprint(c), func(t *testing.T) { checkEqualCase(t, uint64(c)) })
	}
}

func checkEqualCase(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0xe9a1))
	var layout [][]int
	for range 1 + r.IntN(6) {
		var batches []int
		for range r.IntN(7) {
			batches = append(batches, []int{0, 1, 7, 50, 130, 333, 800}[r.IntN(7)])
		}
		layout = append(layout, batches)
	}
	layout[0] = append(layout[0], 1+r.IntN(200)) // an empty dataset is refused
	dir, total := writeIPC(t, layout)
	splits := []int{1, 2, 4, 6, 6, 8, 12, 12}[r.IntN(8)]
	shuffle, drop := r.IntN(2) == 0, r.IntN(4) == 0
	hide := r.IntN(3) == 0
	var filter string
	if r.IntN(3) == 0 {
		filter = "i32 > 0"
	}
	drop = drop && !hide && filter == "" // it needs counts the plan knows
	var worlds []int
	for w := 1; w <= splits; w++ {
		if splits%w == 0 {
			worlds = append(worlds, w)
		}
	}
	options := func(world, rank, bs int, equal bool) Options {
		o := ipcOptions(t, dir, hide)
		o.Shuffle, o.DropRemainder, o.NumSplits, o.Filter = shuffle, drop, splits, filter
		o.WorldSize, o.Rank, o.BatchSize, o.EqualBatches = world, rank, bs, equal
		o.ChunkBytes = 1 << 10
		o.ShuffleWindow = 200
		return o
	}
	load := func(ds *Dataset, st *State) {
		t.Helper()
		if st != nil {
			if err := ds.LoadStateDict(*st); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen := make([]int, total)
	deliver := func(bs []taken) {
		for _, id := range allIDs(bs) {
			if seen[id]++; seen[id] > 1 {
				t.Fatalf("id %d delivered twice in an epoch", id)
			}
		}
	}
	pickWorld := func() int {
		// World size 1 has nothing to equalize: rarely.
		if w := worlds[r.IntN(len(worlds))]; w > 1 || len(worlds) == 1 || r.IntN(5) == 0 {
			return w
		}
		return worlds[1+r.IntN(len(worlds)-1)]
	}
	var merged *State
	for stretch := range 3 {
		world, bs := pickWorld(), 1+r.IntN(90)
		what := fmt.Sprintf("stretch %d (world %d, batch %d, splits %d, shuffle %t, drop %t, hidden %t, filter %q, layout %v)", stretch, world, bs, splits, shuffle, drop, hide, filter, layout)
		plain := make([][]taken, world)
		fewest := -1
		for rank := range world {
			ds := open(t, options(world, rank, bs, false))
			load(ds, merged)
			plain[rank], _ = consume(t, ds, -1)
			if fewest < 0 || len(plain[rank]) < fewest {
				fewest = len(plain[rank])
			}
		}
		stop := fewest
		switch {
		case stretch == 2:
		case r.IntN(4) == 0:
			stop = r.IntN(fewest + 1) // the ends included
		default:
			stop = fewest/4 + r.IntN(fewest/2+1)
		}
		states := make([]State, world)
		for rank := range world {
			ds := open(t, options(world, rank, bs, true))
			load(ds, merged)
			if left := ds.StateDict().BatchesLeft; left != int64(fewest) {
				t.Fatalf("%s: rank %d counts %d batches left, the fewest of any rank is %d", what, rank, left, fewest)
			}
			got, st := consume(t, ds, stop)
			if stretch == 2 {
				// To the end: nothing more before the next epoch.
				more, _ := consume(t, ds, -1)
				got = append(got, more...)
			}
			if len(got) != stop {
				t.Fatalf("%s: rank %d takes %d batches, every rank should take %d (without the option %d)", what, rank, len(got), stop, len(plain[rank]))
			}
			sameBatches(t, what, rank, got, plain[rank][:stop])
			deliver(got)
			if stretch < 2 {
				if st.BatchesLeft != int64(fewest-stop) || st.BatchSize != bs {
					t.Fatalf("%s: rank %d after %d batches has %d batches of %d left, want %d of %d", what, rank, stop, st.BatchesLeft, st.BatchSize, fewest-stop, bs)
				}
				// The rank's own state resumes the rest of its equal share.
				own := open(t, options(world, rank, bs, true))
				load(own, &st)
				rest, _ := consume(t, own, -1)
				sameBatches(t, what+" resumed from its own state", rank, rest, plain[rank][stop:fewest])
			}
			states[rank] = st
		}
		if stretch == 2 {
			break
		}
		m, err := checkpoint.Merge(states...)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		merged = &m
	}
	// The next epoch, from its start at yet another world size.
	world, bs := pickWorld(), 1+r.IntN(90)
	counts := map[int]bool{}
	for rank := range world {
		o := options(world, rank, bs, true)
		o.Epoch = 1
		got, _ := consume(t, open(t, o), -1)
		counts[len(got)] = true
	}
	if len(counts) != 1 {
		t.Fatalf("epoch 1 at world %d, batch %d: ranks take %v batches", world, bs, counts)
	}
}

// sameBatches checks that got are want, batch for batch and row for row.
func sameBatches(t *testing.T, what string, rank int, got, want []taken) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: rank %d: %d batches, want %d", what, rank, len(got), len(want))
	}
	for i := range got {
		if got[i].split != want[i].split || !slices.Equal(got[i].ids, want[i].ids) {
			t.Fatalf("%s: rank %d batch %d: split %d ids %v, want split %d ids %v", what, rank, i, got[i].split, head(got[i].ids), want[i].split, head(want[i].ids))
		}
	}
}

func head(ids []int64) []int64 { return ids[:min(len(ids), 8)] }

// CSV and JSON, counted by the text driver (text.Options.Count) or by the
// stream's counting pass, filtered or not: every rank takes as many
// batches, no row twice.
func TestEqualBatchesText(t *testing.T) {
	tdir, total := writeText(t)
	const splits, world = 8, 4
	for _, count := range []bool{true, false} {
		for _, filter := range []string{"", "i32 < 0"} {
			counts := map[int]bool{}
			var ids []int64
			for rank := range world {
				o := textOptions(t, tdir, count)
				o.Shuffle, o.NumSplits, o.WorldSize, o.Rank, o.EqualBatches, o.Filter = true, splits, world, rank, true, filter
				got, _ := consume(t, open(t, o), -1)
				counts[len(got)] = true
				ids = append(ids, allIDs(got)...)
			}
			if len(counts) != 1 {
				t.Fatalf("text count %t filter %q: ranks take %v batches", count, filter, counts)
			}
			seen := map[int64]bool{}
			for _, id := range ids {
				if id < 0 || id >= total || seen[id] {
					t.Fatalf("id %d outside [0, %d) or twice", id, total)
				}
				seen[id] = true
			}
		}
	}
}

// The counting pass reads what the plan cannot count once, and a restart
// with the same plan cache reads none of it again.
func TestEqualBatchesCountCached(t *testing.T) {
	dir := writeDataset(t, synth.Spec{Files: 4, RowsPerFile: 1000, RowGroupRows: 250})
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	kv, err := store.KV("plans")
	if err != nil {
		t.Fatal(err)
	}
	opened := func(equal bool, cache bool) (*Dataset, int64) {
		log := &readLog{}
		log.start()
		o := checkedOptions(t, dir)
		o.Filter, o.EqualBatches, o.NumSplits, o.WorldSize = "label < 4", equal, 4, 2
		if cache {
			o.PlanCache = kv
		}
		o.Storage.Wrap = log.wrap
		ds := open(t, o)
		return ds, log.bytes()
	}
	_, footers := opened(false, false)
	_, cold := opened(true, true)
	warm, warmBytes := opened(true, true)
	if cold <= footers || warmBytes != 0 {
		t.Fatalf("bytes read by Open: %d for footers alone, %d counting, %d counted before; want more than the footers, then none", footers, cold, warmBytes)
	}
	var n int64
	for _, s := range warm.Splits() {
		n += s.Rows
	}
	o := checkedOptions(t, dir)
	o.Filter = "label < 4"
	if passed, _ := consume(t, open(t, o), -1); int64(len(allIDs(passed))) != n {
		t.Fatalf("counted %d rows passing the filter, a read passes %d", n, len(allIDs(passed)))
	}
}

// A rank's own state without a count of batches left (taken without the
// option, or counting batches of another size) is refused with the way
// out; the merged state of the same step loads.
func TestEqualBatchesOwnStateWithoutCount(t *testing.T) {
	dir, _ := writeIPC(t, ipcLayout())
	const splits, world = 6, 2
	opts := func(rank, bs int, equal bool) Options {
		o := ipcOptions(t, dir, false)
		o.NumSplits, o.WorldSize, o.Rank, o.BatchSize, o.EqualBatches = splits, world, rank, bs, equal
		return o
	}
	var states []State
	for rank := range world {
		_, st := consume(t, open(t, opts(rank, 40, false)), 3)
		states = append(states, st)
	}
	for _, tc := range []struct {
		st   State
		bs   int
		want string
	}{
		{states[0], 40, "without EqualBatches"},
		{func() State { _, st := consume(t, open(t, opts(0, 40, true)), 3); return st }(), 30, "batches of 40 rows"},
	} {
		err := open(t, opts(0, tc.bs, true)).LoadStateDict(tc.st)
		if !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "checkpoint.Merge") {
			t.Errorf("own state %s: %v", tc.want, err)
		}
	}
	m, err := checkpoint.Merge(states...)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int]bool{}
	for rank := range world {
		ds := open(t, opts(rank, 40, true))
		if err := ds.LoadStateDict(m); err != nil {
			t.Fatal(err)
		}
		got, _ := consume(t, ds, -1)
		counts[len(got)] = true
	}
	if len(counts) != 1 {
		t.Fatalf("ranks resumed from the merged state take %v batches", counts)
	}
}

// The Consumers of every rank are counted as the ranks they
// are to the plan: from a merged state at a new world size, every consumer
// of every rank takes as many batches, without DropRemainder. Split after
// taking a batch, where the other ranks' positions are not known, is
// refused.
func TestEqualBatchesStreamingSplit(t *testing.T) {
	dir, _ := writeIPC(t, ipcLayout())
	const splits = 12
	opts := func(world, rank int) Options {
		o := ipcOptions(t, dir, false)
		o.NumSplits, o.WorldSize, o.Rank, o.BatchSize, o.EqualBatches, o.Shuffle = splits, world, rank, 37, true, true
		return o
	}
	var states []State
	for rank := range 3 {
		_, st := consume(t, open(t, opts(3, rank)), 4)
		states = append(states, st)
	}
	m, err := checkpoint.Merge(states...)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int]bool{}
	for rank := range 2 {
		ds := open(t, opts(2, rank))
		if err := ds.LoadStateDict(m); err != nil {
			t.Fatal(err)
		}
		cs, err := ds.EqualConsumers(3)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			got, _ := consume(t, c, -1)
			counts[len(got)] = true
			c.Close()
		}
	}
	if len(counts) != 1 {
		t.Fatalf("consumers take %v batches", counts)
	}
	ds := open(t, opts(2, 0))
	consume(t, ds, 1)
	if _, err := ds.EqualConsumers(2); err == nil || !strings.Contains(err.Error(), "merged state") {
		t.Fatalf("split after a batch: %v", err)
	}
}

// States at an epoch's boundary (checkpoint.State.Epochs): one rank saves
// in its loop after its last batch (epoch 0, nothing left), one after its
// loop ended (the start of epoch 1), as ranks that step together may. (A
// rank part way into epoch 1 is at another step: its count differs, and
// the merge refuses it.) Their merge resumes on another world size with every rank taking as many
// batches in epoch 0's rest and again in epoch 1, no row twice in an epoch.
func TestEqualBatchesMergeAtBoundary(t *testing.T) {
	dir, _ := writeIPC(t, ipcLayout())
	const splits = 6
	opts := func(world, rank int) Options {
		o := ipcOptions(t, dir, false)
		o.NumSplits, o.WorldSize, o.Rank, o.BatchSize, o.EqualBatches, o.Shuffle = splits, world, rank, 29, true, true
		return o
	}
	seen := map[int64][]int64{} // per epoch
	var states []State
	for rank := range 3 {
		ds := open(t, opts(3, rank))
		left := int(ds.StateDict().BatchesLeft)
		var got []taken
		var st State
		switch rank {
		case 0:
			got, st = consume(t, ds, left) // stops in the loop: still epoch 0
		default:
			got, st = consume(t, ds, -1) // the loop ends: epoch 1
		}
		seen[0] = append(seen[0], allIDs(got)...)
		states = append(states, st)
	}
	further := open(t, opts(3, 2))
	consume(t, further, -1)
	_, st := consume(t, further, 2)
	if _, err := checkpoint.Merge(states[0], states[1], st); err == nil || !strings.Contains(err.Error(), "batches_left") {
		t.Fatalf("merge with a rank two batches further: %v", err)
	}
	m, err := checkpoint.Merge(states...)
	if err != nil {
		t.Fatal(err)
	}
	if m.Epochs == nil {
		t.Fatal("the merge has every split in one epoch")
	}
	for epoch := range int64(2) {
		// The count every rank takes: the fewest batches any rank has
		// without the option.
		fewest := -1
		for rank := range 2 {
			o := opts(2, rank)
			o.EqualBatches = false
			ds := open(t, o)
			if err := ds.LoadStateDict(m); err != nil {
				t.Fatal(err)
			}
			if epoch == 1 {
				consume(t, ds, -1)
			}
			if got, _ := consume(t, ds, -1); fewest < 0 || len(got) < fewest {
				fewest = len(got)
			}
		}
		counts := map[int]bool{}
		for rank := range 2 {
			ds := open(t, opts(2, rank))
			if err := ds.LoadStateDict(m); err != nil {
				t.Fatal(err)
			}
			if epoch == 1 {
				consume(t, ds, -1) // the rest of epoch 0
			}
			if left := ds.StateDict().BatchesLeft; left != int64(fewest) {
				t.Fatalf("epoch %d rank %d counts %d batches left, the fewest of any rank is %d", epoch, rank, left, fewest)
			}
			got, _ := consume(t, ds, -1)
			if ds.Epoch() != epoch+1 {
				t.Fatalf("rank %d is at epoch %d after epoch %d", rank, ds.Epoch(), epoch)
			}
			counts[len(got)] = true
			seen[epoch] = append(seen[epoch], allIDs(got)...)
		}
		if len(counts) != 1 {
			t.Fatalf("epoch %d resumed at world size 2: ranks take %v batches", epoch, counts)
		}
		ids := slices.Clone(seen[epoch])
		slices.Sort(ids)
		if len(slices.Compact(ids)) != len(seen[epoch]) {
			t.Fatalf("epoch %d: a row came twice", epoch)
		}
	}
}

// A rank with no batch makes every rank take none: rank 0 says so in the
// log where other ranks had rows, since their rows are all dropped.
func TestEqualBatchesWarnsWhenNothingIsTaken(t *testing.T) {
	// Two CSV files of one unit each: counts the plan does not know, so
	// splits are dealt whole chunks and two of the eight splits get rows.
	dir := t.TempDir()
	for f := range 2 {
		if err := vc.WriteCSV(filepath.Join(dir, fmt.Sprintf("%d.csv", f)), vc.Pick(textColumns...), int64(f)*300, 300); err != nil {
			t.Fatal(err)
		}
	}
	var logged bytes.Buffer
	o := textOptions(t, dir, false)
	o.Formats, o.ChunkBytes = text.All(text.Options{}), 0 // a unit, and a chunk, a file
	o.NumSplits, o.WorldSize, o.EqualBatches = 8, 4, true
	o.Logger = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ds := open(t, o)
	bs, _ := consume(t, ds, -1)
	if len(bs) != 0 {
		t.Fatalf("%d batches, want none (a rank has no rows)", len(bs))
	}
	if !strings.Contains(logged.String(), "EqualBatches: a rank has no batch left") {
		t.Fatalf("no warning logged: %q", logged.String())
	}
}
