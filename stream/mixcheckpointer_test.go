package stream

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/checkpoint/pebblestore"
)

// TestMixCheckpointerResume: a mix saved through the pebble store by the
// ranks of one world size resumes, with no process killed, at the same
// world size row for row, and at other world sizes with the rows an
// uninterrupted run delivers: every row of it, none twice.
func TestMixCheckpointerResume(t *testing.T) {
	ctx := context.Background()
	src := mixSources(t, 4, 0.5, 0.3, 0.2)
	o := func(rank, world int) MixOptions {
		return MixOptions{Seed: 21, BatchSize: 64, Rank: rank, WorldSize: world}
	}
	// The uninterrupted epoch, at each world size.
	whole := map[int][][]mixRow{}
	for _, world := range []int{1, 2, 4} {
		for r := range world {
			whole[world] = append(whole[world], mixRows(t, newMix(t, src, o(r, world)), -1))
		}
	}
	sorted := func(rows ...[]mixRow) []mixRow {
		return slices.SortedFunc(slices.Values(slices.Concat(rows...)), cmpMixRow)
	}
	if !slices.Equal(sorted(whole[2]...), sorted(whole[1]...)) || !slices.Equal(sorted(whole[4]...), sorted(whole[1]...)) {
		t.Fatal("the ranks of world sizes 2 and 4 do not deliver the rows of world size 1")
	}

	for _, tc := range []struct{ from, to int }{{2, 2}, {2, 1}, {1, 4}, {4, 2}} {
		store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		// Nothing saved yet: a fresh start.
		if step, err := NewMixCheckpointer(newMix(t, src, o(0, tc.from)), store, "mix", 0).Resume(ctx); err != nil || step != 0 {
			t.Fatalf("resume of an empty run: %d, %v", step, err)
		}
		// Each rank takes a few batches and saves step 30.
		var before [][]mixRow
		for r := range tc.from {
			m := newMix(t, src, o(r, tc.from))
			before = append(before, mixRows(t, m, 3+2*r))
			ck := NewMixCheckpointer(m, store, "mix", 10)
			if err := ck.Step(ctx, 29); err != nil {
				t.Fatal(err)
			}
			if err := ck.Step(ctx, 30); err != nil {
				t.Fatal(err)
			}
		}
		// A later step with a rank missing is passed over.
		m := newMix(t, src, o(0, tc.from))
		mixRows(t, m, 9)
		if tc.from > 1 {
			if err := NewMixCheckpointer(m, store, "mix", 0).Save(ctx, 40); err != nil {
				t.Fatal(err)
			}
		}
		var after [][]mixRow
		for r := range tc.to {
			m := newMix(t, src, o(r, tc.to))
			step, err := NewMixCheckpointer(m, store, "mix", 0).Resume(ctx)
			if err != nil || step != 30 {
				t.Fatalf("%d -> %d ranks: resume rank %d: step %d, %v", tc.from, tc.to, r, step, err)
			}
			after = append(after, mixRows(t, m, -1))
		}
		if tc.from == tc.to {
			for r := range tc.to {
				if got := append(slices.Clone(before[r]), after[r]...); !slices.Equal(got, whole[tc.from][r]) {
					t.Fatalf("%d ranks resumed at the same world size: rank %d's rows differ from the uninterrupted run", tc.from, r)
				}
			}
		}
		if got, want := sorted(append(before, after...)...), sorted(whole[1]...); !slices.Equal(got, want) {
			t.Fatalf("%d -> %d ranks: %d rows before and after the resume, not the %d of an uninterrupted run", tc.from, tc.to, len(got), len(want))
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMixCheckpointerIncarnation: a mix's checkpointer stamps its
// incarnation on what it saves, a random one of its own where the mix is
// the whole job, and a step that two starts saved a rank each of is not
// complete.
func TestMixCheckpointerIncarnation(t *testing.T) {
	ctx := context.Background()
	src := mixSources(t, 2, 0.5, 0.3, 0.2)
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	one := NewMixCheckpointer(newMix(t, src, MixOptions{Seed: 2}), store, "solo", 0)
	if len(one.Incarnation) != 32 {
		t.Fatalf("a whole job's incarnation %q", one.Incarnation)
	}
	if err := one.Save(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if st, err := store.LoadMix(ctx, "solo", 1, 0); err != nil || st.Incarnation != one.Incarnation {
		t.Fatalf("saved %q, %v", st.Incarnation, err)
	}
	for r, inc := range []string{"a", "b"} {
		ck := NewMixCheckpointer(newMix(t, src, MixOptions{Seed: 2, Rank: r, WorldSize: 2}), store, "two", 0)
		if ck.Incarnation != "" {
			t.Fatalf("rank %d of two chose incarnation %q", r, ck.Incarnation)
		}
		ck.Incarnation = inc
		if err := ck.Save(ctx, 5); err != nil {
			t.Fatal(err)
		}
	}
	if step, err := store.LatestMix(ctx, "two"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("LatestMix = %d, %v: step 5 holds ranks of two starts", step, err)
	}
}
