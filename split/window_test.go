package split

import (
	"math/rand/v2"
	"testing"
)

func TestWindows(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		rows := make([]int64, r.IntN(30))
		for i := range rows {
			rows[i] = int64(1 + r.IntN(400))
		}
		size := 1 + r.IntN(1000)
		ws := Windows(rows, size)
		next := 0
		for _, w := range ws {
			if w.First != next || w.End <= w.First {
				t.Fatalf("window %+v after %d", w, next)
			}
			var n int64
			for _, x := range rows[w.First:w.End] {
				n += x
			}
			if n != w.Rows {
				t.Fatalf("window %+v holds %d rows", w, n)
			}
			if n > int64(size) && w.End-w.First > 1 {
				t.Fatalf("window %+v over %d rows with several pieces", w, size)
			}
			next = w.End
		}
		if next != len(rows) {
			t.Fatalf("windows cover %d of %d pieces", next, len(rows))
		}
	}
	if ws := Windows([]int64{5, -1, 5}, 100); len(ws) != 3 || ws[1].Rows != -1 {
		t.Fatalf("a piece of unknown count must be a window of its own: %+v", ws)
	}
}
