package flatdecode

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestGatherFixed checks the dictionary gather of 4- and 8-byte values (and
// of FIXED_LEN_BYTE_ARRAY's widths) at every alignment of the dictionary and the output (words where both are
// aligned, bytes otherwise) against a value-by-value reference, and that
// an index past the dictionary is reported at its position.
func TestGatherFixed(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, pw := range []int{4, 8, 3, 16} { // 3 and 16: FIXED_LEN_BYTE_ARRAY
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
	page, offs := stringDictionary(rng, 32768, 10, 20)
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

// stringDictionary is a PLAIN dictionary page of n entries of lo to hi
// letters, and where each entry starts (its length before it).
func stringDictionary(rng *rand.Rand, n, lo, hi int) ([]byte, []uint32) {
	var page []byte
	offs := []uint32{}
	for range n {
		offs = append(offs, uint32(len(page)))
		l := lo + rng.IntN(hi-lo+1)
		page = binary.LittleEndian.AppendUint32(page, uint32(l))
		for range l {
			page = append(page, byte('a'+rng.IntN(26)))
		}
	}
	// No room past the end: a read past the last entry panics.
	return page[:len(page):len(page)], append(offs, uint32(len(page)))
}

// TestCompactDictionary checks the entries put end to end against the
// page, for entries of every length around the 32-byte move and for pages
// whose last entries leave less than 32 bytes after them.
func TestCompactDictionary(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 2, 3, 7, 64, 1000} {
		for _, hi := range []int{0, 5, 16, 31, 32, 33, 40, 70} {
			page, offs := stringDictionary(rng, n, 0, hi)
			var want []byte
			for i := range n {
				want = append(want, page[offs[i]+4:offs[i+1]]...)
			}
			r := &Reader{}
			r.dict.data, r.dict.offs, r.dict.count = page, offs, n
			if got := r.compactDictionary(); !bytes.Equal(got, want) {
				t.Fatalf("%d entries of up to %d bytes: compacted\n%q\nwant\n%q", n, hi, got, want)
			}
		}
	}
}

// BenchmarkCompactDictionary puts the 32,768 entries of 10 to 20 bytes of
// a dictionary page (the bench data's string column) end to end.
func BenchmarkCompactDictionary(b *testing.B) {
	page, offs := stringDictionary(rand.New(rand.NewPCG(5, 6)), 32768, 10, 20)
	b.SetBytes(int64(len(page)))
	for b.Loop() {
		r := &Reader{}
		r.dict.data, r.dict.offs, r.dict.count = page, offs, 32768
		r.compactDictionary()
	}
}

// spreadReference is spread one byte at a time.
func spreadReference(out []byte, w int, vbits []byte, row, k, m int) {
	vals := append([]byte(nil), out[row*w:(row+m)*w]...)
	j := 0
	for i := range k {
		slot := out[(row+i)*w : (row+i+1)*w]
		if vbits[(row+i)/8]&(1<<((row+i)%8)) != 0 {
			copy(slot, vals[j*w:(j+1)*w])
			j++
		} else {
			clear(slot)
		}
	}
}

// TestSpread checks spread against spreadReference for every width a
// fixed-width column has, at every null rate, from rows not at the start
// of the buffer, in buffers word aligned and not, and that it writes
// nothing outside rows [row, row+k).
func TestSpread(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, w := range []int{1, 2, 4, 8, 12, 16} {
		for _, nullRate := range []float64{0, 0.01, 0.5, 0.99, 1} {
			for _, k := range []int{1, 7, 64, 1000} {
				row := rng.IntN(9)
				total := row + k + 3
				vbits := make([]byte, (total+7)/8)
				m := 0
				for i := row; i < row+k; i++ {
					if rng.Float64() >= nullRate {
						vbits[i/8] |= 1 << (i % 8)
						m++
					}
				}
				// Word aligned, and not: spread moves words only where
				// they are.
				off := rng.IntN(2)
				got := make([]byte, total*w+1)[off : off+total*w]
				for i := range got {
					got[i] = byte(rng.Uint32())
				}
				want := append([]byte(nil), got...)
				spread(got, w, vbits, row, k, m)
				spreadReference(want, w, vbits, row, k, m)
				if !bytes.Equal(got, want) {
					t.Fatalf("width %d, null rate %v, %d rows from %d (%d not null): spread wrote\n%v\nwant\n%v", w, nullRate, k, row, m, got, want)
				}
			}
		}
	}
}

// BenchmarkSpread spreads 8,192 int64s over rows one in ten of which is
// null, as an optional column's page decodes them.
func BenchmarkSpread(b *testing.B) {
	rng := rand.New(rand.NewPCG(13, 14))
	const k = 8192
	vbits := make([]byte, k/8)
	m := 0
	for i := range k {
		if rng.IntN(10) != 0 {
			vbits[i/8] |= 1 << (i % 8)
			m++
		}
	}
	out := make([]byte, 8*k)
	b.SetBytes(8 * k)
	for b.Loop() {
		spread(out, 8, vbits, 0, k, m)
	}
}

// TestBuildPrefixed builds DELTA_BYTE_ARRAY values from prefixes and
// suffixes of every length around the 32-byte moves, into a buffer with no
// room past its end, and checks them against the values encoded.
func TestBuildPrefixed(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, hi := range []int{0, 3, 16, 31, 32, 33, 50, 90} {
		for _, n := range []int{1, 2, 5, 200} {
			var values [][]byte
			var prefixes, lens []int64
			var suffixes, want []byte
			var prev []byte
			for range n {
				// A prefix of the value before (often all of it),
				// then a suffix of up to hi bytes.
				p := rng.IntN(len(prev) + 1)
				if rng.IntN(3) == 0 {
					p = len(prev)
				}
				v := append([]byte(nil), prev[:p]...)
				for range rng.IntN(hi + 1) {
					v = append(v, byte('a'+rng.IntN(26)))
				}
				values = append(values, v)
				prefixes = append(prefixes, int64(p))
				lens = append(lens, int64(len(v)-p))
				suffixes = append(suffixes, v[p:]...)
				want = append(want, v...)
				prev = v
			}
			buf := make([]byte, len(want))
			suffixes = suffixes[:len(suffixes):len(suffixes)]
			buildPrefixed(buf, prefixes, lens, suffixes)
			if !bytes.Equal(buf, want) {
				t.Fatalf("%d values of suffixes up to %d bytes: built\n%q\nwant\n%q", n, hi, buf, want)
			}
			for i, v := range values {
				if lens[i] != int64(len(v)) {
					t.Fatalf("%d values of suffixes up to %d bytes: value %d's length %d, want %d", n, hi, i, lens[i], len(v))
				}
			}
		}
	}
}

// BenchmarkBuildPrefixed builds 8,192 sorted keys of a DELTA_BYTE_ARRAY
// page: each shares 4 to 12 bytes with the key before and adds 6 to 14.
func BenchmarkBuildPrefixed(b *testing.B) {
	rng := rand.New(rand.NewPCG(17, 18))
	const n = 8192
	prefixes, lens := make([]int64, n), make([]int64, n)
	var suffixes []byte
	total, prev := 0, 0
	for i := range n {
		p := min(prev, 4+rng.IntN(9))
		l := 6 + rng.IntN(9)
		prefixes[i], lens[i] = int64(p), int64(l)
		for range l {
			suffixes = append(suffixes, byte('a'+rng.IntN(26)))
		}
		prev = p + l
		total += prev
	}
	buf := make([]byte, total)
	work := make([]int64, n)
	b.SetBytes(int64(total))
	for b.Loop() {
		copy(work, lens)
		buildPrefixed(buf, prefixes, work, suffixes)
	}
}
