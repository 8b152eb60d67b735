package permutation

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// genMix is a random mix: 1 to 4 sources of a few to a few thousand rows
// per split, random weights, epoch definition and repetition.
func genMix(seed uint64) (MixOrder, [][]int64) {
	r := rand.New(rand.NewPCG(seed, 0x313c))
	o := MixOrder{Seed: r.Uint64(), NumSplits: 1 + r.IntN(4), Epoch: MixEpoch(r.IntN(3)), Repeat: r.IntN(3) > 0}
	k := 1 + r.IntN(4)
	scale := []int{3, 40, 900}[r.IntN(3)]
	rows := make([][]int64, k)
	for i := range rows {
		o.Weights = append(o.Weights, 0.05+r.Float64()*3)
		total := int64(r.IntN(scale*o.NumSplits) + 1)
		rows[i] = make([]int64, o.NumSplits)
		for s := range rows[i] {
			// Dealt as a dataset's splits are: counts within one.
			rows[i][s] = total / int64(o.NumSplits)
			if int64(s) < total%int64(o.NumSplits) {
				rows[i][s]++
			}
		}
	}
	o.Rows = 1 + r.Int64N(int64(scale*k*o.NumSplits))
	return o, rows
}

// TestPropertyMix: over random mixes, every mixed split's walk over three
// epochs takes each source's rows pass after pass, each row of a pass once
// and in the source's order (without Repeat: at most one pass, the mixed
// epoch's); walks resumed at any position and Locate agree with the walk
// from the start; epochs are as long as their definition says.
func TestPropertyMix(t *testing.T) {
	t.Parallel()
	n := 1000
	if testing.Short() {
		n = 200
	}
	for seed := range uint64(n) {
		o, rows := genMix(seed)
		if err := checkMix(seed, o, rows); err != nil {
			t.Fatalf("seed %d: %v\n\t%+v rows %v", seed, err, o, rows)
		}
	}
}

func checkMix(seed uint64, o MixOrder, rows [][]int64) error {
	m, err := NewMix(o, rows)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(seed, 1))
	for s := range o.NumSplits {
		taken := make([]int64, len(rows)) // rows of each source so far, across epochs
		for e := range int64(3) {
			w, err := m.Walk(e, s, 0)
			if err != nil {
				return err
			}
			var seq []MixRow
			inEpoch := make([]int64, len(rows))
			for {
				row, ok := w.Next()
				if !ok {
					break
				}
				seq = append(seq, row)
				k, rk := row.Source, rows[row.Source][s]
				want := MixRow{Source: k, Pass: taken[k] / max(rk, 1), Offset: taken[k] % max(rk, 1)}
				if !o.Repeat {
					want = MixRow{Source: k, Pass: e, Offset: inEpoch[k]}
				}
				if row != want || row.Offset >= rk {
					return fmt.Errorf("split %d epoch %d position %d: %+v, want %+v (source split of %d rows)", s, e, len(seq)-1, row, want, rk)
				}
				taken[k]++
				inEpoch[k]++
			}
			n := m.Len(e, s)
			if int64(len(seq)) != n {
				return fmt.Errorf("split %d epoch %d: walked %d rows, Len %d", s, e, len(seq), n)
			}
			if err := checkEpochLength(o, rows, s, inEpoch, n); err != nil {
				return fmt.Errorf("split %d epoch %d: %w", s, e, err)
			}
			for range 5 {
				if n == 0 {
					break
				}
				i := r.Int64N(n)
				got, err := m.Locate(e, s, i)
				if err != nil || got != seq[i] {
					return fmt.Errorf("split %d epoch %d: Locate(%d) = %+v, %v; the walk has %+v", s, e, i, got, err, seq[i])
				}
				w, err := m.Walk(e, s, i)
				if err != nil {
					return err
				}
				for j := i; j < min(i+20, n); j++ {
					if got, ok := w.Next(); !ok || got != seq[j] {
						return fmt.Errorf("split %d epoch %d: a walk from %d has %+v at %d, the walk from 0 %+v", s, e, i, got, j, seq[j])
					}
				}
				// NextSources, in chunks of any size, gives the same sources
				// to the end.
				if w, err = m.Walk(e, s, i); err != nil {
					return err
				}
				buf := make([]int, 1+r.IntN(50))
				for j := i; ; {
					got := w.NextSources(buf)
					if got == 0 {
						if j != n {
							return fmt.Errorf("split %d epoch %d: NextSources from %d ended at %d of %d", s, e, i, j, n)
						}
						break
					}
					for _, k := range buf[:got] {
						if k != seq[j].Source {
							return fmt.Errorf("split %d epoch %d: NextSources from %d has source %d at %d, the walk %d", s, e, i, k, j, seq[j].Source)
						}
						j++
					}
				}
			}
			if _, err := m.Locate(e, s, n); !errors.Is(err, ErrPosition) {
				return fmt.Errorf("split %d epoch %d: Locate at the end: %v, want ErrPosition", s, e, err)
			}
		}
	}
	return nil
}

