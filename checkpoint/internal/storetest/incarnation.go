package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/checkpoint"
)

// Incarnation runs the tests of dead starts' leftovers against the stores
// open makes: a step is complete only with every rank's state of one
// incarnation, whatever a dead start left in it.
func Incarnation(t *testing.T, open Opener) {
	t.Run("KilledMidSave", func(t *testing.T) { testKilledMidSave(t, open) })
	t.Run("LeftoversOfALargerWorld", func(t *testing.T) { testLargerWorldLeftovers(t, open) })
	t.Run("NoIncarnation", func(t *testing.T) { testNoIncarnation(t, open) })
	t.Run("NeverMixed", func(t *testing.T) { testNeverMixed(t, open) })
	t.Run("Mix", func(t *testing.T) { testMixIncarnation(t, open) })
}

// incState is rank's state of world, saved by incarnation inc: its cursors
// say which start took them, so a merge that mixed two starts shows.
func incState(rank, world int, inc string) checkpoint.State {
	st := State(rank, world, 4)
	st.Incarnation = inc
	for s := range st.Cursors {
		if st.Owns(s) {
			st.Cursors[s].Rows = int64(len(inc)*100000 + int(inc[len(inc)-1])*100 + s)
		}
	}
	return st
}

func save(t *testing.T, s checkpoint.Store, step int64, st checkpoint.State) {
	t.Helper()
	if err := s.Save(context.Background(), "r", step, st.Rank, st); err != nil {
		t.Fatalf("Save step %d rank %d of %q: %v", step, st.Rank, st.Incarnation, err)
	}
}

// testKilledMidSave: start "a" of a job dies while saving step 2 (rank 0
// saved, rank 1 not), start "b" resumes from step 1 and saves step 2 rank
// by rank. Until b's last rank is saved the step holds a's state beside
// b's and is incomplete, though every rank is there.
func testKilledMidSave(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _, _ := open(t)
	save(t, s, 1, incState(0, 2, "a"))
	save(t, s, 1, incState(1, 2, "a"))
	save(t, s, 2, incState(0, 2, "a")) // then a is killed
	save(t, s, 2, incState(1, 2, "b"))
	_, err := s.LoadStep(ctx, "r", 2)
	// Which start's step it is judged as is the marker's where the store
	// keeps one (b's, whose save found both ranks there), else rank 0's.
	WantErr(t, err, checkpoint.ErrIncomplete, "another start's", `incarnation "a"`, `incarnation "b"`)
	if step, err := s.Latest(ctx, "r"); err != nil || step != 1 {
		t.Fatalf("Latest = %d, %v; want 1: step 2 mixes starts a and b", step, err)
	}
	infos, err := s.List(ctx, "r")
	if err != nil || len(infos) != 2 || infos[1].Complete || !slices.Equal(infos[1].Ranks, []int{0, 1}) {
		t.Fatalf("List = %+v, %v", infos, err)
	}
	save(t, s, 2, incState(0, 2, "b"))
	m, err := s.LoadStep(ctx, "r", 2)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := checkpoint.Merge(incState(0, 2, "b"), incState(1, 2, "b"))
	if !slices.Equal(m.Cursors, want.Cursors) || m.Incarnation != "b" {
		t.Fatalf("step 2 merged to %+v, want b's %+v", m.Cursors, want.Cursors)
	}
	if step, err := s.Latest(ctx, "r"); err != nil || step != 2 {
		t.Fatalf("Latest = %d, %v; want 2", step, err)
	}
	if infos, _ := s.List(ctx, "r"); !infos[1].Complete || infos[1].Incarnation != "b" {
		t.Fatalf("List step 2 = %+v", infos[1])
	}

	// A straggler of start a (a process that outlived its job) saves over
	// rank 1 of the complete step: the step is no longer complete, and
	// Latest falls back rather than merging a's rank with b's.
	save(t, s, 2, incState(1, 2, "a"))
	if step, err := s.Latest(ctx, "r"); err != nil || step != 1 {
		t.Fatalf("Latest after a straggler's save = %d, %v; want 1", step, err)
	}
	_, err = s.LoadStep(ctx, "r", 2)
	WantErr(t, err, checkpoint.ErrIncomplete)
}

// testLargerWorldLeftovers: a start at world size 4 died with ranks 2 and
// 3 of step 5 saved; the next start, at world size 2, saves step 5 whole.
// Ranks 2 and 3 are no part of its step.
func testLargerWorldLeftovers(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _, _ := open(t)
	save(t, s, 5, incState(2, 4, "a"))
	save(t, s, 5, incState(3, 4, "a"))
	save(t, s, 5, incState(0, 2, "b"))
	_, err := s.LoadStep(ctx, "r", 5)
	WantErr(t, err, checkpoint.ErrIncomplete)
	save(t, s, 5, incState(1, 2, "b"))
	m, err := s.LoadStep(ctx, "r", 5)
	if err != nil || m.WorldSize != 2 || m.Incarnation != "b" {
		t.Fatalf("LoadStep = %+v, %v", m, err)
	}
	infos, err := s.List(ctx, "r")
	if err != nil || !infos[0].Complete || !slices.Equal(infos[0].Ranks, []int{0, 1, 2, 3}) || infos[0].WorldSize != 2 {
		t.Fatalf("List = %+v, %v", infos, err)
	}
}

