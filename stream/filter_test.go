package stream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/filter"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/split"
	"github.com/sluicedata/sluice/storage"
)

// The stream's guarantees over filtered Parquet: counts are unknown behind
// a filter, row groups are pruned, and still every passing row comes
// exactly once, each split's sequence is the same at every world size, and
// a resume is exact.

// filterSpec's ids are sorted across files and row groups of 250 rows, so
// a range of ids prunes row groups; labels are scattered, so a test on
// them filters rows inside the row groups left.
var filterSpec = smallSpec

const filterExpr = "(id < 3000 OR id >= 20000) AND label <> 3"

// filterKeep is filterExpr in Go.
func filterKeep(id int64) bool {
	return (id < 3000 || id >= 20000) && filterSpec.Label(id) != 3
}

func filterOptions(t testing.TB, dir string) Options {
	o := checkedOptions(t, dir)
	o.Columns = []string{"id"} // label is read for the filter, not returned
	o.Filter = filterExpr
	o.BatchSize = 64
	return o
}

func passing() []int64 {
	var want []int64
	for id := range filterSpec.Rows() {
		if filterKeep(id) {
			want = append(want, id)
		}
	}
	return want
}

func TestFilterExactlyOnceAndElastic(t *testing.T) {
	dir := writeDataset(t, filterSpec)
	want := passing()
	const splits = 840 // every world size of 1 to 8 divides it
	for _, shuffle := range []bool{false, true} {
		t.Run(fmt.Sprintf("shuffle=%t", shuffle), func(t *testing.T) {
			vc.Elastic(t, splits, vc.Divisors(splits, 8), want, func(world, rank int) map[int][]int64 {
				o := filterOptions(t, dir)
				o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = shuffle, splits, world, rank
				ds := open(t, o)
				if ds.data.Rows() != -1 {
					t.Fatalf("rows behind a filter: %d, want unknown", ds.data.Rows())
				}
				if ds.Schema().NumFields() != 1 || ds.Schema().Field(0).Name != "id" {
					t.Fatalf("schema %s: the filter's column is returned", ds.Schema())
				}
				bs, _ := consume(t, ds, -1)
				fullBatches(t, bs, o.BatchSize)
				return bySplit(bs, nil)
			})
		})
	}
}

func TestFilterResume(t *testing.T) {
	dir := writeDataset(t, filterSpec)
	r := rand.New(rand.NewPCG(21, 22))
	for _, shuffle := range []bool{false, true} {
		for _, world := range []int{1, 4} {
			rank := r.IntN(world)
			o := filterOptions(t, dir)
			o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = shuffle, 8, world, rank
			full, _ := consume(t, open(t, o), -1)
			for range 5 {
				k := r.IntN(len(full) + 1)
				head, st := consume(t, open(t, o), k)
				second := open(t, o)
				if err := second.LoadStateDict(st); err != nil {
					t.Fatal(err)
				}
				tail, _ := consume(t, second, -1)
				got := append(head, tail...)
				if len(got) != len(full) {
					t.Fatalf("shuffle=%t world=%d: resumed at %d: %d batches, want %d", shuffle, world, k, len(got), len(full))
				}
				for i := range got {
					if got[i].split != full[i].split || !slices.Equal(got[i].ids, full[i].ids) {
						t.Fatalf("shuffle=%t world=%d: resumed at %d: batch %d differs", shuffle, world, k, i)
					}
				}
			}
		}
	}
}

// A rank whose splits hold no passing row finishes its epoch at once, and
// states of ranks in different epochs do not merge: here every split holds
// passing rows.
func TestFilterElasticResume(t *testing.T) {
	dir := writeDataset(t, filterSpec)
	const expr = "label IN (1, 2, 5) OR id < 250"
	var want []int64
	for id := range filterSpec.Rows() {
		if l := filterSpec.Label(id); l == 1 || l == 2 || l == 5 || id < 250 {
			want = append(want, id)
		}
	}
	for _, shuffle := range []bool{false, true} {
		t.Run(fmt.Sprintf("shuffle=%t", shuffle), func(t *testing.T) {
			base := filterOptions(t, dir)
			base.Shuffle, base.NumSplits, base.Filter = shuffle, 8, expr
			all := resumeAcross(t, base, []int{8, 4, 2, 1}, 6, rand.New(rand.NewPCG(23, 24)))
			exactlyOnceOf(t, all, want)
		})
	}
}