// checkEpochLength holds an epoch to its definition, given the rows each
// source gave in it.
func checkEpochLength(o MixOrder, rows [][]int64, s int, got []int64, n int64) error {
	switch {
	case o.Epoch == MixRows:
		want := o.Rows / int64(o.NumSplits)
		if int64(s) < o.Rows%int64(o.NumSplits) {
			want++
		}
		var all int64
		for k := range rows {
			all += rows[k][s]
		}
		if !o.Repeat || all == 0 {
			want = min(want, all)
		}
		if n != want {
			return fmt.Errorf("a MixRows epoch of %d rows, want %d", n, want)
		}
	case o.Epoch == MixLargest:
		for k := range rows {
			if got[k] < rows[k][s] {
				return fmt.Errorf("MixLargest: source %d gave %d of its %d rows", k, got[k], rows[k][s])
			}
		}
	case o.Epoch == MixSmallest:
		done := false
		for k := range rows {
			done = done || (rows[k][s] > 0 && got[k] >= rows[k][s])
		}
		if !done && n > 0 {
			return fmt.Errorf("MixSmallest: no source completed its pass (%v of %v)", got, rows)
		}
	}
	return nil
}

// mixTolerance is the most a source's rows in any window of the mix may
// differ from its weight's share of the window, while no source runs out
// (Repeat): the merge by time keeps every source within a row of its share
// of elapsed time, and a window's ends add one more.
const mixTolerance = 3

// TestMixProportions: over many seeds and weights, every 10,000-row window
// of a mixed split holds each source's share of the window to within
// mixTolerance rows.
func TestMixProportions(t *testing.T) {
	t.Parallel()
	seeds := 60
	if testing.Short() {
		seeds = 20
	}
	const window = 10_000
	worst := 0.0
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 2))
		k := 2 + r.IntN(4)
		o := MixOrder{Seed: seed, NumSplits: 1, Epoch: MixRows, Rows: 40_000, Repeat: true}
		rows := make([][]int64, k)
		var sum float64
		for i := range rows {
			w := 0.01 + r.Float64()
			if i == 0 {
				w *= 20 // one dominant source, as in 70/20/10 mixes
			}
			o.Weights = append(o.Weights, w)
			sum += w
			rows[i] = []int64{int64(100 + r.IntN(20_000))}
		}
		m, err := NewMix(o, rows)
		if err != nil {
			t.Fatal(err)
		}
		epoch := int64(r.IntN(5))
		w, err := m.Walk(epoch, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		// prefix[k][i]: rows of source k in the first i positions.
		prefix := make([][]int64, k)
		for src := range prefix {
			prefix[src] = []int64{0}
		}
		for {
			row, ok := w.Next()
			if !ok {
				break
			}
			for src := range prefix {
				n := prefix[src][len(prefix[src])-1]
				if src == row.Source {
					n++
				}
				prefix[src] = append(prefix[src], n)
			}
		}
		for a := 0; a+window < len(prefix[0]); a += 37 {
			for src := range k {
				got := float64(prefix[src][a+window] - prefix[src][a])
				want := window * o.Weights[src] / sum
				if d := got - want; d > mixTolerance || d < -mixTolerance {
					t.Fatalf("seed %d: rows [%d, %d) hold %v of source %d, its weight %.4f of %.4f says %.1f", seed, a, a+window, got, src, o.Weights[src], sum, want)
				} else {
					worst = max(worst, max(d, -d))
				}
			}
		}
	}
	t.Logf("largest deviation from a source's share in a %d-row window: %.2f rows", window, worst)
}

func TestMixErrors(t *testing.T) {
	for _, c := range []struct {
		o    MixOrder
		rows [][]int64
		want string
	}{
		{MixOrder{Weights: []float64{1}, NumSplits: 1}, [][]int64{{-1}}, "counting pass"},
		{MixOrder{Weights: []float64{1, 0}, NumSplits: 1}, [][]int64{{1}, {1}}, "positive"},
		{MixOrder{Weights: []float64{1}, NumSplits: 2}, [][]int64{{1}}, "same NumSplits"},
		{MixOrder{Weights: []float64{1}, NumSplits: 1, Epoch: MixRows}, [][]int64{{1}}, "Rows"},
		{MixOrder{Weights: []float64{1}, NumSplits: 1}, [][]int64{{0}}, "no rows"},
	} {
		if _, err := NewMix(c.o, c.rows); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v %v: error %v, want one saying %q", c.o, c.rows, err, c.want)
		}
	}
}

