package orc

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// packBits packs vals of w bits each big-endian, one bit at a time: the
// plain reading of the format that unpack's fast paths are checked against.
func packBits(vals []uint64, w int) []byte {
	out := make([]byte, (len(vals)*w+7)/8)
	bit := 0
	for _, v := range vals {
		for b := w - 1; b >= 0; b-- {
			if v>>b&1 == 1 {
				out[bit/8] |= 0x80 >> (bit % 8)
			}
			bit++
		}
	}
	return out
}

// TestUnpackEveryWidth unpacks runs of every bit width RLE v2 packs, of
// every length up to a run's 512, and checks every value.
func TestUnpackEveryWidth(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 15))
	for _, w := range widths {
		for _, n := range []int{1, 2, 3, 7, 8, 9, 63, 64, 65, 511, 512} {
			vals := make([]uint64, n)
			for i := range vals {
				vals[i] = rng.Uint64()
				if w < 64 {
					vals[i] &= 1<<w - 1
				}
			}
			if n > 2 {
				vals[0], vals[1] = 0, 1<<w-1 // the extremes (all ones for 64)
				if w == 64 {
					vals[1] = ^uint64(0)
				}
			}
			r := &intRLEv2{b: append(packBits(vals, w), 0xaa)}
			got := make([]uint64, n)
			if err := r.unpack(got, w); err != nil {
				t.Fatalf("width %d, %d values: %v", w, n, err)
			}
			for i := range vals {
				if got[i] != vals[i] {
					t.Fatalf("width %d, %d values: value %d is %#x, want %#x", w, n, i, got[i], vals[i])
				}
			}
			if want := (n*w + 7) / 8; r.pos != want {
				t.Fatalf("width %d, %d values: consumed %d bytes, want %d", w, n, r.pos, want)
			}
		}
	}
}

// FuzzUnpack: unpack reads any bytes at any width as the bit-by-bit
// reading does.
func FuzzUnpack(f *testing.F) {
	f.Add(uint8(3), uint16(9), []byte{0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04})
	f.Add(uint8(30), uint16(2), bytes.Repeat([]byte{0xff}, 16))
	f.Fuzz(func(t *testing.T, code uint8, count uint16, data []byte) {
		w := widths[code%32]
		n := int(count%512) + 1
		r := &intRLEv2{b: data}
		got := make([]uint64, n)
		if err := r.unpack(got, w); err != nil {
			if n*w <= len(data)*8 {
				t.Fatalf("width %d, %d values of %d bytes: %v", w, n, len(data), err)
			}
			return
		}
		bit := 0
		for i := range n {
			var v uint64
			for range w {
				v = v<<1 | uint64(data[bit/8]>>(7-bit%8)&1)
				bit++
			}
			if got[i] != v {
				t.Fatalf("width %d: value %d is %#x, want %#x", w, i, got[i], v)
			}
		}
	})
}

// rleV1Literals encodes vals as RLE v1 literal runs of unsigned varints.
func rleV1Literals(vals []int64) []byte {
	var out []byte
	for len(vals) > 0 {
		k := min(len(vals), 128)
		out = append(out, byte(256-k))
		for _, v := range vals[:k] {
			out = binary.AppendUvarint(out, uint64(v))
		}
		vals = vals[k:]
	}
	return out
}

// TestDictionaryEveryValue reads dictionary-encoded strings with entries
// of every length from 0 to 16 bytes (kept as words) and with one longer
// (copied), with and without nulls, and checks every value.
func TestDictionaryEveryValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 16))
	for _, longest := range []int{16, 17} {
		for _, nulls := range []bool{false, true} {
			var entries [][]byte
			for l := range longest + 1 {
				e := make([]byte, l)
				for i := range e {
					e[i] = byte(rng.IntN(256))
				}
				entries = append(entries, e)
			}
			const rows = 5000
			ids := make([]int64, 0, rows)
			valid := make([]bool, rows)
			for i := range valid {
				valid[i] = !nulls || rng.IntN(4) > 0
				if valid[i] {
					ids = append(ids, int64(rng.IntN(len(entries))))
				}
			}
			lens := make([]int64, len(entries))
			for i, e := range entries {
				lens[i] = int64(len(e))
			}
			st := &stripeStreams{data: map[streamKey][]byte{
				{1, sDictionaryData}: bytes.Join(entries, nil),
				{1, sLength}:         rleV1Literals(lens),
				{1, sData}:           rleV1Literals(ids),
			}}
			if nulls {
				present := make([]byte, (rows+7)/8)
				for i, v := range valid {
					if v {
						present[i/8] |= 0x80 >> (i % 8)
					}
				}
				var p []byte
				for len(present) > 0 {
					k := min(len(present), 128)
					p = append(append(p, byte(256-k)), present[:k]...)
					present = present[k:]
				}
				st.data[streamKey{1, sPresent}] = p
			}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			b := base{id: 1, name: "s", mem: mem, dt: arrow.BinaryTypes.String}
			if p, ok := st.stream(1, sPresent); ok {
				b.present = &boolRLE{}
				b.present.reset(p)
			}
			s := &schema{}
			c, err := s.dictColumn(b, columnStreams{stripeStreams: st, id: 1, name: "s"}, encoding{kind: eDictionary, dictSize: uint64(len(entries))})
			if err != nil {
				t.Fatal(err)
			}
			if words := c.(*dictColumn).words != nil; words != (longest <= 16) {
				t.Fatalf("entries up to %d bytes: kept as words %v", longest, words)
			}
			row, j := 0, 0
			for row < rows {
				n := min(1+rng.IntN(700), rows-row)
				a, err := c.next(n, nil)
				if err != nil {
					t.Fatal(err)
				}
				strs := a.(*array.String)
				for i := range n {
					if !valid[row+i] {
						if !strs.IsNull(i) {
							t.Fatalf("row %d: %q, want null", row+i, strs.Value(i))
						}
						continue
					}
					if want := string(entries[ids[j]]); strs.IsNull(i) || strs.Value(i) != want {
						t.Fatalf("entries up to %d bytes, nulls %v: row %d is %q, want %q", longest, nulls, row+i, strs.Value(i), want)
					}
					j++
				}
				if end := strs.ValueOffsets()[n]; len(strs.ValueBytes()) != int(end) {
					t.Fatalf("row %d: %d value bytes for offsets to %d", row, len(strs.ValueBytes()), end)
				}
				a.Release()
				row += n
			}
			mem.AssertSize(t, 0)
		}
	}
}
