package flatdecode

import (
	"encoding/binary"
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

// hybridStream encodes vals in Parquet's RLE / bit-packed hybrid encoding
// of width w: each run drawn as an RLE run of a repeated value where vals
// repeat, else a bit-packed run of one to four groups of eight (the last
// padded with zeros), as writers mix them.
func hybridStream(rng *rand.Rand, vals []uint32, w uint) []byte {
	var out []byte
	for i := 0; i < len(vals); {
		k := 1
		for i+k < len(vals) && vals[i+k] == vals[i] {
			k++
		}
		if k > 1 || rng.IntN(4) == 0 {
			out = binary.AppendUvarint(out, uint64(k)<<1)
			for b := range int(w+7) / 8 {
				out = append(out, byte(vals[i]>>(8*b)))
			}
			i += k
			continue
		}
		groups := 1 + rng.IntN(4)
		packed := make([]byte, groups*int(w))
		for j := range groups * 8 {
			var v uint32
			if i+j < len(vals) {
				v = vals[i+j]
			}
			for b := range int(w) {
				if v>>b&1 == 1 {
					at := j*int(w) + b
					packed[at/8] |= 1 << (at % 8)
				}
			}
		}
		out = binary.AppendUvarint(out, uint64(groups)<<1|1)
		out = append(out, packed...)
		i += groups * 8
	}
	return out
}

// TestCounts checks hybrid.counts against unpacking the same values and
// looking at them: on streams of runs that count up, broken here and there
// by a repeat or a jump, from every kind of position, it says the same,
// and where they count up it leaves the decoder where next leaves it.
func TestCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	oks := 0
	defer func() { t.Logf("%d of 3000 counted up", oks) }()
	for trial := range 3000 {
		w := uint(1 + rng.IntN(24))
		n := 1 + rng.IntN(300)
		vals := make([]uint32, n)
		v := uint32(rng.IntN(1 << min(w, 10)))
		for i := range vals {
			switch rng.IntN(60) {
			case 0:
				v += uint32(rng.IntN(3))
			case 1:
				v = uint32(rng.IntN(1 << min(w, 10)))
			}
			vals[i] = v & (1<<w - 1)
			v++
		}
		data := hybridStream(rng, vals, w)
		if rng.IntN(8) == 0 {
			data = data[:rng.IntN(len(data)+1)] // cut short
		}
		skip := rng.IntN(n)
		k := rng.IntN(n - skip + 5)
		h := newHybrid(data, w)
		if err := h.next(make([]uint32, skip)); err != nil {
			continue
		}
		from := vals[skip]
		if rng.IntN(4) == 0 {
			from += uint32(rng.IntN(3)) - 1
		}
		want := *h
		got := *h
		dst := make([]uint32, k)
		err := want.next(dst)
		wantOK := err == nil
		for i, x := range dst {
			wantOK = wantOK && x == from+uint32(i)
		}
		ok, gerr := got.counts(k, from)
		if wantOK {
			oks++
		}
		if ok != wantOK || (ok && gerr != nil) {
			t.Fatalf("trial %d: width %d, %d values from %d after %d: counts %v (%v), unpacked %v (%v)", trial, w, k, from, skip, ok, gerr, wantOK, err)
		}
		at := func(h hybrid) [5]int { return [5]int{h.pos, h.rleLeft, int(h.rleVal), h.bpLeft, h.bpBit} }
		if ok && at(got) != at(want) {
			t.Fatalf("trial %d: counts left the decoder at %+v, next at %+v", trial, got, want)
		}
	}
}