// TestMixWalkDues: the due times a walk carries from row to row, without a
// division, are the ones timeline.due divides out, for random weights
// (1 to the whole scale), phases, caps and starting counts.
func TestMixWalkDues(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 0xd0e5))
	for trial := range 2000 {
		n := 1 + r.IntN(4)
		tl := timeline{w: make([]int64, n), phase: make([]int64, n), caps: make([]int64, n)}
		counts := make([]int64, n)
		for k := range n {
			switch r.IntN(3) {
			case 0:
				tl.w[k] = 1 + r.Int64N(16)
			case 1:
				tl.w[k] = mixScale - r.Int64N(16)
			default:
				tl.w[k] = 1 + r.Int64N(mixScale)
			}
			tl.phase[k] = r.Int64N(mixScale)
			tl.caps[k] = -1
			counts[k] = r.Int64N(1 << 30)
			if r.IntN(3) == 0 {
				tl.caps[k] = counts[k] + r.Int64N(50)
			}
		}
		w := &MixWalk{t: tl, counts: counts}
		w.startClocks()
		for step := range 200 {
			for k := range n {
				want := int64(math.MaxInt64)
				if c := tl.caps[k]; c < 0 || w.counts[k] < c {
					want = tl.due(k, w.counts[k])
				}
				if w.clocks[k].due != want {
					t.Fatalf("trial %d step %d source %d (weight %d, phase %d, count %d): due %d, want %d", trial, step, k, tl.w[k], tl.phase[k], w.counts[k], w.clocks[k].due, want)
				}
			}
			k := r.IntN(n)
			if w.clocks[k].due == math.MaxInt64 {
				continue
			}
			w.counts[k]++
			w.clocks[k].tick()
		}
	}
}

// TestMixSweep: NextSources, in buffers of any size, gives the sources the
// earliest-due walk gives one row at a time, from any position, for one to
// six sources of extreme and random weights: the sweep's loop of four
// registers, its loop over more sources, and the row-by-row steps at the
// ends of buffers and where sources have caps (without Repeat).
func TestMixSweep(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 0x5eed))
	for trial := range 3000 {
		n := 1 + r.IntN(6)
		o := MixOrder{Seed: r.Uint64(), Repeat: r.IntN(4) > 0, NumSplits: 1}
		rows := make([][]int64, n)
		for k := range rows {
			switch r.IntN(4) {
			case 0:
				o.Weights = append(o.Weights, 1e-7) // 1 after scaling
			case 1:
				o.Weights = append(o.Weights, 1e3)
			default:
				o.Weights = append(o.Weights, r.Float64())
			}
			rows[k] = []int64{1 << 40}
			if !o.Repeat {
				rows[k] = []int64{1 + r.Int64N(4000)}
			}
		}
		m, err := NewMix(o, rows)
		if err != nil {
			t.Fatal(err)
		}
		epoch := r.Int64N(5)
		from := r.Int64N(min(m.Len(epoch, 0), 1<<30))
		got, err := m.Walk(epoch, 0, from)
		if err != nil {
			t.Fatal(err)
		}
		want, err := m.Walk(epoch, 0, from)
		if err != nil {
			t.Fatal(err)
		}
		var one [1]int
		for taken := from; taken < from+3000; {
			buf := make([]int, 1+r.IntN(400))
			before := got.Taken(nil)
			g := got.NextSources(buf)
			after := got.Taken(nil)
			gave := make([]int64, n)
			for i, k := range buf[:g] {
				if want.NextSources(one[:]) != 1 || one[0] != k {
					t.Fatalf("trial %d (%+v, rows %v, epoch %d, from %d): row %d is of source %d, the row-by-row walk's of %d", trial, o, rows, epoch, from, taken+int64(i), k, one[0])
				}
				gave[k]++
			}
			for k := range gave {
				if after[k]-before[k] != gave[k] {
					t.Fatalf("trial %d after row %d: Taken moved by %d for source %d, NextSources gave %d of its rows", trial, taken+int64(g), after[k]-before[k], k, gave[k])
				}
			}
			if closed := m.Counts(epoch, 0, taken+int64(g)); !slices.Equal(got.Taken(nil), closed) {
				t.Fatalf("trial %d after row %d: Taken %v, the closed-form counts %v", trial, taken+int64(g), got.Taken(nil), closed)
			}
			if g == 0 {
				if want.NextSources(one[:]) != 0 {
					t.Fatalf("trial %d: the walk ended at %d, the row-by-row walk goes on", trial, taken)
				}
				break
			}
			taken += int64(g)
			if !slices.Equal(got.counts, want.counts) {
				t.Fatalf("trial %d after row %d: counts %v, the row-by-row walk's %v", trial, taken, got.counts, want.counts)
			}
		}
	}
}

// BenchmarkMixSources is the walk's cost per row of a mix of three
// sources weighted 2:1:1, as the stream's mixer draws it, a batch at a
// time.
func BenchmarkMixSources(b *testing.B) {
	m, err := NewMix(MixOrder{Weights: []float64{2, 1, 1}, Repeat: true, NumSplits: 1}, [][]int64{{1 << 40}, {1 << 40}, {1 << 40}})
	if err != nil {
		b.Fatal(err)
	}
	w, err := m.Walk(0, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]int, 1024)
	for b.Loop() {
		if w.NextSources(dst) != len(dst) {
			b.Fatal("the walk ended")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(dst)), "ns/row")
}
