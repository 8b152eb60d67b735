package stream

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestMixMatchesPlan: row for row over two epochs (passes running across
// them), what a mixed split delivers is what the plan says: at position i
// the row at the offset plan.Mix.Locate names of its source's split order
// in the pass it names, as the source's own TakeSplit reads it.
func TestMixMatchesPlan(t *testing.T) {
	ctx := context.Background()
	for _, noRepeat := range []bool{false, true} {
		src := mixSources(t, 2, 0.45, 0.35, 0.2)
		for rank := range 2 {
			m := newMix(t, src, MixOptions{Seed: 5, BatchSize: 37, Rank: rank, WorldSize: 2, NoRepeat: noRepeat})
			for e := range int64(2) {
				rows := mixRows(t, m, -1)
				if int64(len(rows)) != m.SplitRows(e, rank) {
					t.Fatalf("epoch %d split %d: %d rows, the plan says %d", e, rank, len(rows), m.SplitRows(e, rank))
				}
				// The plan's rows, grouped by source and pass for TakeSplit.
				type key struct {
					src  int
					pass int64
				}
				at := map[key][]int{}
				offsets := map[key][]int64{}
				for i := range rows {
					r, err := m.mix.Locate(e, rank, int64(i))
					if err != nil {
						t.Fatal(err)
					}
					k := key{r.Source, r.Pass}
					at[k] = append(at[k], i)
					offsets[k] = append(offsets[k], r.Offset)
				}
				for k, pos := range at {
					b, err := src[k.src].Dataset.TakeSplit(ctx, k.pass, rank, offsets[k])
					if err != nil {
						t.Fatal(err)
					}
					ids := b.Column(0).(*array.Int64)
					for j, i := range pos {
						if want := (mixRow{k.src, ids.Value(j)}); rows[i] != want {
							b.Release()
							t.Fatalf("noRepeat %t epoch %d split %d position %d: row %+v, the plan says %+v (pass %d offset %d)", noRepeat, e, rank, i, rows[i], want, k.pass, offsets[k][j])
						}
					}
					b.Release()
				}
			}
		}
	}
}