// A state saved under one filter does not resume another; the same filter
// written otherwise is the same plan.
func TestFilterFingerprint(t *testing.T) {
	dir := writeDataset(t, filterSpec)
	o := filterOptions(t, dir)
	_, st := consume(t, open(t, o), 3)
	other := o
	other.Filter = "id < 3000"
	if err := open(t, other).LoadStateDict(st); !errors.Is(err, checkpoint.ErrMismatch) {
		t.Errorf("a state of filter %q loaded under %q: %v", o.Filter, other.Filter, err)
	}
	none := o
	none.Filter = ""
	if err := open(t, none).LoadStateDict(st); !errors.Is(err, checkpoint.ErrMismatch) {
		t.Errorf("a filtered state loaded without the filter: %v", err)
	}
	same := o
	same.Filter = `(("id" < 3000) OR "id" >= 20000) AND NOT label = 3`
	if open(t, same).Fingerprint() == open(t, o).Fingerprint() {
		t.Errorf("NOT label = 3 and label <> 3 are not the same text, yet fingerprint alike")
	}
	same.Filter = `("id" < 3000 or "id" >= 20000) and label != 3`
	if err := open(t, same).LoadStateDict(st); err != nil {
		t.Errorf("the same filter written otherwise: %v", err)
	}
	bad := o
	bad.DropRemainder = true
	if _, err := Open(context.Background(), bad); !errors.Is(err, split.ErrUnknownRows) {
		t.Errorf("DropRemainder with a filter: %v, want split.ErrUnknownRows", err)
	}
	bad = o
	bad.Filter = "id >"
	if _, err := Open(context.Background(), bad); !errors.Is(err, filter.ErrSyntax) {
		t.Errorf("a bad filter: %v, want filter.ErrSyntax", err)
	}
	bad.Filter = "nope = 1"
	if _, err := Open(context.Background(), bad); err == nil {
		t.Errorf("a filter on a missing column opened")
	}
}

// TestFilterDifferential streams the dataset twice, filtered and not, and
// checks the filtered rows against a plain Go evaluation of the same
// condition over the unfiltered rows; and that pruning fetched less.
func TestFilterDifferential(t *testing.T) {
	dir := writeDataset(t, filterSpec)
	const expr = "x > 0.5 AND s >= 'm' OR label IN (1, 7) AND NOT (x BETWEEN -0.2 AND 0.2) AND id < 6000"
	keep := func(id, label int64, x float64, s string) bool {
		return x > 0.5 && s >= "m" || (label == 1 || label == 7) && !(x >= -0.2 && x <= 0.2) && id < 6000
	}
	read := func(filter string, cols []string) (ids []int64, rows [][4]any, bytes int64) {
		o := checkedOptions(t, dir)
		o.Columns, o.Filter, o.BatchSize = cols, filter, 500
		var n atomic.Int64
		o.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
			c := storage.NewCounting(b)
			c.OnRead = func(_ string, _ int64, k int) { n.Add(int64(k)) }
			return c
		}
		ds := open(t, o)
		for b, err := range ds.Batches(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			id := b.Column(0).(*array.Int64)
			for i := range int(b.NumRows()) {
				ids = append(ids, id.Value(i))
				if len(cols) == 4 {
					rows = append(rows, [4]any{id.Value(i), b.Column(1).(*array.Int64).Value(i), b.Column(2).(*array.Float64).Value(i), b.Column(3).(*array.String).Value(i)})
				}
			}
		}
		return ids, rows, n.Load()
	}
	_, all, plainBytes := read("", []string{"id", "label", "x", "s"})
	var want []int64
	for _, r := range all {
		if keep(r[0].(int64), r[1].(int64), r[2].(float64), r[3].(string)) {
			want = append(want, r[0].(int64))
		}
	}
	got, _, _ := read(expr, []string{"id"})
	if !slices.Equal(got, want) {
		t.Fatalf("filter %s: %d rows, the Go evaluation keeps %d", expr, len(got), len(want))
	}
	if len(want) == 0 || len(want) == len(all) {
		t.Fatalf("the filter keeps %d of %d rows: it tests nothing", len(want), len(all))
	}
	// Only row groups with ids under 6000 can pass "id < 6000" on the right
	// of the OR; the left one rules nothing out, so all are read. A filter
	// on ids alone prunes.
	_, _, prunedBytes := read("id >= 21000", []string{"id", "label", "x", "s"})
	if prunedBytes*4 > plainBytes {
		t.Errorf("id >= 21000 (an eighth of the rows) fetched %d bytes, the unfiltered stream %d", prunedBytes, plainBytes)
	}
}
