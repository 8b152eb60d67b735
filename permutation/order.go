package permutation

import (
	"math/bits"
)

// Order holds the options that decide which rows an epoch's splits emit and
// in which order. With the chunk list and the epoch they fix the order: a
// state is only resumable against the same Order.
type Order struct {
	// Shuffle turns shuffling on. Off, rows come in storage order.
	Shuffle bool
	// Seed selects the permutation: the same (Seed, epoch), the same order;
	// another epoch, another order.
	Seed uint64
	// ClumpSize is the number of contiguous rows (of one piece) that stay
	// together when a window is shuffled. Default 1: every row on its own.
	ClumpSize int
	// ShuffleWindow bounds the rows of a window. Pieces are never cut into
	// windows, so a piece larger than it is a window of its own.
	ShuffleWindow int
	// NumSplits is the number of splits an epoch is dealt into.
	NumSplits int
	// DropRemainder makes every split hold floor(rows/NumSplits) rows.
	DropRemainder bool
	// Passes is the number of times an epoch reads every chunk, each pass
	// keeping a disjoint part of its rows (split.Pass says which), so that
	// the chunk order moves Passes places per chunk. 0 or 1: one pass.
	Passes int
}

// Stream names the independent random streams drawn from (Seed, Epoch), so
// that changing how one is used never shifts another.
const (
	streamChunks = 1
	streamRows   = 2
)

// newRand returns the generator for one purpose. The inputs are mixed with
// splitmix64 so that nearby seeds and epochs give unrelated streams.
func newRand(o Order, epoch int64, stream uint64, a, b int) *pcg {
	h := mix(o.Seed ^ mix(uint64(epoch)+0x9e3779b97f4a7c15))
	h = mix(h ^ stream)
	h1 := mix(h ^ uint64(a))
	h2 := mix(h1 ^ uint64(b) ^ 0xda942042e4dd58b5)
	return &pcg{hi: h1, lo: h2}
}

func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// pcg is the generator of math/rand/v2's PCG, seeded as rand.NewPCG(hi, lo)
// seeds it, and drawing the same values (TestPCGIsRandPCG): a 128-bit linear
// congruential state, each value made of it by DXSM. It is written out here
// so that a shuffle can keep the state in registers across its draws
// (shuffleSlice). Through a *rand.PCG every draw stores the state and the
// next loads it again, a store-to-load trip on top of the multiplies that
// already chain one draw to the next: BenchmarkRowOrder took 2.4-2.5 ns a
// row that way, 2.2 with the state in registers, about the latency of the
// 128-bit multiply and add that make each state of the one before. A
// rand.Rand over it would be worse again: a draw through its Source
// interface is a call the compiler cannot inline.
type pcg struct{ hi, lo uint64 }

// The LCG's multiplier and increment, and DXSM's multiplier: PCG's own
// 128-bit constants, as math/rand/v2 uses them.
const (
	pcgMulHi    = 2549297995355413924
	pcgMulLo    = 4865540595714422341
	pcgIncHi    = 6364136223846793005
	pcgIncLo    = 1442695040888963407
	pcgCheapMul = 0xda942042e4dd58b5
)

// pcgStep advances the state (hi, lo) once: state*mul + inc, mod 2^128.
func pcgStep(hi, lo uint64) (uint64, uint64) {
	h, l := bits.Mul64(lo, pcgMulLo)
	h += hi*pcgMulLo + lo*pcgMulHi
	l, c := bits.Add64(l, pcgIncLo, 0)
	h, _ = bits.Add64(h, pcgIncHi, c)
	return h, l
}

// pcgValue is the value DXSM draws from a new state.
func pcgValue(hi, lo uint64) uint64 {
	hi ^= hi >> 32
	hi *= pcgCheapMul
	hi ^= hi >> 48
	return hi * (lo | 1)
}

// Uint64 draws the next value.
func (p *pcg) Uint64() uint64 {
	p.hi, p.lo = pcgStep(p.hi, p.lo)
	return pcgValue(p.hi, p.lo)
}

// below returns a uniform integer in [0, n) with Lemire's method, written
// out so that the order never depends on the standard library's choices.
func below(r *pcg, n uint64) uint64 {
	for {
		x := r.Uint64()
		hi, lo := bits.Mul64(x, n)
		if lo >= n || lo >= -n%n {
			return hi
		}
	}
}

// shuffle is a Fisher-Yates shuffle of n elements through swap.
func shuffle(r *pcg, n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		j := int(below(r, uint64(i+1)))
		swap(i, j)
	}
}

// shuffleSlice is shuffle of a slice, with the same draws and swaps: a
// window's order is drawn once per row, where a call of swap per row costs
// as much as the draw. The generator's state stays in locals for the whole
// shuffle (see pcg).
func shuffleSlice[T any](r *pcg, s []T) {
	hi, lo := r.hi, r.lo
	for i := len(s) - 1; i > 0; i-- {
		n := uint64(i + 1)
		var j uint64
		for {
			hi, lo = pcgStep(hi, lo)
			h, l := bits.Mul64(pcgValue(hi, lo), n)
			if l >= n || l >= -n%n {
				j = h
				break
			}
		}
		s[i], s[j] = s[j], s[i]
	}
	r.hi, r.lo = hi, lo
}

// ChunkOrder returns the order in which n chunks are taken this epoch: the
// storage order unshuffled, a seeded permutation otherwise.
func ChunkOrder(n int, o Order, epoch int64) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if o.Shuffle {
		shuffle(newRand(o, epoch, streamChunks, 0, 0), n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	return order
}

// RowOrder returns the order in which a window emits its rows, as indices
// into the window's rows (its pieces' rows concatenated, in piece order).
// segments are the pieces' row counts as read. Clumps of ClumpSize rows never
// cross a piece boundary. Unshuffled it returns nil: storage order.
//
// split and window identify the window, so every window of every split has
// its own independent order.
func RowOrder(segments []int64, o Order, epoch int64, split, window int) []int32 {
	if !o.Shuffle {
		return nil
	}
	clump := int64(max(o.ClumpSize, 1))
	var total int64
	for _, n := range segments {
		total += n
	}
	r := newRand(o, epoch, streamRows, split, window)
	out := make([]int32, total)
	if clump == 1 {
		for i := range out {
			out[i] = int32(i)
		}
		shuffleSlice(r, out)
		return out
	}
	// Clumps as (start, length), shuffled, then expanded.
	type span struct{ start, n int32 }
	var spans []span
	var at int64
	for _, n := range segments {
		for off := int64(0); off < n; off += clump {
			spans = append(spans, span{int32(at + off), int32(min(clump, n-off))})
		}
		at += n
	}
	shuffleSlice(r, spans)
	k := 0
	for _, s := range spans {
		for x := range s.n {
			out[k] = s.start + x
			k++
		}
	}
	return out
}
