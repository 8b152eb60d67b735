package stream

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/formats"
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

// TestMixBreakAndGoOn: breaking out of a mix's loop and ranging again goes
// on where it stopped, lanes and all.
func TestMixBreakAndGoOn(t *testing.T) {
	src := mixSources(t, 2, 0.5, 0.3, 0.2)
	o := MixOptions{Seed: 2, BatchSize: 40}
	whole := mixRows(t, newMix(t, src, o), -1)
	m := newMix(t, src, o)
	var got []mixRow
	for _, n := range []int{1, 4, 9} {
		got = append(got, mixRows(t, m, n)...)
	}
	got = append(got, mixRows(t, m, -1)...)
	if !slices.Equal(got, whole) {
		t.Fatalf("broken off three times: %d rows, not the uninterrupted %d in order", len(got), len(whole))
	}
}

// TestMixSourceError: a source whose file cannot be read ends the mix's
// iteration with an error naming the mix's position, the source and the
// file, and the position stays where the consumer was.
func TestMixSourceError(t *testing.T) {
	src := mixSources(t, 1, 0.5, 0.3, 0.2)
	// Source 1's files shrink after planning: reading a row group fails.
	for _, f := range src[1].Dataset.Files() {
		if err := os.Truncate(strings.TrimPrefix(f.URL, "file://"), 100); err != nil {
			t.Fatal(err)
		}
	}
	m := newMix(t, src, MixOptions{Seed: 2, BatchSize: 40})
	var err error
	n := 0
	for _, e := range m.Batches(context.Background()) {
		if e != nil {
			err = e
			break
		}
		n++
	}
	if err == nil || !strings.Contains(err.Error(), "source 1") {
		t.Fatalf("after %d batches: %v", n, err)
	}
	if !slices.ContainsFunc(src[1].Dataset.Files(), func(f *formats.Fragment) bool { return strings.Contains(err.Error(), f.URL) }) {
		t.Fatalf("the error names none of source 1's files: %v", err)
	}
	if st := m.StateDict(); st.Cursors[0] != int64(n*40) {
		t.Fatalf("after %d batches the state is at %d", n, st.Cursors[0])
	}
}