// testNoIncarnation: states without an incarnation (an older sluice's, or
// a caller's that names none) complete a step among themselves, and not
// with a state that names one.
func testNoIncarnation(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _, _ := open(t)
	old := State(0, 2, 4)
	save(t, s, 1, old)
	save(t, s, 1, State(1, 2, 4))
	if m, err := s.LoadStep(ctx, "r", 1); err != nil || m.Incarnation != "" {
		t.Fatalf("LoadStep = %+v, %v", m, err)
	}
	save(t, s, 2, State(0, 2, 4))
	save(t, s, 2, incState(1, 2, "b"))
	_, err := s.LoadStep(ctx, "r", 2)
	WantErr(t, err, checkpoint.ErrIncomplete, "missing")
	if step, err := s.Latest(ctx, "r"); err != nil || step != 1 {
		t.Fatalf("Latest = %d, %v", step, err)
	}
}

// testNeverMixed saves ranks of one step from several starts, of several
// world sizes, in random orders, and checks after every save that a step
// the store offers is all one start's: every rank of its world holds that
// start's state, and the merge is of those states.
func testNeverMixed(t *testing.T, open Opener) {
	ctx := context.Background()
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 11))
			s, _, _ := open(t)
			type save struct {
				rank, world int
				inc         string
			}
			var saves []save
			for i := range 2 + r.IntN(3) {
				inc := fmt.Sprintf("start-%d", i)
				world := []int{1, 2, 4}[r.IntN(3)]
				for rank := range world {
					if r.IntN(4) > 0 { // some ranks of a start never save (it died)
						saves = append(saves, save{rank, world, inc})
					}
				}
			}
			// Starts overlap: a straggler of an old start saves after a new one.
			r.Shuffle(len(saves), func(i, j int) { saves[i], saves[j] = saves[j], saves[i] })
			stored := map[int]checkpoint.State{}
			for _, sv := range saves {
				st := incState(sv.rank, sv.world, sv.inc)
				if err := s.Save(ctx, "r", 7, sv.rank, st); err != nil {
					t.Fatal(err)
				}
				stored[sv.rank] = st
				m, err := s.LoadStep(ctx, "r", 7)
				if err != nil {
					if !errors.Is(err, checkpoint.ErrIncomplete) && !errors.Is(err, checkpoint.ErrMismatch) {
						t.Fatalf("LoadStep: %v", err)
					}
					continue
				}
				var states []checkpoint.State
				for rank := range m.WorldSize {
					st, ok := stored[rank]
					if !ok || st.Incarnation != m.Incarnation || st.WorldSize != m.WorldSize {
						t.Fatalf("step offered as %q's at world size %d, but rank %d holds %+v", m.Incarnation, m.WorldSize, rank, st)
					}
					states = append(states, st)
				}
				want, err := checkpoint.Merge(states...)
				if err != nil || !slices.Equal(want.Cursors, m.Cursors) {
					t.Fatalf("offered merge %v, the start's states merge to %v (%v)", m.Cursors, want.Cursors, err)
				}
			}
		})
	}
}

// testMixIncarnation: a mix's steps are judged alike.
func testMixIncarnation(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _, _ := open(t)
	ms := s.(checkpoint.MixStore)
	mix := func(rank int, inc string) checkpoint.MixState {
		st := MixState(rank, 2, 4)
		st.Incarnation = inc
		return st
	}
	saveMix := func(step int64, st checkpoint.MixState) {
		t.Helper()
		if err := ms.SaveMix(ctx, "m", step, st.Rank, st); err != nil {
			t.Fatal(err)
		}
	}
	saveMix(1, mix(0, "a"))
	saveMix(1, mix(1, "a"))
	saveMix(2, mix(0, "a"))
	saveMix(2, mix(1, "b"))
	_, err := ms.LoadMixStep(ctx, "m", 2)
	WantErr(t, err, checkpoint.ErrIncomplete, `incarnation "a"`)
	if step, err := ms.LatestMix(ctx, "m"); err != nil || step != 1 {
		t.Fatalf("LatestMix = %d, %v", step, err)
	}
	infos, err := ms.ListMix(ctx, "m")
	if err != nil || len(infos) != 2 || !infos[0].Complete || infos[1].Complete {
		t.Fatalf("ListMix = %+v, %v", infos, err)
	}
	saveMix(2, mix(0, "b"))
	if m, err := ms.LoadMixStep(ctx, "m", 2); err != nil || m.Incarnation != "b" {
		t.Fatalf("LoadMixStep = %+v, %v", m, err)
	}
}
