package stream

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	// The value matrix's datasets are written once for the package's tests
	// (matrix.Write) and removed when they end.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		vc.RemoveShared()
		os.Exit(code)
	}))
}

// smallSpec is a dataset of many small row groups, so that splits, chunks
// and windows all have several of everything.
var smallSpec = synth.Spec{Files: 8, RowsPerFile: 3000, RowGroupRows: 250, Seed: 7}

func writeDataset(t testing.TB, spec synth.Spec) string {
	t.Helper()
	dir := t.TempDir()
	if err := synth.WriteDir(dir, spec); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkedOptions returns options over dir with a checked allocator that the
// test verifies is empty at cleanup.
func checkedOptions(t testing.TB, dir string) Options {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return Options{
		URLs:          []string{dir},
		Columns:       []string{"id", "label"},
		BatchSize:     100,
		ShuffleWindow: 2000,
		Seed:          42,
		Allocator:     mem,
	}
}

func open(t testing.TB, o Options) *Dataset {
	t.Helper()
	ds, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	return ds
}

// taken is one batch as the consumer saw it: its ids and the split it came
// from (found from the state, whose cursor for that split moved).
type taken struct {
	split int
	ids   []int64
}

// consume takes up to limit batches (all if limit < 0) from ds's current
// position and returns them with the state after the last one.
func consume(t testing.TB, ds *Dataset, limit int) ([]taken, State) {
	t.Helper()
	var out []taken
	prev := ds.StateDict()
	if limit == 0 {
		return nil, prev
	}
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		st := ds.StateDict()
		moved := -1
		for s := range st.Cursors {
			if st.Cursors[s] != prev.Cursors[s] {
				moved = s
			}
		}
		prev = st
		if valueData(b.Schema()) {
			// The value harness's data: every value its row's.
			if _, err := vc.Batch(b, nil); err != nil {
				t.Fatal(err)
			}
		}
		ids := slices.Clone(b.Column(0).(*array.Int64).Int64Values())
		out = append(out, taken{split: moved, ids: ids})
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, ds.StateDict()
}

// valueData reports whether every column of s is one of the value
// harness's (internal/testkit/valuecheck), so that consume checks every value.
func valueData(s *arrow.Schema) bool {
	for _, f := range s.Fields() {
		if _, ok := vc.ByName(f.Name); !ok {
			return false
		}
	}
	return s.NumFields() > 1
}

// bySplit concatenates the ids each split delivered, in order.
func bySplit(bs []taken, into map[int][]int64) map[int][]int64 {
	if into == nil {
		into = map[int][]int64{}
	}
	for _, b := range bs {
		into[b.split] = append(into[b.split], b.ids...)
	}
	return into
}

// exactlyOnce checks that ids hold every id of [0, n) once.
func exactlyOnce(t testing.TB, ids []int64, n int64) {
	t.Helper()
	exactlyOnceOf(t, ids, vc.IDs(n))
}

// exactlyOnceOf checks that ids hold every id of want once, and no other.
func exactlyOnceOf(t testing.TB, ids, want []int64) {
	t.Helper()
	once := vc.NewOnce()
	once.Add(ids)
	if err := once.Exactly(want); err != nil {
		t.Fatal(err)
	}
}

func allIDs(bs []taken) []int64 {
	var out []int64
	for _, b := range bs {
		out = append(out, b.ids...)
	}
	return out
}

// resumeAcross runs one epoch of base (NumSplits set) at each world size of
// worlds in turn: every rank takes 1 to maxBatches batches (the ranks of the
// last world take the rest), the ranks' states merge, and the next world
// resumes from the merge. It fails where a split's rows differ from the
// uninterrupted run's, and returns every id taken, for the caller's
// exactly-once check.
func resumeAcross(t *testing.T, base Options, worlds []int, maxBatches int, r *rand.Rand) []int64 {
	t.Helper()
	want := bySplit(first(consume(t, open(t, base), -1)), nil)
	got := map[int][]int64{}
	var all []int64
	var merged *State
	for i, world := range worlds {
		last := i == len(worlds)-1
		var states []State
		for rank := range world {
			o := base
			o.WorldSize, o.Rank = world, rank
			ds := open(t, o)
			if merged != nil {
				if err := ds.LoadStateDict(*merged); err != nil {
					t.Fatal(err)
				}
			}
			limit := 1 + r.IntN(maxBatches)
			if last {
				limit = -1
			}
			bs, st := consume(t, ds, limit)
			bySplit(bs, got)
			all = append(all, allIDs(bs)...)
			states = append(states, st)
		}
		if last {
			break
		}
		m, err := checkpoint.Merge(states...)
		if err != nil {
			t.Fatal(err)
		}
		merged = &m
	}
	for s := range base.NumSplits {
		if !slices.Equal(want[s], got[s]) {
			t.Fatalf("worlds %v: split %d differs from the uninterrupted run", worlds, s)
		}
	}
	return all
}

// decodeSlots is the decode slots the mix's lanes share.
func (m *Mixed) decodeSlots() int { return m.eng.DecodeSlots() }
