package split

import (
	"math/rand/v2"
	"testing"
)

// Pass's arithmetic (Count, After) against counting row by row with Keeps,
// and Keeps against its definition: clump c of the chunk to pass c mod Of.
func TestPassArithmetic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		p := Pass{Of: 1 + r.IntN(9), Clump: 1 + r.Int64N(12), Base: r.Int64N(1000)}
		p.Index = r.IntN(p.Of)
		end := p.Base + r.Int64N(400)
		var kept []int64
		for x := p.Base; x < end; x++ {
			if want := p.Of <= 1 || int((x-p.Base)/p.Clump)%p.Of == p.Index; p.Keeps(x) != want {
				t.Fatalf("%+v: Keeps(%d) = %t", p, x, !want)
			}
			if p.Keeps(x) {
				kept = append(kept, x)
			}
		}
		for range 5 {
			start := p.Base + r.Int64N(end-p.Base+1)
			var n int64
			for _, x := range kept {
				if x >= start {
					n++
				}
			}
			if got := p.Count(start, end); got != n {
				t.Fatalf("%+v: Count(%d, %d) = %d, want %d", p, start, end, got, n)
			}
			if n == 0 {
				continue
			}
			k := 1 + r.Int64N(n)
			i := int64(len(kept)) - n + k - 1 // the k-th kept row at or after start
			if got := p.After(start, k); got != kept[i]+1 {
				t.Fatalf("%+v: After(%d, %d) = %d, want %d", p, start, k, got, kept[i]+1)
			}
		}
	}
}
