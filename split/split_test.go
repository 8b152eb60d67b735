package split

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func randomFragments(r *rand.Rand) []File {
	frags := make([]File, 1+r.IntN(6))
	for i := range frags {
		for range r.IntN(8) {
			rows := int64(r.IntN(500))
			frags[i].Units = append(frags[i].Units, Unit{Rows: rows, Bytes: rows * int64(1+r.IntN(20))})
		}
	}
	return frags
}

// Chunks cover every row of every fragment once, in order, at unit
// boundaries, within the size bounds.
func TestChunksCoverRows(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 500 {
		frags := randomFragments(r)
		o := ChunkOptions{TargetBytes: int64(1 + r.IntN(5000)), MaxRows: int64(r.IntN(800))}
		chunks := Chunks(frags, o)
		next := make([]int64, len(frags))
		for _, c := range chunks {
			if c.Start != next[c.Fragment] {
				t.Fatalf("chunk %+v does not start where the previous ended (%d)", c, next[c.Fragment])
			}
			if c.Rows() <= 0 {
				t.Fatalf("empty chunk %+v", c)
			}
			// A chunk ends at a unit boundary.
			var row int64
			boundary := false
			for _, u := range frags[c.Fragment].Units {
				row += u.Rows
				boundary = boundary || row == c.End
			}
			if !boundary {
				t.Fatalf("chunk %+v ends inside a unit", c)
			}
			next[c.Fragment] = c.End
		}
		for i, f := range frags {
			if next[i] != f.Rows() {
				t.Fatalf("fragment %d: chunks cover %d of %d rows", i, next[i], f.Rows())
			}
		}
	}
}

// Balance deals every row once into splits whose row counts differ by at
// most one; with DropRemainder they are equal and fewer than n rows drop.
func TestBalance(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for range 500 {
		chunks := Chunks(randomFragments(r), ChunkOptions{TargetBytes: 100})
		order := r.Perm(len(chunks))
		n := 1 + r.IntN(16)
		drop := r.IntN(2) == 0
		splits, err := Balance(chunks, order, n, drop)
		if err != nil {
			t.Fatal(err)
		}
		var total, got int64
		for _, c := range chunks {
			total += c.Rows()
		}
		// Splits are contiguous runs of the ordered rows.
		var seq []Piece
		lo, hi := int64(1<<62), int64(0)
		for _, s := range splits {
			var rows int64
			for _, p := range s.Pieces {
				if p.Rows() <= 0 {
					t.Fatalf("empty piece %+v", p)
				}
				rows += p.Rows()
			}
			if rows != s.Rows {
				t.Fatalf("split says %d rows, pieces hold %d", s.Rows, rows)
			}
			lo, hi = min(lo, rows), max(hi, rows)
			got += rows
			seq = append(seq, s.Pieces...)
		}
		if drop {
			if lo != hi || total-got >= int64(n) || total-got != total%int64(n) {
				t.Fatalf("DropRemainder: splits %d..%d rows, dropped %d of %d", lo, hi, total-got, total)
			}
		} else if hi-lo > 1 || got != total {
			t.Fatalf("splits %d..%d rows, %d of %d rows", lo, hi, got, total)
		}
		// Walking the pieces retraces the ordered chunks.
		k := 0
		for _, ci := range order {
			at := chunks[ci].Start
			for k < len(seq) && seq[k].Chunk == ci && at < chunks[ci].End {
				if seq[k].Start != at {
					t.Fatalf("piece %+v should start at %d", seq[k], at)
				}
				at = seq[k].End
				k++
			}
			if at != chunks[ci].End && !drop {
				t.Fatalf("chunk %d covered to %d of %d", ci, at, chunks[ci].End)
			}
		}
	}
}

func TestBalanceUnknownCounts(t *testing.T) {
	chunks := []Chunk{{0, -1, -1, 0, 1, 100, false}, {1, -1, -1, 0, 1, 300, false}, {2, -1, -1, 0, 1, 100, false}, {3, -1, -1, 0, 1, 100, false}}
	splits, err := Balance(chunks, []int{0, 1, 2, 3}, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]int
	for _, s := range splits {
		var cs []int
		for _, p := range s.Pieces {
			cs = append(cs, p.Chunk)
		}
		got = append(got, cs)
	}
	if !slices.Equal(got[0], []int{0, 1}) || !slices.Equal(got[1], []int{2, 3}) {
		t.Fatalf("byte-balanced splits %v", got)
	}
	if _, err := Balance(chunks, []int{0, 1, 2, 3}, 2, true); err == nil {
		t.Fatal("DropRemainder with unknown counts was accepted")
	}
	if _, err := Balance(chunks, []int{0, 1, 2, 3}, 0, false); err == nil {
		t.Fatal("NumSplits 0 was accepted")
	}
}

