package flatdecode

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestGatherFixed checks the dictionary gather of 4- and 8-byte values at
// every alignment of the dictionary and the output (words where both are
// aligned, bytes otherwise) against a value-by-value reference, and that
// an index past the dictionary is reported at its position.
func TestGatherFixed(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, pw := range []int{4, 8} {
		const count = 97
		dictBuf := make([]byte, count*pw+8)
		for i := range dictBuf {
			dictBuf[i] = byte(r.Uint32())
		}
		idx := make([]uint32, 300)
		for i := range idx {
			idx[i] = uint32(r.IntN(count))
		}
		for dAt := range 8 {
			dict := dictBuf[dAt : dAt+count*pw]
			want := make([]byte, len(idx)*pw)
			for i, ix := range idx {
				copy(want[i*pw:], dict[int(ix)*pw:int(ix+1)*pw])
			}
			for oAt := range 8 {
				outBuf := make([]byte, len(idx)*pw+8)
				out := outBuf[oAt : oAt+len(idx)*pw]
				if bad := gatherFixed(out, dict, idx, pw); bad != -1 {
					t.Fatalf("pw %d, dictionary at %d, out at %d: index %d reported bad", pw, dAt, oAt, bad)
				}
				if !bytes.Equal(out, want) {
					t.Fatalf("pw %d, dictionary at %d, out at %d: values differ", pw, dAt, oAt)
				}
				bad := append([]uint32(nil), idx...)
				bad[123] = count
				if got := gatherFixed(out, dict, bad, pw); got != 123 {
					t.Fatalf("pw %d, dictionary at %d, out at %d: index %d past the end reported at %d, want 123", pw, dAt, oAt, count, got)
				}
			}
		}
	}
	if gatherWords(make([]uint64, 4), make([]uint64, 2), []uint32{0, 1, 1, 2}) != 3 {
		t.Fatal("gatherWords: an index past the dictionary not reported at its position")
	}
}

// BenchmarkGatherStrings gathers 8,192 dictionary entries of 10 to 20
// bytes (the bench data's string column) out of 32,768.
func BenchmarkGatherStrings(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	var page []byte
	offs := []uint32{}
	for range 32768 {
		offs = append(offs, uint32(len(page)))
		l := 10 + rng.IntN(11)
		page = binary.LittleEndian.AppendUint32(page, uint32(l))
		for range l {
			page = append(page, byte('a'+rng.IntN(26)))
		}
	}
	offs = append(offs, uint32(len(page)))
	r := &Reader{}
	r.dict.data, r.dict.offs, r.dict.count = page, offs, 32768
	idx := make([]uint32, 8192)
	total := 0
	for i := range idx {
		idx[i] = uint32(rng.IntN(32768))
		total += int(offs[idx[i]+1] - offs[idx[i]] - 4)
	}
	out := make([]byte, total)
	b.SetBytes(int64(total))
	for b.Loop() {
		if r.gather(out, 0, idx) != total {
			b.Fatal("short")
		}
	}
}
