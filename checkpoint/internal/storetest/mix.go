package storetest

import (
	"context"
	"reflect"
	"testing"

	"github.com/sluicedata/sluice/checkpoint"
)

// MixState returns a valid mix state of one rank with distinct cursors.
func MixState(rank, world, splits int) checkpoint.MixState {
	st := checkpoint.MixState{
		Version:     checkpoint.MixStateVersion,
		Fingerprint: "mix-5e1d",
		Epoch:       2,
		NumSplits:   splits,
		WorldSize:   world,
		Rank:        rank,
		Cursors:     make([]int64, splits),
		Next:        min(1, splits/world-1),
		Taken:       [][]int64{make([]int64, splits), make([]int64, splits), make([]int64, splits)},
	}
	for s := rank; s < splits; s += world {
		st.Cursors[s] = int64(100*s + 7)
		for k := range st.Taken {
			st.Taken[k][s] = int64(1000*k + 10*s + 3)
		}
	}
	return st
}

// Mix runs the mix-state suite against the stores open makes: each must be
// a checkpoint.MixStore.
func Mix(t *testing.T, open Opener) {
	ctx := context.Background()
	mixStore := func(t *testing.T) (checkpoint.MixStore, checkpoint.Store, backdoor) {
		s, bd := openRaw(t, open)
		ms, ok := s.(checkpoint.MixStore)
		if !ok {
			t.Fatalf("%T is not a checkpoint.MixStore", s)
		}
		return ms, s, bd
	}
	saveStep := func(t *testing.T, s checkpoint.MixStore, run string, step int64, world, splits int) []checkpoint.MixState {
		t.Helper()
		var out []checkpoint.MixState
		for r := range world {
			st := MixState(r, world, splits)
			st.Epoch = step
			if err := s.SaveMix(ctx, run, step, r, st); err != nil {
				t.Fatalf("SaveMix step %d rank %d: %v", step, r, err)
			}
			out = append(out, st)
		}
		return out
	}

	t.Run("SaveLoadMerge", func(t *testing.T) {
		s, _, _ := mixStore(t)
		states := saveStep(t, s, "mix", 10, 2, 4)
		got, err := s.LoadMix(ctx, "mix", 10, 1)
		if err != nil || !reflect.DeepEqual(got, states[1]) {
			t.Fatalf("LoadMix: %+v, %v; want %+v", got, err, states[1])
		}
		merged, err := s.LoadMixStep(ctx, "mix", 10)
		if err != nil {
			t.Fatal(err)
		}
		want, err := checkpoint.MergeMix(states...)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(merged, want) || merged.Rank != -1 {
			t.Fatalf("LoadMixStep: %+v, want %+v", merged, want)
		}
		for sp := range 4 {
			if merged.Cursors[sp] != states[sp%2].Cursors[sp] || merged.Taken[2][sp] != states[sp%2].Taken[2][sp] {
				t.Fatalf("split %d: merged cursor %d, taken %d: not rank %d's", sp, merged.Cursors[sp], merged.Taken[2][sp], sp%2)
			}
		}
		if step, err := s.LatestMix(ctx, "mix"); err != nil || step != 10 {
			t.Fatalf("LatestMix: %d, %v", step, err)
		}
		_, err = s.LoadMix(ctx, "mix", 11, 0)
		WantErr(t, err, checkpoint.ErrNotFound, "step 11")
		_, err = s.LatestMix(ctx, "none")
		WantErr(t, err, checkpoint.ErrNotFound, `"none"`)
	})

	t.Run("Refuses", func(t *testing.T) {
		s, _, _ := mixStore(t)
		st := MixState(0, 2, 4)
		if err := s.SaveMix(ctx, "mix", 1, 1, st); err == nil {
			t.Fatal("a state saved under another rank's key was accepted")
		}
		merged := st
		merged.Rank = -1
		if err := s.SaveMix(ctx, "mix", 1, 0, merged); err == nil {
			t.Fatal("a merged state was saved per rank")
		}
		bad := st
		bad.Cursors = bad.Cursors[:3]
		if err := s.SaveMix(ctx, "mix", 1, 0, bad); err == nil {
			t.Fatal("a state with 3 cursors for 4 splits was saved")
		}
	})

	t.Run("LatestPassesOver", func(t *testing.T) {
		s, plain, bd := mixStore(t)
		saveStep(t, s, "mix", 5, 2, 4)
		// Step 6 lacks rank 1; step 7 has a damaged rank 0.
		if err := s.SaveMix(ctx, "mix", 6, 0, MixState(0, 2, 4)); err != nil {
			t.Fatal(err)
		}
		saveStep(t, s, "mix", 7, 2, 4)
		b := bd.get("mix", 7, 0)
		b[len(b)/2] ^= 0x40
		bd.put("mix", 7, 0, b)
		if step, err := s.LatestMix(ctx, "mix"); err != nil || step != 5 {
			t.Fatalf("LatestMix: %d, %v; want 5", step, err)
		}
		_, err := s.LoadMixStep(ctx, "mix", 6)
		WantErr(t, err, checkpoint.ErrIncomplete, "[1]")
		_, err = s.LoadMixStep(ctx, "mix", 7)
		WantErr(t, err, checkpoint.ErrCorrupt, "rank 0")

		// A dataset's state is not read as a mix's, nor the other way.
		if err := plain.Save(ctx, "data", 1, 0, State(0, 1, 4)); err != nil {
			t.Fatal(err)
		}
		_, err = s.LoadMix(ctx, "data", 1, 0)
		WantErr(t, err, checkpoint.ErrCorrupt, "dataset's state")
		_, err = plain.Load(ctx, "mix", 5, 0)
		WantErr(t, err, checkpoint.ErrCorrupt)
	})

	t.Run("Retain", func(t *testing.T) {
		s, plain, _ := mixStore(t)
		for step := range int64(4) {
			saveStep(t, s, "mix", step, 1, 2)
		}
		if err := s.RetainMix(ctx, "mix", 2); err != nil {
			t.Fatal(err)
		}
		for step := range int64(4) {
			_, err := s.LoadMix(ctx, "mix", step, 0)
			if kept := step >= 2; kept != (err == nil) {
				t.Fatalf("step %d after RetainMix(2): %v", step, err)
			}
		}
		if err := plain.Delete(ctx, "mix", 3); err != nil {
			t.Fatal(err)
		}
		if step, err := s.LatestMix(ctx, "mix"); err != nil || step != 2 {
			t.Fatalf("LatestMix after deleting step 3: %d, %v", step, err)
		}
	})
}