// Chunks makes paged units larger than CutRows chunks of their own, Paged,
// cut into chunks of at least MaxRows and CutBytes's worth where they hold
// two, equal within a row, tiling the unit's rows and bytes; it cuts no
// other unit.
func TestChunksCutPagedUnits(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 2000 {
		frags := randomFragments(r)
		for i := range frags {
			for j := range frags[i].Units {
				u := &frags[i].Units[j]
				u.Paged = r.IntN(2) == 0
				if r.IntN(3) == 0 {
					u.Rows *= int64(1 + r.IntN(40))
					u.Bytes = u.Rows * int64(1+r.IntN(20))
				}
			}
		}
		o := ChunkOptions{TargetBytes: int64(1 + r.IntN(5000)), MaxRows: int64(r.IntN(800)), CutRows: int64(r.IntN(3000)), CutBytes: int64(r.IntN(20000))}
		chunks := Chunks(frags, o)
		next := make([]int64, len(frags))
		type unitKey struct{ f, u int }
		cutBytes := map[unitKey]int64{}
		cutRows := map[unitKey][]int64{}
		for _, c := range chunks {
			if c.Start != next[c.Fragment] || c.Rows() <= 0 {
				t.Fatalf("%+v: chunk %+v does not start where the previous ended (%d), or is empty", o, c, next[c.Fragment])
			}
			next[c.Fragment] = c.End
			u := frags[c.Fragment].Units[c.FirstUnit]
			if want := o.CutRows > 0 && u.Paged && u.Rows > o.CutRows; c.Paged != want || (want && c.EndUnit != c.FirstUnit+1) {
				t.Fatalf("%+v: chunk %+v of unit %+v", o, c, u)
			}
			if c.EndUnit != c.FirstUnit+1 || c.Rows() == u.Rows {
				continue // whole units
			}
			if !u.Paged || u.Rows <= o.CutRows || o.CutRows <= 0 || !c.Paged {
				t.Fatalf("%+v: chunk %+v cuts a unit %+v it must not", o, c, u)
			}
			k := unitKey{c.Fragment, c.FirstUnit}
			cutBytes[k] += c.Bytes
			cutRows[k] = append(cutRows[k], c.Rows())
		}
		// Every paged unit over CutRows that holds two chunks' worth is cut.
		for fi, f := range frags {
			for ui, u := range f.Units {
				least := max(o.MaxRows, 1)
				if o.CutBytes > 0 {
					least = max(least, (o.CutBytes*u.Rows+u.Bytes-1)/max(u.Bytes, 1))
				}
				if o.CutRows > 0 && u.Paged && u.Rows > o.CutRows && u.Rows >= 2*least && cutRows[unitKey{fi, ui}] == nil {
					t.Fatalf("%+v: unit %+v is not cut", o, u)
				}
			}
		}
		for k, rows := range cutRows {
			u := frags[k.f].Units[k.u]
			if cutBytes[k] != u.Bytes || slices.Max(rows)-slices.Min(rows) > 1 {
				t.Fatalf("%+v: unit %+v cut into %v rows, %d bytes", o, u, rows, cutBytes[k])
			}
			// As many chunks as hold MaxRows and CutBytes's worth each.
			small := slices.Min(rows) < o.MaxRows || slices.Min(rows)*u.Bytes < o.CutBytes*u.Rows-u.Bytes
			if len(rows) > 1 && small {
				t.Fatalf("%+v: unit %+v cut into %v rows: chunks too small", o, u, rows)
			}
			if big := slices.Max(rows); big >= 2*max(o.MaxRows, 1)+2 && big*u.Bytes >= 2*o.CutBytes*u.Rows+2*u.Bytes {
				t.Fatalf("%+v: unit %+v cut into %v rows: chunks of half as many rows are allowed", o, u, rows)
			}
		}
		for i, f := range frags {
			if next[i] != f.Rows() {
				t.Fatalf("fragment %d: chunks cover %d of %d rows", i, next[i], f.Rows())
			}
		}
	}
}
