package flatdecode

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestUnpack checks unpack against values read bit by bit, at every width
// a dictionary index may have, from every bit offset within a byte, for
// counts around the groups of eight and data ending right after the last
// value, so that each of its three ways of reading meets the others.
func TestUnpack(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for w := uint(1); w <= 32; w++ {
		for start := range 8 {
			for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 200} {
				bitsLen := start + n*int(w)
				data := make([]byte, (bitsLen+7)/8)
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				want := make([]uint32, n)
				for i := range want {
					for b := range int(w) {
						at := start + i*int(w) + b
						want[i] |= uint32(data[at/8]>>(at%8)&1) << b
					}
				}
				got := make([]uint32, n)
				unpack(got, data, start, w)
				if !slices.Equal(got, want) {
					t.Fatalf("width %d, from bit %d, %d values: got %v, want %v", w, start, n, got, want)
				}
			}
		}
	}
}

func BenchmarkUnpack(b *testing.B) {
	for _, w := range []uint{1, 8, 15, 17, 32} {
		b.Run(fmt.Sprint("w", w), func(b *testing.B) {
			const n = 4096
			data := make([]byte, n*int(w)/8+8)
			for i := range data {
				data[i] = byte(i * 131)
			}
			dst := make([]uint32, n)
			b.SetBytes(n * 4)
			for b.Loop() {
				unpack(dst, data, 3, w)
			}
		})
	}
}
