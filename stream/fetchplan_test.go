package stream

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/internal/synth"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/split"
)

// The fetch plan of a whole epoch, for random shapes and options: every
// piece of every window is in exactly one group; a group is contiguous rows
// of one file; it is made by the earliest of its windows in read order and
// takes pieces only of the windows within FetchConcurrency of it, and of
// those past its own only under joinBytes.
func TestFetchPlan(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for range 12 {
		spec := synth.Spec{Files: 1 + r.IntN(5), RowsPerFile: 500 + r.IntN(3000), RowGroupRows: 50 + r.IntN(400), Seed: r.Uint64()}
		dir := writeDataset(t, spec)
		o := checkedOptions(t, dir)
		o.Shuffle, o.Seed = r.IntN(3) > 0, r.Uint64()
		o.NumSplits = 1 + r.IntN(4)
		o.ShuffleWindow = 200 + r.IntN(2000)
		o.FetchConcurrency = 1 + r.IntN(8)
		ds := open(t, o)
		ep := ds.ep
		s := newSchedule(ep, ds.opts, ds.cursors, ds.next)
		var order []windowRef
		for {
			if _, ok := s.step(func(w windowRef) { order = append(order, w) }); !ok {
				break
			}
		}
		planner := newFetchPlanner(ep, ds.chunks, ds.opts.FetchConcurrency)
		pos := map[windowRef]int{}
		for k, w := range order {
			pos[w] = k
		}
		owner := map[*fetchGroup]int{}
		members := map[*fetchGroup][]at{}
		for k := range order {
			task := planner.plan(order[k:])
			for _, g := range task.owned {
				if _, dup := owner[g]; dup {
					t.Fatalf("a group is owned twice")
				}
				owner[g] = k
			}
			for i, g := range task.pieces {
				if g == nil {
					t.Fatalf("%+v: window %v piece %d has no group when its window is planned", spec, task.ref, i)
				}
				if _, ok := owner[g]; !ok {
					t.Fatalf("%+v: window %v piece %d is in a group nobody makes", spec, task.ref, i)
				}
				members[g] = append(members[g], at{task.ref, i})
			}
		}
		if len(planner.claimed) != 0 {
			t.Errorf("%+v: %d windows hold claims after the last was planned", spec, len(planner.claimed))
		}
		for g, ms := range members {
			var rows, later int64
			for _, m := range ms {
				p := planner.pieces(m.w)[m.i]
				if p.Fragment != g.frag || p.Start < g.start || p.End > g.end {
					t.Fatalf("%+v: piece %+v outside its group [%d, %d) of file %d", spec, p, g.start, g.end, g.frag)
				}
				rows += p.Rows()
				k := pos[m.w]
				if k < owner[g] || k >= owner[g]+ds.opts.FetchConcurrency {
					t.Fatalf("%+v: window at %d in a group made at %d (FetchConcurrency %d)", spec, k, owner[g], ds.opts.FetchConcurrency)
				}
				if k > owner[g] {
					later += planner.bytes(p)
				}
			}
			if rows != g.end-g.start {
				t.Fatalf("%+v: group [%d, %d) holds %d rows of pieces", spec, g.start, g.end, rows)
			}
			if later > joinBytes {
				t.Fatalf("%+v: a group joins %d bytes of later windows", spec, later)
			}
		}
		t.Logf("%d windows, %d groups (shuffle %t, FetchConcurrency %d)", len(order), len(owner), o.Shuffle, o.FetchConcurrency)
	}
}

// Large pieces of later windows do not join a fetch past joinBytes: four
// adjacent windows of 3 MiB each make two fetches, not one of 12 MiB. The
// window's own pieces always join, whatever their size.
func TestFetchPlanJoinBytes(t *testing.T) {
	const mib = 1 << 20
	var chunks []split.Chunk
	var sp split.Split
	var windows []permutation.Window
	for i := range 4 {
		chunks = append(chunks, split.Chunk{Fragment: 0, Start: int64(i) * 100, End: int64(i+1) * 100, Bytes: 3 * mib})
		sp.Pieces = append(sp.Pieces, split.Piece{Chunk: i, Fragment: 0, Start: int64(i) * 100, End: int64(i+1) * 100})
		windows = append(windows, permutation.Window{First: i, End: i + 1, Rows: 100})
	}
	sp.Rows = 400
	ep := &epochPlan{splits: []split.Split{sp}, windows: [][]permutation.Window{windows}}
	order := []windowRef{{0, 0}, {0, 1}, {0, 2}, {0, 3}}
	fp := newFetchPlanner(ep, chunks, 4)
	var fetches [][2]int64
	for k := range order {
		for _, g := range fp.plan(order[k:]).owned {
			fetches = append(fetches, [2]int64{g.start, g.end})
		}
	}
	if want := [][2]int64{{0, 200}, {200, 400}}; !slices.Equal(fetches, want) {
		t.Errorf("fetches %v, want %v", fetches, want)
	}

	// One window of four 3 MiB pieces is one fetch of 12 MiB.
	ep.windows[0] = []permutation.Window{{First: 0, End: 4, Rows: 400}}
	fp = newFetchPlanner(ep, chunks, 4)
	task := fp.plan([]windowRef{{0, 0}})
	if len(task.owned) != 1 || task.owned[0].start != 0 || task.owned[0].end != 400 {
		t.Errorf("a window's own adjacent pieces: %d fetches, want one of rows [0, 400)", len(task.owned))
	}
}
